// kiln: running a function on a thread of a large stack, for building the programs of large
// derivatives. An expression stores its run-time constants (a norm's eps, a view's extents) in
// its object, and a derivative's expression holds its forward values at each place a rule reads
// them, so its object can be large: the vector-Jacobian product of one GPT-2 layer is about
// 1.8 MB, and building it (the reverse walk's recursion holds the cotangents at each level)
// takes 32 to 64 MB of stack, more than a thread's usual 8 MB. The compiled program keeps none
// of it. docs/design-decisions.md, "Training a stack of layers", has the figures.
#pragma once
#include <pthread.h>

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

namespace kiln::detail {

inline constexpr std::size_t kLargeStackBytes = std::size_t{512} << 20;  // reserved address space, not memory

// Runs f() on a new thread of `bytes` of stack and waits for it; rethrows what f throws.
template <class F>
void on_large_stack(F&& f, std::size_t bytes = kLargeStackBytes) {
  struct Context {
    F* f;
    std::exception_ptr error;
  } context{&f, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        auto* c = static_cast<Context*>(p);
        try {
          (*c->f)();
        } catch (...) {
          c->error = std::current_exception();
        }
        return nullptr;
      },
      &context);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("kiln: cannot start a thread to build a program (pthread_create: " + std::to_string(rc) + ")");
  pthread_join(thread, nullptr);
  if (context.error) std::rethrow_exception(context.error);
}

}  // namespace kiln::detail
