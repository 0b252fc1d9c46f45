// kiln: binding a call's tensors to a program's symbols. f(x = xt, w = wt) passes Binding
// objects; the checks that can be made on their types are compile errors naming the symbol's
// type (unbound, bound twice, not in the expression), the rest are exceptions thrown before any
// kernel runs (a tensor without storage, a wrong rank, mixed devices, an assign target that is
// const or aliased).
#pragma once
#include <array>
#include <cstring>
#include <string>

#include "kiln/core/device.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/runtime/program_facts.hpp"

namespace kiln::runtime {

template <class X>
struct symbol_not_bound {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0,
                "kiln: this call leaves a symbol unbound (its name is the kiln::Name<...> in the symbol type shown "
                "below); bind every input and param of the expression, e.g. f(x = xt, w = wt)");
};
template <class X>
struct symbol_bound_twice {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0,
                "kiln: this call binds one symbol twice (its name is the kiln::Name<...> in the binding type shown "
                "below); bind each symbol once");
};
template <class X>
struct symbol_not_in_expression {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0,
                "kiln: this call binds a symbol that the compiled expression does not use (its name is the "
                "kiln::Name<...> in the binding type shown below); bind only the expression's inputs and params");
};

// Whether every argument of a call is a binding (x = xt), the only way to pass a tensor: a
// positional call f(xt, wt) is one static_assert, not a cascade of errors about Bs::id.
template <class B>
inline constexpr bool is_binding_v = false;
template <std::uint64_t Id, class T, class N>
inline constexpr bool is_binding_v<Binding<Id, T, N>> = true;
template <class... Bs>
inline constexpr bool all_bindings = (is_binding_v<std::remove_cvref_t<Bs>> && ...);
template <class... Bs>
inline constexpr bool positional_call = false;  // dependent, so it fires only when instantiated
#define KILN_POSITIONAL_CALL_MESSAGE                                                                                 \
  "kiln: bind inputs by symbol: f(x = xt, w = wt, ...), where x and w are the expression's kiln::input and "          \
  "kiln::param symbols; a compiled function takes no positional arguments"

// How many of the bindings Bs bind the symbol Id; more than one is a compile error.
template <std::uint64_t Id, class... Bs>
inline constexpr int binding_count = ((Bs::id == Id) + ... + 0);
template <class B, int Count>
constexpr void check_bound_once() {
  if constexpr (Count > 1) (void)symbol_bound_twice<B>::value;
}

// One call's bound tensors, indexed like the program's symbols.
template <int NSymbols>
struct Inputs {
  std::array<const void*, NSymbols + 1> data{};
  std::array<void*, NSymbols + 1> mutable_data{};  // bound to a non-const tensor
  std::array<Shape, NSymbols + 1> shapes{};
  Device device = Device::cpu();  // where every bound tensor lives, and so the call runs
};

template <class F>
struct Binder {
  static constexpr int kSymbols = F::kSymbols;
  using In = Inputs<kSymbols>;

  template <class B>
  static constexpr void check_known() {
    if constexpr (F::symbol_index(B::id) < 0) (void)symbol_not_in_expression<B>::value;
  }
  template <int S, class... Bs>
  static constexpr void check_bound() {
    constexpr std::uint64_t id = F::program::graph.nodes[F::kSymbolNodes[S]].symbol_id;
    if constexpr (!((Bs::id == id) || ... || false))
      (void)symbol_not_bound<typename F::graph_type::template node<F::kSymbolNodes[S]>>::value;
  }
  template <class... Bs, int... S>
  static constexpr void check_all_bound(std::integer_sequence<int, S...>) {
    (check_bound<S, Bs...>(), ...);
  }
  // Every symbol bound exactly once, and nothing else: compile-time errors that name the type.
  template <class... Bs>
  static constexpr void check_bindings() {
    (check_known<Bs>(), ...);
    (check_bound_once<Bs, binding_count<Bs::id, Bs...>>(), ...);
    check_all_bound<Bs...>(std::make_integer_sequence<int, kSymbols>{});
  }

  // The call's tensors by symbol; checks storage, ranks and that they share one device.
  // with_cuda: the translation unit has the CUDA backend.
  template <bool with_cuda, class... Bs>
  static In bind(const Bs&... bs) {
    In in;
    std::array<Device, kSymbols + 1> devices{};
    ([&] {
      if constexpr (F::symbol_index(Bs::id) >= 0) {
        constexpr int s = F::symbol_index(Bs::id);
        in.data[s] = bs.tensor->data();
        in.mutable_data[s] = bs.mutable_tensor ? bs.mutable_tensor->data() : nullptr;
        in.shapes[s] = bs.tensor->shape();
        devices[s] = bs.tensor->device();
      }
    }(), ...);
    if (kSymbols > 0) in.device = devices[0];
    for (int s = 1; s < kSymbols; ++s)
      if (!(devices[s] == in.device))
        throw DeviceError(std::string("kiln: '") + F::symbol_name(0) + "' is on " + in.device.str() + " and '" +
                          F::symbol_name(s) + "' on " + devices[s].str() + "; bind tensors of one device (move them with .to())");
    if (!with_cuda && in.device.is_cuda())
      throw DeviceError(std::string("kiln: '") + F::symbol_name(0) + "' is on " + in.device.str() +
                        ", and this translation unit has kiln's CPU backend only; build it with nvcc, or link it "
                        "with its generated kernels (kiln_cuda_executable in CMake, docs/cuda.md), or move the "
                        "tensors with .cpu()");
    for (int s = 0; s < kSymbols; ++s) {
      const auto& n = F::graph().nodes[F::kSymbolNodes[s]];
      if (in.data[s] == nullptr && in.shapes[s].numel() > 0)
        throw BindingError(std::string("symbol '") + n.name +
                           "': the bound tensor has no storage (moved from, or default-constructed)");
      if (in.shapes[s].rank() != n.rank)
        throw ShapeError(std::string("symbol '") + n.name + "': expected a tensor of rank " + std::to_string(n.rank) +
                         ", got shape " + in.shapes[s].str());
    }
    return in;
  }

  // Before any kernel: every assign target is bound to a writable tensor of the value's shape.
  static void check_assigns(const std::vector<Shape>& shapes, const In& in) {
    for (int k = 0; k < F::NOut; ++k) {
      const int s = F::kAssignTarget[k];
      if (s < 0) continue;
      const char* name = F::symbol_name(s);
      const Shape& value = shapes[F::graph().outputs[k]];
      if (in.mutable_data[s] == nullptr && in.shapes[s].numel() > 0)
        throw BindingError(std::string("assign: '") + name + "' is bound to a const tensor; bind a non-const one to update it");
      for (int u = 0; u < kSymbols; ++u)
        if (u != s && in.data[u] == in.data[s] && in.shapes[s].numel() > 0)
          throw BindingError(std::string("assign: '") + name + "' is updated in place, and its tensor is also bound to '" +
                             F::symbol_name(u) + "'; bind a separate tensor");
      if (!(in.shapes[s] == value))
        throw ShapeError(std::string("assign: '") + name + "' has shape " + in.shapes[s].str() + ", the value " + value.str());
    }
  }
};

// After every kernel: duplicate outputs copied from the first of them, assigned values written
// to their targets (so after every read of a target's old value). copy(dst, src, bytes) is the
// executor's copy on the call's device.
template <class F, class Plan, class Ptrs, class Copy>
void finish_outputs(const Plan& st, const Inputs<F::kSymbols>& in, const Ptrs& ptr, Copy&& copy) {
  for (int k = 0; k < F::NOut; ++k) {
    const int node = F::graph().outputs[k];
    const std::size_t bytes = st.node_bytes(node);
    const void* src = ptr[st.output_source[k]];
    if (bytes == 0) continue;
    void* dst = F::kAssignTarget[k] >= 0 ? in.mutable_data[F::kAssignTarget[k]] : ptr[F::kSymbols + k];
    if (src == dst) continue;
    copy(dst, src, bytes);
  }
}

}  // namespace kiln::runtime
