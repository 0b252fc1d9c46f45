// kiln: the compiled function object. kiln::compile(expr) instantiates the program of expr
// (graph, schedule, lowered kernels) at compile time. A call binds tensors to symbols
// (runtime/binding.hpp), finds the plan for the input shapes or builds one (runtime/planner.hpp;
// cached until the input shapes change, several under persistent policies), allocates fresh
// outputs and hands the plan to the executor of the tensors' device (runtime/cpu_executor.hpp,
// runtime/cuda_executor.hpp).
//
// Threads: a Compiled object keeps the plans and arenas of its call shapes, so its calls are
// serialised by a mutex of its own (held from the plan lookup to the last kernel; binding and
// the binding checks run before it is taken). One object called from several threads is safe
// and runs one call at a time; several objects, one per thread, run in parallel and share no
// lock. A single-threaded caller pays one uncontended lock per call. The mutex is held through
// a std::unique_ptr, so the object stays movable; a moved-from object must not be called
// (BindingError). A program with graph breaks locks each compiled segment for its own call;
// its host callbacks run outside the locks.
#pragma once
#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/runtime/autotune.hpp"
#include "kiln/runtime/binding.hpp"
#include "kiln/runtime/cpu_executor.hpp"
#include "kiln/runtime/explain.hpp"
#include "kiln/runtime/params.hpp"
#include "kiln/runtime/planner.hpp"
#include "kiln/runtime/policy.hpp"
#if KILN_WITH_CUDA
#include "kiln/runtime/cuda_executor.hpp"
#endif

namespace kiln::runtime {
inline namespace KILN_BACKEND_NS {

template <class Root, class Policy>
class Compiled {
 public:
  using program = lower::Program<Root, Policy::fuse>;
  using graph_type = typename program::graph_type;
  using policy = Policy;
  using facts = ProgramFacts<program, Root>;
  static constexpr int N = program::size;
  static constexpr int NOut = graph_type::noutputs;
  static constexpr int nkernels = program::nkernels;

  explicit Compiled(const Root& root) : params_(node_params<graph_type>(root)) {}

  // Runs the program: f(x = xt, w = wt, ...). Returns a Tensor, or a std::tuple of tensors
  // for kiln::outputs(...); the outputs are fresh tensors.
  template <class... Bs>
  auto operator()(const Bs&... bs) {
    if constexpr (!all_bindings<Bs...>) {
      static_assert(positional_call<Bs...>, KILN_POSITIONAL_CALL_MESSAGE);
      return Tensor<float>{};  // only so that the caller's use of the result adds no error
    } else {
      Bind::template check_bindings<Bs...>();
      const In in = Bind::template bind<KILN_WITH_CUDA>(bs...);
      const std::lock_guard<std::mutex> lock(mutex());
      return run_bound(in);
    }
  }

  // As operator(), ignoring bindings of symbols this program does not use: how the segments
  // of a program with graph breaks share one call's bindings.
  template <class... Bs>
  auto call_subset(const Bs&... bs) {
    Bind::template check_all_bound<Bs...>(std::make_integer_sequence<int, kSymbols>{});
    const In in = Bind::template bind<KILN_WITH_CUDA>(bs...);
    const std::lock_guard<std::mutex> lock(mutex());
    return run_bound(in);
  }

  // Runs the program into tensors the caller owns: f.into(out, x = xt) or, for several
  // outputs, f.into(std::tie(o1, o2), x = xt). Their shapes must be the outputs' shapes and
  // they must not be bound inputs. In ReduceOverhead and MaxAutotune, a repeated call with
  // the same input shapes allocates nothing.
  template <class Out, class... Bs>
  void into(Out&& out, const Bs&... bs) {
    if constexpr (!all_bindings<Bs...>) static_assert(positional_call<Bs...>, KILN_POSITIONAL_CALL_MESSAGE);
    else into_bound(out, bs...);
  }

 private:
  template <class Out, class... Bs>
  void into_bound(Out& out, const Bs&... bs) {
    Bind::template check_bindings<Bs...>();
    auto targets = as_output_tuple(out);
    static_assert(std::tuple_size_v<decltype(targets)> == kReturned,
                  "kiln: into() needs one tensor per output of the compiled expression, kiln::assign outputs "
                  "excepted (use std::tie for several)");
    check_output_types(targets, std::make_index_sequence<kReturned>{});
    const In in = Bind::template bind<KILN_WITH_CUDA>(bs...);
    const std::lock_guard<std::mutex> lock(mutex());
    Entry& e = entry_for(in);
    Bind::check_assigns(e.plan.shapes, in);
    Ptrs ptr{};
    std::apply(
        [&](auto&... t) {
          int r = 0;
          (([&] {
             const int k = facts::kReturnedOutput[r];
             const Shape& want = e.plan.shapes[graph().outputs[k]];
             if (!(t.shape() == want))
               throw ShapeError("into: output " + std::to_string(r) + " has shape " + t.shape().str() +
                                ", the expression gives " + want.str());
             if (t.data() == nullptr && t.shape().numel() > 0)
               throw BindingError("into: output " + std::to_string(r) +
                                  " has no storage (moved from, or default-constructed)");
             if (!(t.device() == in.device))
               throw DeviceError("into: output " + std::to_string(r) + " is on " + t.device().str() +
                                 ", the bound inputs on " + in.device.str());
             for (int j = 0; j < r; ++j)
               if (ptr[kSymbols + facts::kReturnedOutput[j]] == t.data() && t.numel() > 0)
                 throw BindingError("into: outputs " + std::to_string(j) + " and " + std::to_string(r) +
                                    " are one tensor; give each output its own");
             for (int s = 0; s < kSymbols; ++s)
               if (in.data[s] == t.data() && t.numel() > 0)
                 throw BindingError("into: output " + std::to_string(r) + " is the tensor bound to '" +
                                    std::string(facts::symbol_name(s)) + "'; an output must not alias an input");
             ptr[kSymbols + k] = t.data();
             ++r;
           }()),
           ...);
        },
        targets);
    execute(e, in, ptr);
  }

 public:
  std::size_t kernel_count() const { return nkernels; }

  // The plan; after a call, also each kernel's traffic and operation count for the last input
  // shapes and, under MaxAutotune, the chosen launch configuration and each candidate's time.
  std::string explain() const {
    const std::lock_guard<std::mutex> lock(mutex());
    std::string s = runtime::explain<program>(std::string(Policy::fuse ? "fused" : "unfused") + ", " + Policy::mode_name +
                                              ", " + Policy::backend_name);
    if (const Plan* st = last_plan()) s += explain_shapes<facts>(*st, saved_bytes_unlocked());
    return s;
  }

  AutotuneStats autotune_stats() const {
    const std::lock_guard<std::mutex> lock(mutex());
    return stats_;
  }

#if KILN_WITH_CUDA
  // CUDA graphs of persistent policies, over every shape signature kept: how many were
  // captured (first captures and re-captures for new parameter addresses) and how many calls
  // replayed one.
  long graph_captures() const {
    const std::lock_guard<std::mutex> lock(mutex());
    long n = 0;
    for (const auto& e : entries_) n += e->cuda.captures();
    return n;
  }
  long graph_replays() const {
    const std::lock_guard<std::mutex> lock(mutex());
    long n = 0;
    for (const auto& e : entries_) n += e->cuda.replays();
    return n;
  }
#endif

  // How many plans (and their arenas) were dropped to make room for another shape signature.
  // A CUDA graph captured over several compiled calls (models/model_graph.hpp) bakes in the
  // arenas of their plans: it is valid while this count has not changed.
  long plans_dropped() const {
    const std::lock_guard<std::mutex> lock(mutex());
    return plans_dropped_;
  }

  // Profiling: while on, every call times each kernel (a clock read around it, no
  // synchronisation added), and explain() shows each kernel's mean time per call, its share
  // and its bandwidth, for the current input shapes. Turning it on clears earlier figures.
  void profile(bool on = true) {
    const std::lock_guard<std::mutex> lock(mutex());
    profiling_ = on;
    if (on)
      for (auto& e : entries_) e->plan.profile_ms = {}, e->plan.profiled_calls = 0;
  }

  // Bytes of the intermediate values of one call for the last input shapes (the arena planned
  // by liveness; outputs and inputs not counted). 0 before the first call.
  std::size_t intermediate_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex());
    const Plan* st = last_plan();
    return st ? st->arena_bytes : 0;
  }

  // The values a training step keeps between its forward and backward kernels, for the last
  // input shapes (0 before the first call): intermediate values the first output (the loss)
  // depends on that are stored and read by a kernel computing something else (a gradient, an
  // update). Kept to what the derivative rules read (a relu's output, not its input; a
  // log-softmax's result, not its pieces); intermediates fused into their consumers are never
  // stored at all.
  std::size_t saved_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex());
    return saved_bytes_unlocked();
  }

 private:
  std::size_t saved_bytes_unlocked() const {
    const Plan* st = last_plan();
    if (!st) return 0;
    std::size_t b = 0;
    for (int n : facts::saved_nodes()) b += st->node_bytes(n);
    return b;
  }

  static constexpr int kSymbols = facts::kSymbols;
  static constexpr int kReturned = facts::kReturned;
  static constexpr std::size_t kMaxPlans = 8;  // persistent policies: shape signatures kept
  static constexpr const auto& graph() { return program::graph; }
  using Bind = Binder<facts>;
  using In = typename Bind::In;
  using Plan = ShapePlan<facts>;
  using Ptrs = std::array<void*, facts::kMaxBuffers>;
  using CpuExec = CpuExecutor<facts, Policy>;
#if KILN_WITH_CUDA
  using CudaExec = CudaExecutor<facts, Policy>;
#endif

  // A plan and what each executor keeps with it.
  struct Entry {
    Plan plan;
    typename CpuExec::State cpu;
#if KILN_WITH_CUDA
    typename CudaExec::State cuda;
#endif
  };

  template <class T>
  static auto as_output_tuple(Tensor<T>& t) {
    return std::tuple<Tensor<T>&>(t);
  }
  template <class... Ts>
  static auto as_output_tuple(const std::tuple<Tensor<Ts>&...>& t) {
    return t;
  }
  template <class Tuple, std::size_t... K>
  static constexpr void check_output_types(const Tuple&, std::index_sequence<K...>) {
    static_assert((std::is_same_v<std::remove_cvref_t<std::tuple_element_t<K, Tuple>>,
                                 Tensor<typename facts::template dtype_of<graph().outputs[facts::kReturnedOutput[K]]>>> && ...),
                  "kiln: into() got an output tensor whose element type differs from the expression's");
  }

  template <std::size_t... R>
  static auto make_outputs(const Plan& st, [[maybe_unused]] Device device, std::index_sequence<R...>) {
    return std::tuple<Tensor<typename facts::template dtype_of<graph().outputs[facts::kReturnedOutput[R]]>>...>(
        Tensor<typename facts::template dtype_of<graph().outputs[facts::kReturnedOutput[R]]>>(
            st.shapes[graph().outputs[facts::kReturnedOutput[R]]], device)...);
  }

  auto run_bound(const In& in) {
    Entry& e = entry_for(in);
    Bind::check_assigns(e.plan.shapes, in);
    auto outs = make_outputs(e.plan, in.device, std::make_index_sequence<kReturned>{});
    Ptrs ptr{};
    std::apply([&](auto&... t) {
      int r = 0;
      ((ptr[kSymbols + facts::kReturnedOutput[r++]] = t.data()), ...);
    }, outs);
    execute(e, in, ptr);
    if constexpr (root_outputs<Root>::multi) return outs;
    else return std::move(std::get<0>(outs));
  }

  bool matches(const Plan& st, const In& in) const {
    return st.device == in.device && std::equal(in.shapes.begin(), in.shapes.begin() + kSymbols, st.key.begin());
  }

  // The plan for these input shapes: found among the cached ones (most recent first) or built
  // for the device the tensors are on.
  Entry& entry_for(const In& in) {
#if KILN_WITH_CUDA
    if (in.device.is_cuda()) CudaExec::check_device(in.device);
#endif
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (matches(entries_[i]->plan, in)) {
        std::rotate(entries_.begin(), entries_.begin() + i, entries_.begin() + i + 1);
        return *entries_.front();
      }
    auto e = std::make_unique<Entry>();
    e->plan.device = in.device;
#if KILN_WITH_CUDA
    if (in.device.is_cuda()) {
      build_plan(e->plan, in.shapes, params_, CudaExec::kScalarsFirst,
                 [&](Plan& p, const GroupBuffers<facts>& g) { CudaExec::refine(p, e->cuda, g); });
      CudaExec::prepare(e->plan, e->cuda);
    } else
#endif
    {
      build_plan(e->plan, in.shapes, params_, CpuExec::kScalarsFirst, CpuExec::refine);
      CpuExec::prepare(e->plan, e->cpu);
    }
    if (entries_.size() == (Policy::persistent ? kMaxPlans : 1)) {
      entries_.pop_back();
      ++plans_dropped_;
    }
    entries_.insert(entries_.begin(), std::move(e));
    return *entries_.front();
  }
  const Plan* last_plan() const { return entries_.empty() ? nullptr : &entries_.front()->plan; }

  // Runs every kernel on the inputs' device; the outputs' pointers are in ptr already.
  void execute(Entry& e, const In& in, Ptrs& ptr) {
    for (int s = 0; s < kSymbols; ++s) ptr[s] = const_cast<void*>(in.data[s]);
#if KILN_WITH_CUDA
    if (in.device.is_cuda()) return CudaExec::run(e.plan, e.cuda, in, ptr, profiling_, stats_);
#endif
    CpuExec::run(e.plan, e.cpu, in, ptr, profiling_, stats_);
  }

  // The lock of this object's calls and of its observers (explain, statistics).
  std::mutex& mutex() const {
    if (!mutex_) throw BindingError("kiln: this compiled object was moved from; call the object it was moved to");
    return *mutex_;
  }

  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
  std::vector<NodeParams> params_;
  std::vector<std::unique_ptr<Entry>> entries_;  // most recent first
  long plans_dropped_ = 0;
  bool profiling_ = false;
  AutotuneStats stats_;
};

}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln::runtime
