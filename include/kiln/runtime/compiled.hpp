// kiln: the compiled function object. kiln::compile(expr) instantiates the program of expr
// (graph, plan, lowered kernels) at compile time; a call binds tensors to symbols, infers and
// checks every shape, plans strides and memory for that shape signature (cached until the
// input shapes change), allocates fresh outputs and runs the kernels in order.
//
// A Compiled object is not reentrant: it keeps the plan and arena of its last call shape.
// Use one per thread.
#pragma once
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/backend/cpu/gemm_kernel.hpp"
#include "kiln/backend/cpu/reduce_kernel.hpp"
#include "kiln/backend/cpu/reduce_to_kernel.hpp"
#include "kiln/backend/cpu/row_kernel.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/lower/lower.hpp"
#include "kiln/runtime/autotune.hpp"
#include "kiln/runtime/explain.hpp"
#include "kiln/runtime/memory.hpp"
#include "kiln/runtime/params.hpp"
#include "kiln/runtime/policy.hpp"
#include "kiln/runtime/shapes.hpp"
#if KILN_WITH_CUDA
#include "kiln/backend/cuda/gemm.hpp"
#include "kiln/backend/cuda/graphs.hpp"
#include "kiln/backend/cuda/launch.hpp"
#if defined(__CUDACC__)
#include "kiln/backend/cuda/kernels.cuh"
#endif
#endif

namespace kiln::runtime {
inline namespace KILN_BACKEND_NS {

template <class Desc>
struct cpu_kernel;
template <class T, class Tr, int NL, int NC>
struct cpu_kernel<lower::ReduceToKernel<T, Tr, NL, NC>> {
  using type = cpu::ReduceToKernelCpu<lower::ReduceToKernel<T, Tr, NL, NC>>;
};
template <class T, class O, class S, int NL, int NC, class A, class E>
struct cpu_kernel<lower::RowKernel<T, O, S, NL, NC, A, E>> {
  using type = cpu::RowKernelCpu<lower::RowKernel<T, O, S, NL, NC, A, E>>;
};
template <class T, class E, int A, int NL, int NC>
struct cpu_kernel<lower::GemmKernel<T, E, A, NL, NC>> {
  using type = cpu::GemmKernelCpu<lower::GemmKernel<T, E, A, NL, NC>>;
};
template <class T, ReduceKind K, class Tr, bool Tot, int NL, int NC>
struct cpu_kernel<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>> {
  using type = cpu::ReduceKernelCpu<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>>;
};


// One kernel's backend arguments, with the buffer each pointer is taken from at call time.
template <class Desc>
struct Prepared {
  using Kernel = typename cpu_kernel<Desc>::type;
  typename Kernel::Args args{};
  int load_buffer[Desc::nloads > 0 ? Desc::nloads : 1] = {};
  int out_buffer = -1, a_buffer = -1, b_buffer = -1, acc_buffer = -1;
  // A pointwise kernel's extra outputs (the roots of kernels merged into it), or a GEMM's bias
  // gradient (extra_buffer[0]: the root of the sum_to kernel folded into it, on CUDA); -1 where
  // that kernel runs on its own for these shapes.
  int extra_buffer[schedule::kMaxExtra] = {-1, -1, -1, -1};
  std::unique_ptr<cpu::GemmWorkspace<compute_t<typename Desc::value_type>>> workspace;  // GEMM kernels only
  bool writes_input = false;  // an in-place kiln::assign: running it twice would update twice
#if KILN_WITH_CUDA
  std::unique_ptr<cuda::GemmPlan> gemm_plan;  // GEMM kernels on a CUDA device
  cuda::Buffer scratch;                        // a total reduction's partials (prepare_scratch)
  cpu::LaunchConfig cuda_config;               // block size, variant (MaxAutotune's choice)
  void* bias_grad_out = nullptr;               // a GEMM's bias gradient (extra_buffer[0]), this call's
#endif
  cpu::LaunchConfig& config() { return args.config; }
  std::array<int, 1 + schedule::kMaxExtra> output_buffers() const {
    std::array<int, 1 + schedule::kMaxExtra> b{out_buffer};
    for (int e = 0; e < schedule::kMaxExtra; ++e) b[1 + e] = extra_buffer[e];
    return b;
  }

  auto& row_args() {
    if constexpr (requires { args.epilogue; }) return args.epilogue;
    else return static_cast<cpu::RowArgs<typename Desc::value_type, Desc::nloads, Desc::nconsts, Desc::nstages>&>(args);
  }
};

template <class X>
struct symbol_not_bound {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0, "kiln: this call leaves a symbol unbound (its type is shown in the instantiation below); "
                       "bind every input and param of the expression, e.g. f(x = xt, w = wt)");
};
template <class X>
struct symbol_bound_twice {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0, "kiln: this call binds one symbol twice; bind each symbol once");
};
template <class X>
struct symbol_not_in_expression {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0, "kiln: this call binds a symbol that the compiled expression does not use");
};

// How many of the bindings Bs bind the symbol Id; more than one is a compile error.
template <std::uint64_t Id, class... Bs>
inline constexpr int binding_count = ((Bs::id == Id) + ... + 0);
template <class B, int Count>
constexpr void check_bound_once() {
  if constexpr (Count > 1) (void)symbol_bound_twice<B>::value;
}

template <class Root>
struct root_outputs {
  static constexpr bool multi = false;
  static constexpr std::array<bool, 1> assigns{false};
  static constexpr std::array<std::uint64_t, 1> targets{0};
};
template <class... Es>
struct root_outputs<Outputs<Es...>> {
  static constexpr bool multi = true;
  static constexpr std::array<bool, sizeof...(Es)> assigns{output_item<Es>::assigns...};
  template <class E>
  static constexpr std::uint64_t target_of() {
    if constexpr (output_item<E>::assigns) return E::target_type::id;
    else return 0;
  }
  static constexpr std::array<std::uint64_t, sizeof...(Es)> targets{target_of<Es>()...};
};

template <class Root, class Policy>
class Compiled {
 public:
  using program = lower::Program<Root, Policy::fuse>;
  using graph_type = typename program::graph_type;
  using policy = Policy;
  static constexpr int N = program::size;
  static constexpr int NOut = graph_type::noutputs;
  static constexpr int nkernels = program::nkernels;

  explicit Compiled(const Root& root) : params_(node_params<graph_type>(root)) {}

  // Runs the program: f(x = xt, w = wt, ...). Returns a Tensor, or a std::tuple of tensors
  // for kiln::outputs(...); the outputs are fresh tensors.
  template <class... Bs>
  auto operator()(const Bs&... bs) {
    check_bindings<Bs...>();
    return run_bound(bind(bs...));
  }

  // As operator(), ignoring bindings of symbols this program does not use: how the segments
  // of a program with graph breaks share one call's bindings.
  template <class... Bs>
  auto call_subset(const Bs&... bs) {
    check_all_bound<Bs...>(std::make_integer_sequence<int, kSymbols>{});
    return run_bound(bind(bs...));
  }

 private:
  template <class In>
  auto run_bound(const In& in) {
    State& st = state_for(in);
    check_assigns(st, in);
    auto outs = make_outputs(st, in.device, std::make_index_sequence<kReturned>{});
    std::array<void*, kMaxBuffers> ptr{};
    std::apply([&](auto&... t) {
      int r = 0;
      ((ptr[kSymbols + kReturnedOutput[r++]] = t.data()), ...);
    }, outs);
    execute(st, in, ptr);
    if constexpr (root_outputs<Root>::multi) return outs;
    else return std::move(std::get<0>(outs));
  }

 public:

  // Runs the program into tensors the caller owns: f.into(out, x = xt) or, for several
  // outputs, f.into(std::tie(o1, o2), x = xt). Their shapes must be the outputs' shapes and
  // they must not be bound inputs. In ReduceOverhead and MaxAutotune, a repeated call with
  // the same input shapes allocates nothing.
  template <class Out, class... Bs>
  void into(Out&& out, const Bs&... bs) {
    check_bindings<Bs...>();
    auto targets = as_output_tuple(out);
    static_assert(std::tuple_size_v<decltype(targets)> == kReturned,
                  "kiln: into() needs one tensor per output of the compiled expression, kiln::assign outputs "
                  "excepted (use std::tie for several)");
    check_output_types(targets, std::make_index_sequence<kReturned>{});
    const Inputs in = bind(bs...);
    State& st = state_for(in);
    check_assigns(st, in);
    std::array<void*, kMaxBuffers> ptr{};
    std::apply(
        [&](auto&... t) {
          int r = 0;
          (([&] {
             const int k = kReturnedOutput[r];
             const Shape& want = st.shapes[graph().outputs[k]];
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
               if (ptr[kSymbols + kReturnedOutput[j]] == t.data() && t.numel() > 0)
                 throw BindingError("into: outputs " + std::to_string(j) + " and " + std::to_string(r) +
                                    " are one tensor; give each output its own");
             for (int s = 0; s < kSymbols; ++s)
               if (in.data[s] == t.data() && t.numel() > 0)
                 throw BindingError("into: output " + std::to_string(r) + " is the tensor bound to '" +
                                    std::string(graph().nodes[kSymbolNodes[s]].name) +
                                    "'; an output must not alias an input");
             ptr[kSymbols + k] = t.data();
             ++r;
           }()),
           ...);
        },
        targets);
    execute(st, in, ptr);
  }

  std::size_t kernel_count() const { return nkernels; }

  // The plan; after a call, also each kernel's traffic and operation count for the last input
  // shapes and, under MaxAutotune, the chosen launch configuration and each candidate's time.
  std::string explain() const {
    std::string s = runtime::explain<program>(std::string(Policy::fuse ? "fused" : "unfused") + ", " + Policy::mode_name +
                                              ", " + Policy::backend_name);
    if (const State* st = last_state()) {
      s += st->device.is_cuda() ? "on " + st->device.str() + ", for input shapes" : "for input shapes";
      for (int i = 0; i < kSymbols; ++i)
        s += std::string(i ? ", " : " ") + graph().nodes[kSymbolNodes[i]].name + " " + st->key[i].str();
      s += ":\n";
      for (int g = 0; g < nkernels; ++g) {
        char line[200];
        std::snprintf(line, sizeof line, "  kernel %d: reads %.3g MB, writes %.3g MB, %.3g Mop", g, st->read_bytes[g] / 1e6,
                      st->write_bytes[g] / 1e6, st->ops[g] / 1e6);
        s += line;
        if (st->skip[g] == Skip::Merged) s += "; runs inside kernel " + std::to_string(plan().groups[g].merged_into);
        if (st->skip[g] == Skip::Identity) s += "; not run: its input has its shape, and is read in its place";
        if (st->skip[g] == Skip::Folded)
          s += "; computed by kernel " + std::to_string(plan().groups[g].folded_into) + "'s GEMM (cuBLASLt's BGRADA)";
        if (st->profiled_calls > 0) {
          const double ms = st->profile_ms[g] / static_cast<double>(st->profiled_calls);
          double total = 0;
          for (int k = 0; k < nkernels; ++k) total += st->profile_ms[k];
          std::snprintf(line, sizeof line, "; %.3f ms per call (%.0f%%), %.1f GB/s", ms, 100 * st->profile_ms[g] / total,
                        (st->read_bytes[g] + st->write_bytes[g]) / (ms * 1e6));
          s += line;
        }
        s += "\n";
        if (!st->tune_notes[g].empty()) s += "    autotune: " + st->tune_notes[g] + "\n";
      }
      s += "  arena: " + std::to_string(st->arena_bytes) + " bytes\n";
      if (NOut > 1) {
        std::string saved;
        for (int n : saved_nodes()) saved += " %" + std::to_string(n) + " " + st->shapes[n].str();
        s += "  saved between output 0's kernels and the others: " + std::to_string(saved_bytes()) + " bytes" +
             (saved.empty() ? "" : ":" + saved) + "\n";
      }
      std::string in_place;
      lower::for_each_index<nkernels>([&](auto gi) {
        const auto& pr = std::get<decltype(gi)::value>(st->kernels);
        if (!pr.writes_input) return;
        for (int b : pr.output_buffers())
          if (b >= 0 && b < kSymbols)
            in_place += " " + std::string(graph().nodes[kSymbolNodes[b]].name) + " (kernel " +
                        std::to_string(decltype(gi)::value) + ")";
      });
      if (!in_place.empty()) s += "  assigned in place, without a copy:" + in_place + "\n";
    }
    return s;
  }

  const AutotuneStats& autotune_stats() const { return stats_; }

#if KILN_WITH_CUDA
  // CUDA graphs of persistent policies, over every shape signature kept: how many were
  // captured (first captures and re-captures for new tensor addresses) and how many calls
  // replayed one.
  long graph_captures() const {
    long n = 0;
    for (const auto& p : plans_) n += p->graphs ? p->graphs->captures() : 0;
    return n;
  }
  long graph_replays() const {
    long n = 0;
    for (const auto& p : plans_) n += p->graphs ? p->graphs->replays() : 0;
    return n;
  }
#endif

  // Profiling: while on, every call times each kernel (a clock read around it, no
  // synchronisation added), and explain() shows each kernel's mean time per call, its share
  // and its bandwidth, for the current input shapes. Turning it on clears earlier figures.
  void profile(bool on = true) {
    profiling_ = on;
    if (on)
      for (auto& p : plans_) p->profile_ms = {}, p->profiled_calls = 0;
  }

  // Bytes of the intermediate values of one call for the last input shapes (the arena planned
  // by liveness; outputs and inputs not counted). 0 before the first call.
  std::size_t intermediate_bytes() const {
    const State* st = last_state();
    return st ? st->arena_bytes : 0;
  }

  // The values a training step keeps between its forward and backward kernels, for the last
  // input shapes (0 before the first call): intermediate values the first output (the loss)
  // depends on that are stored and read by a kernel computing something else (a gradient, an
  // update). Kept to what the derivative rules read (a relu's output, not its input; a
  // log-softmax's result, not its pieces); intermediates fused into their consumers are never
  // stored at all.
  std::size_t saved_bytes() const {
    const State* st = last_state();
    if (!st) return 0;
    std::size_t b = 0;
    for (int n : saved_nodes()) b += st->shapes[n].numel() * kElementSize[n];
    return b;
  }

 private:
  static constexpr const auto& graph() { return program::graph; }
  static constexpr const auto& plan() { return program::plan; }

  // Nodes the first output reads the value of, directly or not (the forward pass of a step).
  static constexpr std::array<bool, N> kForward = [] {
    std::array<bool, N> f{};
    f[graph().outputs[0]] = true;
    for (int i = N - 1; i >= 0; --i)
      if (f[i])
        for (int k = 0; k < graph().nodes[i].nchildren; ++k)
          if (graph().nodes[i].reads_value_of(k)) f[graph().nodes[i].children[k]] = true;
    return f;
  }();
  // Forward intermediates stored and read by a kernel whose result is not a forward value.
  static std::vector<int> saved_nodes() {
    std::array<bool, N> saved{};
    auto stored = [](int n) {  // the stored value a read of n resolves to (views read their source)
      while (schedule::is_view(graph().nodes[n].kind) && !plan().materialized[n]) n = graph().nodes[n].children[0];
      return n;
    };
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int G = decltype(gi)::value;
      constexpr auto& ki = program::template kernel_info<G>;
      if (kForward[ki.group.root]) return;
      auto mark = [&](int n) {
        n = stored(n);
        const auto k = graph().nodes[n].kind;
        if (kForward[n] && k != NodeKind::Symbol && k != NodeKind::Constant && plan().group_of[n] != G) saved[n] = true;
      };
      for (int l = 0; l < ki.nloads; ++l) mark(ki.load_node[l]);
      if (ki.group.kind == schedule::KernelKind::Gemm)
        for (int c = 0; c < 2; ++c) mark(graph().nodes[ki.group.gemm].children[c]);
    });
    std::vector<int> v;
    for (int n = 0; n < N; ++n)
      if (saved[n]) v.push_back(n);
    return v;
  }

  static constexpr int kSymbols = [] {
    int c = 0;
    for (int i = 0; i < N; ++i) c += program::graph.nodes[i].kind == NodeKind::Symbol;
    return c;
  }();
  static constexpr std::array<int, kSymbols + 1> kSymbolNodes = [] {
    std::array<int, kSymbols + 1> a{};
    int c = 0;
    for (int i = 0; i < N; ++i)
      if (program::graph.nodes[i].kind == NodeKind::Symbol) a[c++] = i;
    return a;
  }();
  // Outputs the call returns (kiln::assign outputs are written to their targets instead).
  static constexpr int kReturned = [] {
    int c = 0;
    for (int k = 0; k < NOut; ++k) c += !root_outputs<Root>::assigns[k];
    return c;
  }();
  static constexpr std::array<int, kReturned + 1> kReturnedOutput = [] {
    std::array<int, kReturned + 1> a{};
    for (int k = 0, r = 0; k < NOut; ++k)
      if (!root_outputs<Root>::assigns[k]) a[r++] = k;
    return a;
  }();
  // For each output, the symbol (index among the inputs) it assigns to, or -1.
  static constexpr std::array<int, NOut> kAssignTarget = [] {
    std::array<int, NOut> a{};
    for (int k = 0; k < NOut; ++k) {
      a[k] = -1;
      if (root_outputs<Root>::assigns[k])
        for (int s = 0; s < kSymbols; ++s)
          if (program::graph.nodes[kSymbolNodes[s]].symbol_id == root_outputs<Root>::targets[k]) a[k] = s;
    }
    return a;
  }();
  static_assert([] {
    for (int k = 0; k < NOut; ++k)
      if (root_outputs<Root>::assigns[k] && kAssignTarget[k] < 0) return false;
    return true;
  }(), "kiln::assign: the target symbol is not read by the program; an assigned symbol must be an input of it");

  // Inputs, outputs, and at most one arena buffer per node plus one scratch per kernel.
  static constexpr int kMaxBuffers = kSymbols + NOut + N + nkernels + 1;
  static constexpr std::size_t kMaxPlans = 8;  // ReduceOverhead: shape signatures kept

  static constexpr int symbol_index(std::uint64_t id) {
    for (int s = 0; s < kSymbols; ++s)
      if (program::graph.nodes[kSymbolNodes[s]].symbol_id == id) return s;
    return -1;
  }

  template <class B>
  static constexpr void check_known() {
    if constexpr (symbol_index(B::id) < 0) (void)symbol_not_in_expression<B>::value;
  }
  template <int S, class... Bs>
  static constexpr void check_bound() {
    constexpr std::uint64_t id = program::graph.nodes[kSymbolNodes[S]].symbol_id;
    if constexpr (!((Bs::id == id) || ... || false))
      (void)symbol_not_bound<typename graph_type::template node<kSymbolNodes[S]>>::value;
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

  template <int I>
  using dtype_of = typename graph_type::template node<I>::dtype;
  static constexpr std::array<std::size_t, N> kElementSize = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<std::size_t, N>{sizeof(dtype_of<I>)...};
  }(std::make_integer_sequence<int, N>{});

  struct Inputs {
    std::array<const void*, kSymbols + 1> data{};
    std::array<void*, kSymbols + 1> mutable_data{};  // bound to a non-const tensor
    std::array<Shape, kSymbols + 1> shapes{};
    Device device = Device::cpu();  // where every bound tensor lives, and so the call runs
  };

  using kernel_tuple = decltype([]<int... G>(std::integer_sequence<int, G...>) {
    return std::tuple<Prepared<typename program::template kernel<G>>...>{};
  }(std::make_integer_sequence<int, nkernels>{}));

  enum class Skip : std::uint8_t { No, Merged, Identity, Folded };
  struct State {
    std::vector<Shape> key;     // the input shapes this plan is for
    std::vector<Shape> shapes;  // every node's shape
    std::vector<Face> faces, view_faces;
    std::vector<std::size_t> buffers;  // arena buffers: their offsets (others unused)
    std::size_t arena_bytes = 0;
    std::unique_ptr<std::byte[], detail::AlignedDelete> arena;  // persistent policies only
    kernel_tuple kernels;
    bool tuned = false;
    std::array<double, (nkernels > 0 ? nkernels : 1)> read_bytes{}, write_bytes{}, ops{};
    std::array<double, (nkernels > 0 ? nkernels : 1)> out_bytes{};  // the root's bytes
    std::array<double, (nkernels > 0 ? nkernels : 1)> profile_ms{};  // summed over profiled calls
    long profiled_calls = 0;
    std::array<std::string, (nkernels > 0 ? nkernels : 1)> tune_notes;
    std::array<int, NOut> output_source{};  // the buffer each output's value is written to
    // Kernels not run for these inputs: Merged, one merged into a later kernel (the plan's
    // merged_into) whose shape it has, which writes its root; Identity, a sum_to whose input
    // already has its shape, whose root is its input's buffer (prepare_identities); Folded, a
    // bias gradient that its GEMM kernel writes (the plan's folded_into, prepare_bias_gradients).
    std::array<Skip, (nkernels > 0 ? nkernels : 1)> skip{};
    bool runs(int g) const { return skip[g] == Skip::No; }
    Device device = Device::cpu();
#if KILN_WITH_CUDA
    cuda::Buffer device_arena;  // persistent policies on a CUDA device
    std::unique_ptr<cuda::GraphCache> graphs;
    long device_calls = 0;
#endif
  };

  template <class... Bs>
  static Inputs bind(const Bs&... bs) {
    Inputs in;
    std::array<Device, kSymbols + 1> devices{};
    ([&] {
      if constexpr (symbol_index(Bs::id) >= 0) {
        in.data[symbol_index(Bs::id)] = bs.tensor->data();
        in.mutable_data[symbol_index(Bs::id)] = bs.mutable_tensor ? bs.mutable_tensor->data() : nullptr;
        in.shapes[symbol_index(Bs::id)] = bs.tensor->shape();
        devices[symbol_index(Bs::id)] = bs.tensor->device();
      }
    }(), ...);
    if (kSymbols > 0) in.device = devices[0];
    for (int s = 1; s < kSymbols; ++s)
      if (!(devices[s] == in.device))
        throw DeviceError(std::string("kiln: '") + graph().nodes[kSymbolNodes[0]].name + "' is on " + in.device.str() +
                          " and '" + graph().nodes[kSymbolNodes[s]].name + "' on " + devices[s].str() +
                          "; bind tensors of one device (move them with .to())");
#if KILN_WITH_CUDA
    // Checked before planning: a GEMM's cuBLASLt algorithms are chosen on the current device.
    if (in.device.is_cuda() && cuda::current_device() != in.device.index)
      throw DeviceError("kiln: the bound tensors are on " + in.device.str() + ", the current device is cuda:" +
                        std::to_string(cuda::current_device()) + "; call cudaSetDevice first");
#else
    if (in.device.is_cuda())
      throw DeviceError(std::string("kiln: '") + graph().nodes[kSymbolNodes[0]].name + "' is on " + in.device.str() +
                        ", and this translation unit has kiln's CPU backend only; build it with nvcc, or link it "
                        "with its generated kernels (kiln_cuda_executable in CMake, docs/cuda.md), or move the "
                        "tensors with .cpu()");
#endif
    for (int s = 0; s < kSymbols; ++s) {
      const auto& n = graph().nodes[kSymbolNodes[s]];
      if (in.data[s] == nullptr && in.shapes[s].numel() > 0)
        throw BindingError(std::string("symbol '") + n.name +
                           "': the bound tensor has no storage (moved from, or default-constructed)");
      if (in.shapes[s].rank() != n.rank)
        throw ShapeError(std::string("symbol '") + n.name + "': expected a tensor of rank " + std::to_string(n.rank) +
                         ", got shape " + in.shapes[s].str());
    }
    return in;
  }

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
                                 Tensor<dtype_of<program::graph.outputs[kReturnedOutput[K]]>>> && ...),
                  "kiln: into() got an output tensor whose element type differs from the expression's");
  }

  template <std::size_t... R>
  auto make_outputs(const State& st, [[maybe_unused]] Device device, std::index_sequence<R...>) const {
    return std::tuple<Tensor<dtype_of<graph().outputs[kReturnedOutput[R]]>>...>(
        Tensor<dtype_of<graph().outputs[kReturnedOutput[R]]>>(st.shapes[graph().outputs[kReturnedOutput[R]]], device)...);
  }

  // Before any kernel: every assign target is bound to a writable tensor of the value's shape.
  void check_assigns(const State& st, const Inputs& in) const {
    for (int k = 0; k < NOut; ++k) {
      const int s = kAssignTarget[k];
      if (s < 0) continue;
      const char* name = graph().nodes[kSymbolNodes[s]].name;
      if (in.mutable_data[s] == nullptr && in.shapes[s].numel() > 0)
        throw BindingError(std::string("assign: '") + name + "' is bound to a const tensor; bind a non-const one to update it");
      for (int u = 0; u < kSymbols; ++u)
        if (u != s && in.data[u] == in.data[s] && in.shapes[s].numel() > 0)
          throw BindingError(std::string("assign: '") + name + "' is updated in place, and its tensor is also bound to '" +
                             graph().nodes[kSymbolNodes[u]].name + "'; bind a separate tensor");
      if (!(in.shapes[s] == st.shapes[graph().outputs[k]]))
        throw ShapeError(std::string("assign: '") + name + "' has shape " + in.shapes[s].str() + ", the value " +
                         st.shapes[graph().outputs[k]].str());
    }
  }
  // After every kernel: duplicate outputs copied from the first of them, assigned values
  // written to their targets (so after every read of a target's old value).
  void finish_outputs(const State& st, const Inputs& in, const std::array<void*, kMaxBuffers>& ptr) const {
    for (int k = 0; k < NOut; ++k) {
      const int node = graph().outputs[k];
      const std::size_t bytes = st.shapes[node].numel() * kElementSize[node];
      const void* src = ptr[st.output_source[k]];
      if (bytes == 0) continue;
      void* dst = root_outputs<Root>::assigns[k] ? in.mutable_data[kAssignTarget[k]] : ptr[kSymbols + k];
      if (src == dst) continue;
#if KILN_WITH_CUDA
      if (in.device.is_cuda()) {
        KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::stream()));
        continue;
      }
#endif
      std::memcpy(dst, src, bytes);
    }
  }


  bool matches(const State& st, const Inputs& in) const {
    return st.device == in.device && std::equal(in.shapes.begin(), in.shapes.begin() + kSymbols, st.key.begin());
  }

  // The plan for these input shapes: found among the cached ones (most recent first) or made.
  State& state_for(const Inputs& in) {
    for (std::size_t i = 0; i < plans_.size(); ++i)
      if (matches(*plans_[i], in)) {
        std::rotate(plans_.begin(), plans_.begin() + i, plans_.begin() + i + 1);
        return *plans_.front();
      }
    auto st = std::make_unique<State>();
    st->device = in.device;
    prepare(*st, in.shapes);
    if (plans_.size() == (Policy::persistent ? kMaxPlans : 1)) plans_.pop_back();
    plans_.insert(plans_.begin(), std::move(st));
    return *plans_.front();
  }
  const State* last_state() const { return plans_.empty() ? nullptr : plans_.front().get(); }

  // Runs every kernel; the inputs' and outputs' pointers are in ptr already.
  void execute(State& st, const Inputs& in, std::array<void*, kMaxBuffers>& ptr) {
    for (int s = 0; s < kSymbols; ++s) ptr[s] = const_cast<void*>(in.data[s]);
#if KILN_WITH_CUDA
    if (in.device.is_cuda()) return execute_cuda(st, in, ptr);
#endif
    std::unique_ptr<std::byte[], detail::AlignedDelete> call_arena;  // Default: per call
    std::byte* arena = st.arena.get();
    if (!arena && st.arena_bytes > 0) {
      call_arena = std::unique_ptr<std::byte[], detail::AlignedDelete>(
          static_cast<std::byte*>(detail::aligned_alloc_bytes(st.arena_bytes)), detail::AlignedDelete{st.arena_bytes});
      arena = call_arena.get();
    }
    for (std::size_t b = kSymbols + NOut; b < st.buffers.size(); ++b) ptr[b] = arena + st.buffers[b];
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename program::template kernel<G>;
      using Kernel = typename Prepared<Desc>::Kernel;
      auto& pr = std::get<G>(st.kernels);
      if (!st.runs(G)) return;  // merged into a later kernel, or an identity
      bind_pointers<Desc>(pr, ptr);
      if constexpr (Policy::autotune) {
        if (!st.tuned && !pr.writes_input) tune<G>(st, pr);
      }
      if (profiling_) {
        const auto t0 = std::chrono::steady_clock::now();
        Kernel::run(pr.args);
        st.profile_ms[G] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      } else {
        Kernel::run(pr.args);
      }
    });
    st.profiled_calls += profiling_;
    st.tuned = true;
    finish_outputs(st, in, ptr);  // while a per-call arena is still alive
  }

  // Points kernel pr's arguments at this call's buffers.
  template <class Desc, class P>
  static void bind_pointers(P& pr, const std::array<void*, kMaxBuffers>& ptr) {
    using T = typename Desc::value_type;
    auto& ra = pr.row_args();
    for (int s = 0; s < Desc::nloads; ++s) ra.ptr[s] = static_cast<const T*>(ptr[pr.load_buffer[s]]);
    ra.out = static_cast<T*>(ptr[pr.out_buffer]);
    if constexpr (requires { pr.args.extra_out; })
      for (int e = 0; e < Desc::nextra; ++e)
        pr.args.extra_out[e] = pr.extra_buffer[e] >= 0 ? static_cast<T*>(ptr[pr.extra_buffer[e]]) : nullptr;
    if constexpr (requires { pr.args.epilogue; }) {
      pr.args.a.ptr = static_cast<const T*>(ptr[pr.a_buffer]);
      pr.args.b.ptr = static_cast<const T*>(ptr[pr.b_buffer]);
      pr.args.acc = static_cast<T*>(ptr[pr.acc_buffer]);
#if KILN_WITH_CUDA
      pr.bias_grad_out = pr.extra_buffer[0] >= 0 ? ptr[pr.extra_buffer[0]] : nullptr;
#endif
    }
  }

#if KILN_WITH_CUDA
  // The CUDA path: the same plan, kernels launched on kiln's stream (cuda::stream()). Under
  // persistent policies (ReduceOverhead, MaxAutotune, CudaGraphs) the arena is kept, the first
  // call for a shape runs the kernels directly (and tunes, under MaxAutotune), and later calls
  // replay a CUDA graph of them (cuda::GraphCache: one per set of tensor addresses).
  void execute_cuda(State& st, const Inputs& in, std::array<void*, kMaxBuffers>& ptr) {
    const int dev = in.device.index;
    cudaStream_t stream = cuda::stream();
    cuda::Buffer call_arena;
    std::byte* arena = nullptr;
    if constexpr (Policy::persistent) {
      if (!st.device_arena.get() && st.arena_bytes > 0) st.device_arena = cuda::Buffer(st.arena_bytes, dev);
      arena = static_cast<std::byte*>(st.device_arena.get());
    } else {
      call_arena = cuda::Buffer(st.arena_bytes, dev);  // from the cache: no cudaMalloc in steady state
      arena = static_cast<std::byte*>(call_arena.get());
    }
    for (std::size_t b = kSymbols + NOut; b < st.buffers.size(); ++b) ptr[b] = arena + st.buffers[b];
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename program::template kernel<G>;
      auto& pr = std::get<G>(st.kernels);
      bind_pointers<Desc>(pr, ptr);
    });
    auto launch_all = [&] {
      const bool batch = scalar_batch_safe(st);
      if (batch) launch_scalar_batch(st, stream, std::make_index_sequence<kScalarKernels.count>{});
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if (!(batch && kScalarKernels.is[G]) && st.runs(G)) launch_cuda<G>(st, stream);
      });
      finish_outputs(st, in, ptr);
    };
    if (Policy::autotune && !st.tuned) {
      // The first call of MaxAutotune: each kernel tuned on the values the kernels before it
      // just computed (an in-place update is never run twice), then run with its choice.
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        auto& pr = std::get<G>(st.kernels);
        if (!st.runs(G)) return;
        if (!pr.writes_input) tune_cuda<G>(st, pr, stream);
        launch_cuda<G>(st, stream);
      });
      finish_outputs(st, in, ptr);
    } else if (profiling_) {
      profile_cuda(st, stream);
      finish_outputs(st, in, ptr);
    } else if (Policy::persistent && st.device_calls > 0) {
      if (!st.graphs) st.graphs = std::make_unique<cuda::GraphCache>();
      std::vector<const void*> key(in.data.begin(), in.data.begin() + kSymbols);
      for (int k = 0; k < NOut; ++k) key.push_back(ptr[kSymbols + k]);
      st.graphs->run(key, stream, launch_all);
    } else {
      launch_all();
    }
    ++st.device_calls;
    st.profiled_calls += profiling_;
    st.tuned = true;
  }

  template <int G>
  void launch_cuda(State& st, cudaStream_t stream) {
    using Desc = typename program::template kernel<G>;
    auto& pr = std::get<G>(st.kernels);
    if constexpr (requires { pr.args.epilogue; })
      cuda::run_gemm<Desc>(pr.args, pr.gemm_plan.get(), pr.cuda_config, stream, overlap_previous<G>(st), pr.bias_grad_out);
    else cuda::launch<Desc>(pr.args, pr.cuda_config, stream, pr.scratch.get());
  }

  // Scalar kernels: a row kernel without stages whose output has rank 0 and whose loads are all
  // leaves (inputs, parameters): one value from the call's inputs, like AdamW's bias
  // corrections (W5 has 12, two per parameter). On CUDA they run first, as one launch
  // (cuda::ScalarBatch), when scalar_batch_safe.
  template <int G>
  static constexpr bool is_scalar_kernel() {
    const auto& ki = program::template kernel_info<G>;
    bool scalar = ki.group.kind == schedule::KernelKind::Row && ki.group.nstages == 0 && !ki.group.copy &&
                  graph().nodes[ki.group.root].rank == 0;
    for (int s = 0; s < ki.nloads; ++s) scalar = scalar && schedule::is_leaf(graph().nodes[ki.load_node[s]].kind);
    return scalar;
  }
  struct ScalarKernels {
    std::array<bool, (nkernels > 0 ? nkernels : 1)> is{};
    std::array<int, (nkernels > 0 ? nkernels : 1)> index{};
    int count = 0;
  };
  static constexpr ScalarKernels kScalarKernels = []<int... G>(std::integer_sequence<int, G...>) {
    ScalarKernels k{};
    ([&] {
      if (is_scalar_kernel<G>()) {
        k.is[G] = true;
        k.index[k.count++] = G;
      }
    }(), ...);
    if (k.count < 2) k = ScalarKernels{};  // one alone gains nothing
    return k;
  }(std::make_integer_sequence<int, nkernels>{});

  // The bytes kernel H writes: its output (write_bytes), and a GEMM's product when that is
  // stored apart. (The scalar batch and a small product's early start check against these.)
  struct Written {
    static constexpr int kMax = 2 + schedule::kMaxExtra;
    const std::byte* p[kMax] = {};
    std::size_t bytes[kMax] = {};
    bool overlaps(const void* q, std::size_t n) const {
      const auto* b = static_cast<const std::byte*>(q);
      for (int i = 0; i < kMax; ++i)
        if (p[i] && b < p[i] + bytes[i] && p[i] < b + n) return true;
      return false;
    }
  };
  template <int H>
  static Written written(const State& st) {
    const auto& a = std::get<H>(st.kernels).args;
    Written w;
    if (!st.runs(H)) return w;  // not run here (merged into a later kernel, or an identity)
    if constexpr (requires { a.epilogue; }) {
      using TA = std::remove_cvref_t<decltype(*a.acc)>;
      w.p[0] = reinterpret_cast<const std::byte*>(a.epilogue.out);
      w.p[1] = reinterpret_cast<const std::byte*>(a.acc);
      w.bytes[1] = sizeof(TA) * static_cast<std::size_t>(a.batch * a.m * a.n);
      if constexpr (plan().groups[H].bias_grad >= 0) {  // a bias gradient folded in: n sums
        w.p[2] = static_cast<const std::byte*>(std::get<H>(st.kernels).bias_grad_out);
        w.bytes[2] = sizeof(TA) * static_cast<std::size_t>(a.n);
      }
    } else {
      w.p[0] = reinterpret_cast<const std::byte*>(a.out);
    }
    w.bytes[0] = static_cast<std::size_t>(st.out_bytes[H]);
    if constexpr (requires { a.extra_out; })
      for (int e = 0; e < program::template kernel<H>::nextra; ++e) {
        w.p[2 + e] = reinterpret_cast<const std::byte*>(a.extra_out[e]);
        w.bytes[2 + e] = w.bytes[0];  // the same shape as the root (the merge's condition)
      }
    return w;
  }

  // Running the scalar kernels first is the same as running them in plan order when none writes
  // an input in place (a kernel before it may read that) and no kernel before one writes what
  // it reads or where it writes (the arena may reuse its bytes for a value that dies before it
  // runs). Checked on this call's pointers.
  bool scalar_batch_safe(const State& st) const {
    if constexpr (kScalarKernels.count == 0) {
      return false;
    } else {
      std::array<Written, nkernels> w;
      lower::for_each_index<nkernels>([&](auto h) { w[decltype(h)::value] = written<decltype(h)::value>(st); });
      bool safe = true;
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if constexpr (kScalarKernels.is[G]) {
          const auto& a = std::get<G>(st.kernels).args;
          using TG = std::remove_cvref_t<decltype(*a.out)>;
          if (std::get<G>(st.kernels).writes_input) safe = false;
          for (int h = 0; h < G; ++h) {
            if (w[h].overlaps(a.out, sizeof(TG))) safe = false;
            for (int s = 0; s < program::template kernel<G>::nloads; ++s)
              if (w[h].overlaps(a.ptr[s], sizeof(TG))) safe = false;
          }
        }
      });
      return safe;
    }
  }

  template <int G, int... Rest, class Pack>
  static void fill_pack(const State& st, Pack& p) {
    p.head = std::get<G>(st.kernels).args;
    if constexpr (sizeof...(Rest) > 0) fill_pack<Rest...>(st, p.tail);
  }
  template <std::size_t... I>
  void launch_scalar_batch(const State& st, cudaStream_t stream, std::index_sequence<I...>) {
    if constexpr (sizeof...(I) > 0) {
      using Batch = cuda::ScalarBatch<typename program::template kernel<kScalarKernels.index[I]>...>;
      cuda::launch_args_t<Batch> pack{};
      fill_pack<kScalarKernels.index[I]...>(st, pack);
      cuda::launch<Batch>(pack, cpu::LaunchConfig{}, stream, nullptr);
    }
  }

  // Whether GEMM kernel G may start while kernel G - 1 still runs (run_gemm's overlap_previous):
  // G - 1 writes no byte of B (its output, and a GEMM's product, are elsewhere). Never the
  // first kernel: the kernel before it on the stream is not this call's. Never after a scalar
  // kernel: batched (launch_scalar_batch), it ran first, and the kernel right before G on the
  // stream is an earlier one, which may write B and, launched as a dependent launch itself,
  // lets G start once it has waited for its own predecessor.
  template <int G>
  static bool overlap_previous(const State& st) {
    if constexpr (G == 0 || kScalarKernels.is[G > 0 ? G - 1 : 0]) {
      return false;
    } else {
      using T = typename program::template kernel<G>::value_type;
      const auto& g = std::get<G>(st.kernels).args;
      if (!st.runs(G - 1)) return false;  // not launched: the kernel before G is an earlier one
      if (g.batch != 1 || g.k < 1 || g.n < 1 || g.b.col != 1) return false;  // B as the small product reads it
      return !written<G - 1>(st).overlaps(g.b.ptr, sizeof(T) * static_cast<std::size_t>((g.k - 1) * g.b.row + g.n));
    }
  }

  // Times each kernel with CUDA events (profile(true)); synchronises once per call.
  void profile_cuda(State& st, cudaStream_t stream) {
    std::array<cuda::Event, nkernels + 1> ev;
    KILN_CUDA_CHECK(cudaEventRecord(ev[0], stream));
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      if (st.runs(G)) launch_cuda<G>(st, stream);
      KILN_CUDA_CHECK(cudaEventRecord(ev[G + 1], stream));
    });
    KILN_CUDA_CHECK(cudaEventSynchronize(ev[nkernels]));
    for (int g = 0; g < nkernels; ++g) st.profile_ms[g] += ev[g + 1].since(ev[g]);
  }

  // MaxAutotune on CUDA: each candidate (block size and row layout; the heuristic's first
  // cuBLASLt algorithms for a GEMM) timed with events on this call's data, the fastest kept
  // and cached on disk under the device's name, compute capability and driver.
  template <int G, class P>
  void tune_cuda(State& st, P& pr, cudaStream_t stream) {
    using Desc = typename program::template kernel<G>;
    const std::string key = cuda::device_id() + " | " + std::string(type_name<Desc>()) + " | " + signature(pr);
    AutotuneCache cache;
    if (const auto hit = cache.load(key)) {
      pr.cuda_config = hit->config;
      ++stats_.from_cache;
      st.tune_notes[G] = describe_cuda<Desc>(hit->config) + ", from the cache (" + std::to_string(hit->ms) + " ms when tuned)";
      return;
    }
    std::vector<cpu::LaunchConfig> cands;
    if constexpr (requires { pr.args.epilogue; })
      cands = cuda::gemm_candidates(pr.gemm_plan.get(),
                                    cuda::tc_gemm_offered<Desc> && cuda::tc_gemm_applies(pr.args, Desc::has_epilogue));
    else cands = cuda::candidates<Desc>();
    TuneChoice choice;
    std::string notes;
    cuda::Event e0, e1;
    // Candidates are timed as a CUDA graph of two launches back to back, replayed, half the
    // replay counted: as calls run them. Launched directly, a candidate's host cost (cuBLASLt's
    // is several microseconds a call) showed as idle GPU time between the events and favoured
    // kiln's kernels on small products (W4 at batch 16 tuned to a slower kernel); and the second
    // launch overlaps the first as a kernel launched to overlap its predecessor (dependent
    // launches) does in a call, where timed alone that overlap did not show (W4 at batch 1 tuned
    // to a slower candidate; W1's pointwise kernel timed alone favoured a block per span, 0.138
    // against 0.146 ms, which back to back took 0.157 against 0.148). Not with the real
    // predecessor: running that one again could read arena bytes this kernel has since written
    // (values whose lifetimes do not meet share bytes).
    // Default's configuration first, as the incumbent (TuneChoice).
    cands.insert(cands.begin(), cpu::LaunchConfig{});
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const cpu::LaunchConfig& c = cands[i];
      const std::string described = i == 0 ? defaults_note(describe_cuda<Desc>(c)) : describe_cuda<Desc>(c);
      pr.cuda_config = c;
      try {
        launch_cuda<G>(st, stream);  // warm-up
      } catch (const CudaError& e) {
        // A block size the kernel's registers do not allow is not a candidate; any other failure is an error.
        if (e.code != cudaErrorLaunchOutOfResources) throw;
        if (i == 0) throw;  // Default's configuration must launch
        notes += "; " + described + " does not launch";
        continue;
      }
      const cuda::CapturedLaunches pair(stream, [&] {
        launch_cuda<G>(st, stream);
        launch_cuda<G>(st, stream);
      });
      pair.launch(stream);  // the graph's first replay uploads it
      float best_ms = 1e30f;
      for (int rep = 0; rep < 3; ++rep) {
        KILN_CUDA_CHECK(cudaEventRecord(e0, stream));
        pair.launch(stream);
        KILN_CUDA_CHECK(cudaEventRecord(e1, stream));
        best_ms = std::min(best_ms, e1.since(e0) / 2.0f);
      }
      notes += (i == 0 ? "" : "; ") + described + " " + std::to_string(best_ms) + " ms";
      if (i == 0) choice.offer_default(best_ms);
      else choice.offer(c, best_ms);
    }
    const TuneRecord best = choice.chosen();
    pr.cuda_config = best.config;
    cache.store(key, best);
    ++stats_.tuned;
    st.tune_notes[G] = "chose " + chosen_note(choice, describe_cuda<Desc>(best.config)) +
                       "; candidates (each timed as a graph of two launches, per launch): " + notes;
  }
  template <class Desc>
  static std::string describe_cuda(const cpu::LaunchConfig& c) {
    if constexpr (requires { Desc::acc_slot; }) {  // a GEMM
      if (c.variant >= cuda::kLtAlgo) return "cuBLASLt algorithm " + std::to_string(c.variant - cuda::kLtAlgo);
      if (c.variant == cuda::kTcGemm && c.chunks == cuda::kTcWgmmaTma) return "kiln's wgmma kernel fed by TMA, persistent, 128 x 128 tiles";
      if (c.variant == cuda::kTcGemm) return "kiln's mma.sync kernel, 64 x 64 tiles";
      return "the small-product kernel where it applies, else cuBLASLt's first algorithm";
    }
    std::string s = c.threads ? std::to_string(c.threads) + " threads/block" : std::string("the default block size");
    if (c.variant == 1) s += ", a warp per row";
    if (c.variant == 2) s += ", a block per row";
    if (c.chunks == 1) s += ", element loads";
    if (c.chunks == 2) s += ", streamed 16-byte loads";
    if (c.chunks == 0 && Desc::nstages > 0) s += ", the row in registers where it fits";
    return s;
  }
#endif

  // MaxAutotune: time each launch candidate of kernel G on this call's data (kernels are pure:
  // running one again rewrites the same values) and keep the fastest; read and write the
  // on-disk cache.
  template <int G, class P>
  void tune(State& st, P& pr) {
    using Desc = typename program::template kernel<G>;
    using Kernel = typename P::Kernel;
    const std::string key = machine_id() + " | " + std::string(type_name<Desc>()) + " | " + signature(pr);
    AutotuneCache cache;
    if (const auto hit = cache.load(key)) {
      pr.config() = hit->config;
      if constexpr (requires { Kernel::prepare(pr.args); }) Kernel::prepare(pr.args);
      ++stats_.from_cache;
      st.tune_notes[G] = describe(hit->config) + ", from the cache (" + std::to_string(hit->ms) + " ms when tuned)";
      return;
    }
    TuneChoice choice;
    std::string notes;
    const auto time_config = [&](const cpu::LaunchConfig& c) {
      pr.config() = c;
      if constexpr (requires { Kernel::prepare(pr.args); }) Kernel::prepare(pr.args);
      return time_ms([&] { Kernel::run(pr.args); });
    };
    choice.offer_default(time_config(cpu::LaunchConfig{}));
    notes = defaults_note(describe(cpu::LaunchConfig{})) + " " + std::to_string(choice.incumbent.ms) + " ms";
    for (const cpu::LaunchConfig& c : Kernel::candidates(pr.args)) {
      const double ms = time_config(c);
      notes += "; " + describe(c) + " " + std::to_string(ms) + " ms";
      choice.offer(c, ms);
    }
    const TuneRecord best = choice.chosen();
    pr.config() = best.config;
    if constexpr (requires { Kernel::prepare(pr.args); }) Kernel::prepare(pr.args);
    cache.store(key, best);
    ++stats_.tuned;
    st.tune_notes[G] = "chose " + chosen_note(choice, describe(best.config)) + "; candidates: " + notes;
  }

  // The choice as explain() prints it: Default's configuration kept is said so, with the margin.
  static std::string defaults_note(const std::string& described) { return "Default's configuration (" + described + ")"; }
  static std::string chosen_note(const TuneChoice& choice, const std::string& described) {
    if (!choice.kept_default()) return described;
    return defaults_note(described) + ": no candidate faster by more than " +
           std::to_string(static_cast<int>(kTuneMargin * 100 + 0.5)) + "%";
  }

  // The shape part of an autotune key: every extent and stride a kernel runs with.
  template <class P>
  static std::string signature(P& pr) {
    const auto& ra = pr.row_args();
    std::string s = "rows";
    for (int d = 0; d < ra.nrow_dims; ++d) s += " " + std::to_string(ra.row_dims[d]);
    s += " len " + std::to_string(ra.len) + " inner";
    for (auto v : ra.inner) s += " " + std::to_string(v);
    for (const auto& o : ra.outer) {
      s += " outer";
      for (int d = 0; d < ra.nrow_dims; ++d) s += " " + std::to_string(o[d]);
    }
    for (auto v : ra.stage_len) s += " stage " + std::to_string(v);
    // Kernels merged into this one (prepare_merges): whether each extra output is stored is
    // part of what was timed (absent where none is, so earlier keys stay valid).
    std::string extras;
    for (int e : pr.extra_buffer) extras += e >= 0 ? " 1" : " 0";
    if (extras.find('1') != std::string::npos) s += " extras" + extras;
    if constexpr (requires { pr.args.epilogue; }) {
      const auto& g = pr.args;
      s += " gemm " + std::to_string(g.batch) + "x" + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
           std::to_string(g.k) + " a " + std::to_string(g.a.batch) + "," + std::to_string(g.a.row) + "," +
           std::to_string(g.a.col) + " b " + std::to_string(g.b.batch) + "," + std::to_string(g.b.row) + "," +
           std::to_string(g.b.col) + (g.in_place ? " in-place" : " scratch");
    }
    return s;
  }

  // Plans one shape signature: shapes, buffers, strides, memory.
  void prepare(State& st, const std::array<Shape, kSymbols + 1>& inputs) {
    st.key.assign(inputs.begin(), inputs.begin() + kSymbols);
    st.shapes.resize(N);
    for (int i = 0, s = 0; i < N; ++i) {
      const auto& n = graph().nodes[i];
      st.shapes[i] = n.kind == NodeKind::Symbol ? inputs[s++] : infer_shape(n, st.shapes, params_[i]);
    }

    // Buffers: the inputs, the outputs, then arena buffers.
    std::vector<ArenaRequest> arena;
    int nbuffers = kSymbols + NOut;
    auto arena_buffer = [&](int node, const Shape& s) {
      arena.push_back({s.numel() * kElementSize.at(static_cast<std::size_t>(node))});
      return nbuffers++;
    };
    std::array<int, (nkernels > 0 ? nkernels : 1)> group_out{};
    std::vector<bool> keep_to_end;  // arena buffers an assign reads after the last kernel
    for (int g = 0; g < nkernels; ++g) {
      const int root = plan().groups[g].root;
      int out = -1;
      bool assigned = false;
      for (int k = NOut - 1; k >= 0; --k)
        if (graph().outputs[k] == root) {
          if (root_outputs<Root>::assigns[k]) assigned = true;
          else out = kSymbols + k;
        }
      group_out[g] = out >= 0 ? out : arena_buffer(root, st.shapes[root]);
      if (out < 0 && assigned) {
        keep_to_end.resize(arena.size(), false);
        keep_to_end[group_out[g] - kSymbols - NOut] = true;
      }
    }
    for (int k = 0; k < NOut; ++k) st.output_source[k] = group_out[plan().group_of[graph().outputs[k]]];

    st.faces.resize(N);
    st.view_faces.resize(N);
    for (int i = 0, s = 0; i < N; ++i) {
      const auto& n = graph().nodes[i];
      Face& f = st.faces[i];
      Face& vf = st.view_faces[i];
      if (n.kind == NodeKind::Symbol) {
        f.buffer = s++;
        contiguous_strides(st.shapes[i], f.strides);
        vf = f;
        continue;
      }
      if (n.kind == NodeKind::Transpose) {
        vf = st.faces[n.children[0]];
        std::swap(vf.strides[n.rank - 1], vf.strides[n.rank - 2]);
      } else if (n.kind == NodeKind::Reshape || n.kind == NodeKind::ReshapeLike) {
        vf.buffer = st.faces[n.children[0]].buffer;  // the planner made the source contiguous
        contiguous_strides(st.shapes[i], vf.strides);
      } else if (n.kind == NodeKind::Unsqueeze) {  // a new axis of extent 1: any stride will do
        const Face& src = st.faces[n.children[0]];
        vf.buffer = src.buffer;
        for (int d = 0, e = 0; d < n.rank; ++d) vf.strides[d] = d == n.axis ? 0 : src.strides[e++];
      }
      if (plan().materialized[i]) {
        f.buffer = group_out[plan().group_of[i]];
        contiguous_strides(st.shapes[i], f.strides);
      } else if (schedule::is_view(n.kind)) {
        f = vf;
      }
    }
    // The matmul of a GEMM kernel accumulates in the output when the epilogue keeps its shape.
    std::array<bool, (nkernels > 0 ? nkernels : 1)> in_place{};
    for (int g = 0; g < nkernels; ++g) {
      const auto& grp = plan().groups[g];
      if (grp.kind != schedule::KernelKind::Gemm) continue;
      in_place[g] = grp.root == grp.gemm || st.shapes[grp.root] == st.shapes[grp.gemm];
      Face& f = st.faces[grp.gemm];
      f.buffer = in_place[g] ? group_out[g] : arena_buffer(grp.gemm, st.shapes[grp.gemm]);
      contiguous_strides(st.shapes[grp.gemm], f.strides);
    }

    prepare_identities(st, group_out, arena);
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      prepare_kernel<G>(st, group_out[G], in_place[G]);
    });
    prepare_merges(st, group_out);
#if KILN_WITH_CUDA
    if (st.device.is_cuda()) prepare_bias_gradients(st, group_out);
#endif
    for (int g = 0; g < nkernels; ++g)  // explain()'s counts: a kernel not run moves nothing
      if (!st.runs(g)) st.read_bytes[g] = st.write_bytes[g] = st.ops[g] = 0;
    assign_in_place(st, group_out, arena, keep_to_end);

    // Lifetimes of arena buffers, in kernel indices.
    std::vector<int> first(nbuffers, nkernels), last(nbuffers, -1);
    auto touch = [&](int k, int b) {
      if (b < 0) return;
      first[b] = std::min(first[b], k);
      last[b] = std::max(last[b], k);
    };
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      const auto& pr = std::get<G>(st.kernels);
      if (!st.runs(G)) return;  // merged (the kernel it runs in touches its output) or an identity
      // (a named array: nvcc 13.0's front end rejects a braced list in a range-for inside a generic lambda)
      const std::array<int, 4> operands{pr.out_buffer, pr.a_buffer, pr.b_buffer, pr.acc_buffer};
      for (int b : operands) touch(G, b);
      for (int b : pr.extra_buffer) touch(G, b);
      for (int b : pr.load_buffer) touch(G, b);
    });
#if KILN_WITH_CUDA
    // On CUDA the scalar kernels run first (ScalarBatch): their results live from kernel 0, so
    // that no earlier value shares their bytes.
    if (st.device.is_cuda())
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if constexpr (kScalarKernels.is[G]) touch(0, std::get<G>(st.kernels).out_buffer);
      });
#endif
    for (std::size_t a = 0; a < arena.size(); ++a) {
      const int b = kSymbols + NOut + static_cast<int>(a);
      arena[a].first = first[b];
      arena[a].last = std::max(last[b], first[b]);
      if (a < keep_to_end.size() && keep_to_end[a]) arena[a].last = nkernels;
    }
    st.arena_bytes = plan_memory(arena);
    st.buffers.assign(nbuffers, 0);
    for (std::size_t a = 0; a < arena.size(); ++a) st.buffers[kSymbols + NOut + a] = arena[a].offset;
    if (Policy::persistent && st.arena_bytes > 0 && !st.device.is_cuda())
      st.arena = std::unique_ptr<std::byte[], detail::AlignedDelete>(
          static_cast<std::byte*>(detail::aligned_alloc_bytes(st.arena_bytes)), detail::AlignedDelete{st.arena_bytes});
  }

  // A sum_to that sums nothing (its input already has its shape: the gradient of a bias add
  // that did not broadcast, say) is its input. Where the input is stored contiguously and the
  // value is not an output, its readers read the input's buffer and the kernel is not run.
  template <class GroupOut, class Arena>
  void prepare_identities(State& st, const GroupOut& group_out, Arena& arena) {
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int G = decltype(gi)::value;
      constexpr auto& ki = program::template kernel_info<G>;
      if constexpr (ki.group.kind == schedule::KernelKind::ReduceTo) {
        using Desc = typename program::template kernel<G>;
        if constexpr (Desc::nloads == 1 && std::is_same_v<typename Desc::tree, lower::LLoad<0>>) {
          const int root = ki.group.root, in = ki.load_node[0], b = group_out[G];
          // Not an output (returned, or assigned: that value is copied from its buffer after
          // the last kernel), and a real identity for these shapes.
          if (graph().is_output[root] || !(st.shapes[in] == st.shapes[root])) return;
          const Face& fi = st.faces[in];
          index_t c[kMaxRank] = {};
          contiguous_strides(st.shapes[in], c);
          for (int d = 0; d < st.shapes[in].rank(); ++d)
            if (fi.strides[d] != c[d] && st.shapes[in][d] != 1) return;
          if (fi.buffer < 0) return;
          for (auto& f : st.faces) f.buffer = f.buffer == b ? fi.buffer : f.buffer;
          for (auto& f : st.view_faces) f.buffer = f.buffer == b ? fi.buffer : f.buffer;
          arena[static_cast<std::size_t>(b - kSymbols - NOut)].bytes = 0;
          st.skip[G] = Skip::Identity;
        }
      }
    });
  }

  // Multiple outputs: kernel A merged into B (the plan's merged_into) runs inside B when A's
  // root has B's root's shape for these inputs; B then writes A's root (an extra output) and A
  // is not run. Otherwise A runs, and B evaluates A's value again from A's inputs (its tree has
  // them inlined either way).
  template <class GroupOut>
  void prepare_merges(State& st, const GroupOut& group_out) {
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int B = decltype(gi)::value;
      constexpr auto& grp = plan().groups[B];
      auto& pr = std::get<B>(st.kernels);
      for (int e = 0; e < grp.nextra; ++e) {
        const int a = grp.extra[e];
        const bool merged = st.shapes[plan().groups[a].root] == st.shapes[grp.root];
        pr.extra_buffer[e] = merged ? group_out[a] : -1;
        if (!merged) continue;
        st.skip[a] = Skip::Merged;
        st.write_bytes[B] += st.write_bytes[a];  // B stores A's value (A's counts are zeroed in prepare)
      }
    });
  }

#if KILN_WITH_CUDA
  // Bias gradients (the plan's bias_grad, schedule::fold_bias_gradients): GEMM kernel G computes
  // C = A B, and sum_to kernel R sums B over its rows. On CUDA, where R runs (not an identity),
  // its root is one row of B's columns ([n] or [1, n]), G's B is that value stored row-major
  // (cuBLASLt's A, op N: BGRADA is not offered for op T) in one matrix, the product is not one for
  // the small-product kernel, and cuBLASLt offers its BGRADA epilogue for the product, G writes
  // R's root and R is not run. (MaxAutotune then times cuBLASLt's algorithms with the epilogue
  // only: kiln's tensor-core kernels write no sums.)
  template <class GroupOut>
  void prepare_bias_gradients(State& st, const GroupOut& group_out) {
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int G = decltype(gi)::value;
      constexpr int R = plan().groups[G].bias_grad;
      if constexpr (R >= 0) {
        using Desc = typename program::template kernel<G>;
        auto& pr = std::get<G>(st.kernels);
        const auto& a = pr.args;
        const int sum = plan().groups[R].root, c = graph().nodes[sum].children[0];
        const Shape &bias = st.shapes[sum], &b = st.shapes[c];
        const auto n = static_cast<std::size_t>(a.n), k = static_cast<std::size_t>(a.k);
        const bool one_row = bias.rank() == 1 ? bias[0] == n : bias[0] == 1 && bias[1] == n;
        // A product of a few rows keeps kiln's small-product kernel (it writes no sums).
        if (!st.runs(R) || !pr.gemm_plan || pr.gemm_plan->bias_slot >= 0 || !one_row || a.batch != 1 || b.rank() != 2 ||
            b[0] != k || b[1] != n || pr.b_buffer != st.faces[c].buffer || a.b.col != 1 || a.b.row != a.n ||
            cuda::small_gemm_applies(a, Desc::has_epilogue))
          return;
        auto plan = cuda::make_gemm_plan<Desc>(a, /*bias_grad=*/true);
        if (!plan) return;  // cuBLASLt offers no algorithm with the epilogue: R runs
        pr.gemm_plan = std::move(plan);
        pr.extra_buffer[0] = group_out[R];
        st.skip[R] = Skip::Folded;
        st.write_bytes[G] += st.write_bytes[R];
      }
    });
  }
#endif

  // kiln::assign without a copy: the value is written straight into the target's tensor when
  // its kernel is a pointwise one that reads the target's old value (if at all) only at the
  // element it writes, and no later kernel reads that old value. Then the arena buffer the value
  // had is not needed. (check_assigns makes sure no other symbol is bound to the target's tensor.)
  template <class Arena, class Keep, class GroupOut>
  void assign_in_place(State& st, GroupOut& group_out, Arena& arena, Keep& keep_to_end) {
    for (int k = 0; k < NOut; ++k) {
      const int s = kAssignTarget[k];
      if (s < 0) continue;
      const int node = graph().outputs[k];
      const int own = plan().group_of[node];
      if (own < 0) continue;
      const int b = group_out[own];
      if (b < kSymbols + NOut) continue;  // also a returned output: that tensor is written
      // The kernel that writes the value: its own, or the one it is merged into.
      const int g = st.skip[own] == Skip::Merged ? plan().groups[own].merged_into : own;
      bool ok = true;
      for (int j = 0; j < NOut; ++j) ok = ok && (j == k || kAssignTarget[j] != s) && (j == k || graph().outputs[j] != node);
      const auto& grp = plan().groups[own];
      ok = ok && grp.kind == schedule::KernelKind::Row && grp.nstages == 0 && !grp.copy && grp.root == node;
      lower::for_each_index<nkernels>([&](auto gi) {
        constexpr int G = decltype(gi)::value;
        constexpr auto& ki = program::template kernel_info<G>;
        const auto& pr = std::get<G>(st.kernels);
        if (!st.runs(G)) return;
        for (int l = 0; l < program::template kernel<G>::nloads; ++l) {
          if (pr.load_buffer[l] != s) continue;
          if (G > g) ok = false;  // read after the update
          if (G == g && !(graph().nodes[ki.load_node[l]].kind == NodeKind::Symbol && st.shapes[ki.load_node[l]] == st.shapes[node]))
            ok = false;  // read at other elements (a broadcast or a view)
        }
        if (G > g && (pr.a_buffer == s || pr.b_buffer == s)) ok = false;
      });
      if (!ok) continue;
      lower::for_each_index<nkernels>([&](auto gi) {
        constexpr int G = decltype(gi)::value;
        auto& pr = std::get<G>(st.kernels);
        if (pr.out_buffer == b) pr.out_buffer = s;
        for (int& x : pr.extra_buffer) x = x == b ? s : x;
        for (int& l : pr.load_buffer) l = l == b ? s : l;
        const std::array<int*, 3> operands{&pr.a_buffer, &pr.b_buffer, &pr.acc_buffer};
        for (int* x : operands) *x = *x == b ? s : *x;
        if (G == g) pr.writes_input = true;
      });
      for (auto& f : st.faces) f.buffer = f.buffer == b ? s : f.buffer;
      for (auto& f : st.view_faces) f.buffer = f.buffer == b ? s : f.buffer;
      for (int& o : st.output_source) o = o == b ? s : o;
      group_out[own] = s;
      const std::size_t a = static_cast<std::size_t>(b - kSymbols - NOut);
      arena[a].bytes = 0;
      if (a < keep_to_end.size()) keep_to_end[a] = false;
    }
  }

  // A Constant leaf's value, or what kiln::count derives from its operand's shape.
  double constant_value(const State& st, int node) const {
    const auto& n = graph().nodes[node];
    if (n.nchildren == 0) return params_[node].scalar;
    const Shape& s = st.shapes[n.children[0]];
    return static_cast<double>(n.all ? s.numel() : s[n.axis]);
  }

  // The shape of iteration space `space` of kernel G.
  template <int G>
  static Shape space_shape(const State& st, int space) {
    constexpr auto& ki = program::template kernel_info<G>;
    const int node = ki.space_node[space];
    const auto& grp = ki.group;
    const bool row_root_is_reduction = grp.kind == schedule::KernelKind::Row && space == 0 && !grp.copy &&
                                       graph().nodes[grp.root].kind == NodeKind::Reduce;
    if (!row_root_is_reduction) return st.shapes[node];
    Shape s = st.shapes[graph().nodes[grp.root].children[0]];  // the reduced axis kept as 1
    s[s.size() - 1] = 1;
    return s;
  }

  template <int G>
  void prepare_kernel(State& st, int out_buffer, bool in_place) {
    using Desc = typename program::template kernel<G>;
    using T = typename Desc::value_type;
    constexpr auto& ki = program::template kernel_info<G>;
    constexpr auto kind = ki.group.kind;
    auto& pr = std::get<G>(st.kernels);
    auto& ra = pr.row_args();
    pr.out_buffer = out_buffer;

    const Shape o = space_shape<G>(st, 0);
    const int ro = o.rank();
    ra.nrow_dims = std::max(ro - 1, 0);
    for (int d = 0; d + 1 < ro; ++d) ra.row_dims[d] = static_cast<index_t>(o[d]);
    ra.len = ro ? static_cast<index_t>(o[ro - 1]) : 1;
    for (int s = 0; s < Desc::nloads; ++s) {
      const int n = ki.load_node[s];
      const bool copied = ki.group.copy && n == ki.group.root;
      const Face& f = copied ? st.view_faces[n] : st.faces[n];
      pr.load_buffer[s] = f.buffer;
      load_strides(st.shapes[n], f, space_shape<G>(st, ki.load_space[s]), o, ra.outer[s], ra.inner[s]);
    }
    for (int c = 0; c < Desc::nconsts; ++c) ra.consts[c] = static_cast<compute_t<T>>(constant_value(st, ki.const_node[c]));
    for (int s = 0; s < Desc::nstages; ++s) {
      const Shape p = space_shape<G>(st, s + 1);
      ra.stage_len[s] = static_cast<index_t>(p[p.size() - 1]);
    }

    if constexpr (kind == schedule::KernelKind::Gemm) {
      const auto& mm = graph().nodes[ki.group.gemm];
      const Shape &sa = st.shapes[mm.children[0]], &sb = st.shapes[mm.children[1]];
      const Face &fa = st.faces[mm.children[0]], &fb = st.faces[mm.children[1]];
      const int ra_ = sa.rank(), rb_ = sb.rank();
      auto& g = pr.args;
      g.a = {nullptr, (ra_ == 3 && sa[0] != 1) ? fa.strides[0] : 0, fa.strides[ra_ - 2], fa.strides[ra_ - 1]};
      g.b = {nullptr, (rb_ == 3 && sb[0] != 1) ? fb.strides[0] : 0, fb.strides[rb_ - 2], fb.strides[rb_ - 1]};
      const Shape& sm = st.shapes[ki.group.gemm];
      g.batch = sm.rank() == 3 ? static_cast<index_t>(sm[0]) : 1;
      g.m = static_cast<index_t>(sa[ra_ - 2]);
      g.k = static_cast<index_t>(sa[ra_ - 1]);
      g.n = static_cast<index_t>(sb[rb_ - 1]);
      // One weight matrix for every batch and rows stacked contiguously: one taller GEMM.
      if (g.batch > 1 && g.b.batch == 0 && g.a.col == 1 && g.a.batch == g.m * g.a.row) {
        g.m *= g.batch;
        g.batch = 1;
        g.a.batch = 0;
      }
      g.in_place = in_place;
      pr.a_buffer = fa.buffer;
      pr.b_buffer = fb.buffer;
      pr.acc_buffer = st.faces[ki.group.gemm].buffer;
      collapse(ra, false);
    } else if constexpr (kind == schedule::KernelKind::AxisReduce) {
      pr.args.axis = graph().nodes[ki.group.root].axis;
    } else if constexpr (kind == schedule::KernelKind::TotalReduce) {
      collapse(ra, true);
    } else if constexpr (kind == schedule::KernelKind::ReduceTo) {
      // Where each input element lands in the output: the output's strides, 0 where summed.
      const Shape& out = st.shapes[ki.group.root];
      index_t ost[kMaxRank] = {};
      contiguous_strides(out, ost);
      auto out_stride = [&](int d) -> index_t {
        const int e = d - (ro - out.rank());
        return (e < 0 || out[e] == 1) ? 0 : ost[e];
      };
      for (int d = 0; d + 1 < ro; ++d) pr.args.out_outer[d] = out_stride(d);
      pr.args.out_inner = ro ? out_stride(ro - 1) : 0;
      pr.args.out_numel = static_cast<index_t>(out.numel());
    } else {
      // Row caches: every space has the output's shape, so a cached value's position j in its
      // stage is position j of every tree that reads it.
      ra.row_cache = ra.len <= cpu::kRowCache;
      for (int s = 0; s < Desc::nstages; ++s) ra.row_cache = ra.row_cache && space_shape<G>(st, s + 1) == o;
      constexpr bool evaluates_index = [] {
        for (int i = 0; i < N; ++i)
          if (plan().group_of[i] == G && graph().nodes[i].column_index) return true;
        return false;
      }();
      collapse(ra, Desc::nstages == 0 && !evaluates_index);
    }
    ra.rows = 1;
    for (int d = 0; d < ra.nrow_dims; ++d) ra.rows *= ra.row_dims[d];
    ra.unit_inner = true;
    for (int s = 0; s < Desc::nloads; ++s)  // rank-0 loads are LScalar: their stride does not matter
      ra.unit_inner = ra.unit_inner && (ra.inner[s] == 1 || graph().nodes[ki.load_node[s]].rank == 0);

    // Traffic and operation counts for explain(): each distinct buffer read once, the root
    // written once; an op per evaluator node per element, 2 per GEMM multiply-add.
    const double elem = sizeof(T);
    double reads = 0;
    int seen[Desc::nloads + 2] = {};
    int nseen = 0;
    auto read = [&](int buffer, const Shape& shape) {
      for (int i = 0; i < nseen; ++i)
        if (seen[i] == buffer) return;
      seen[nseen++] = buffer;
      reads += static_cast<double>(shape.numel()) * elem;
    };
    for (int s = 0; s < Desc::nloads; ++s)
      if constexpr (kind == schedule::KernelKind::Gemm) {
        if (ki.load_node[s] != ki.group.gemm) read(pr.load_buffer[s], st.shapes[ki.load_node[s]]);
      } else {
        read(pr.load_buffer[s], st.shapes[ki.load_node[s]]);
      }
    const double elements = static_cast<double>(ra.rows) * static_cast<double>(ra.len);
    st.write_bytes[G] = st.out_bytes[G] = static_cast<double>(st.shapes[ki.group.root].numel()) * elem;
    if constexpr (kind == schedule::KernelKind::Gemm) {
      const auto& mm = graph().nodes[ki.group.gemm];
      read(pr.a_buffer, st.shapes[mm.children[0]]);
      read(pr.b_buffer, st.shapes[mm.children[1]]);
      const auto& g = pr.args;
      st.ops[G] = 2.0 * g.batch * g.m * g.n * g.k + elements * lower::tree_ops<typename Desc::epilogue>::value;
#if KILN_WITH_CUDA
      if (st.device.is_cuda()) {
        pr.gemm_plan = cuda::make_gemm_plan<Desc>(pr.args);
      } else
#endif
      {
        pr.workspace = std::make_unique<cpu::GemmWorkspace<compute_t<T>>>();
        pr.args.workspace = pr.workspace.get();
        Prepared<Desc>::Kernel::prepare(pr.args);
      }
    } else if constexpr (kind == schedule::KernelKind::Row) {
      st.ops[G] = elements * lower::tree_ops<typename Desc::out_tree>::value;
      [&]<class... S>(lower::TypeList<S...>) {
        int s = 0;
        ((st.ops[G] += static_cast<double>(ra.rows) * ra.stage_len[s++] * (lower::tree_ops<typename S::tree>::value + 1)), ...);
      }(typename Desc::stages{});
    } else {
      st.ops[G] = elements * (lower::tree_ops<typename Desc::tree>::value + 1);
    }
    st.read_bytes[G] = reads;
#if KILN_WITH_CUDA
    if (st.device.is_cuda()) prepare_scratch<Desc>(pr, st.device.index);
#endif
  }

#if KILN_WITH_CUDA
  // A kernel's device scratch, allocated once per shape signature: a total reduction's partials.
  template <class Desc, class P>
  static void prepare_scratch(P& pr, int dev) {
    std::size_t bytes = 0;
    if constexpr (!requires { pr.args.epilogue; }) bytes = cuda::scratch_bytes<Desc>();
    if (bytes == 0) return;
    pr.scratch = cuda::Buffer(bytes, dev);
    KILN_CUDA_CHECK(cudaMemsetAsync(pr.scratch.get(), 0, bytes, cuda::stream()));
  }
#endif

  // Merges dims that every load walks as one; with_inner also folds rows into the last axis.
  template <class RA>
  static void collapse(RA& ra, bool with_inner) {
    constexpr int NL = sizeof(ra.inner) / sizeof(ra.inner[0]);
    index_t dims[kMaxRank + 1];
    index_t strides[NL][kMaxRank + 1];
    int nd = ra.nrow_dims;
    for (int d = 0; d < nd; ++d) dims[d] = ra.row_dims[d];
    for (int s = 0; s < NL; ++s)
      for (int d = 0; d < nd; ++d) strides[s][d] = ra.outer[s][d];
    if (with_inner) {
      dims[nd] = ra.len;
      for (int s = 0; s < NL; ++s) strides[s][nd] = ra.inner[s];
      ++nd;
    }
    collapse_dims(nd, dims, strides, NL);
    if (with_inner) {
      --nd;
      ra.len = dims[nd];
      for (int s = 0; s < NL; ++s) ra.inner[s] = strides[s][nd];
    }
    ra.nrow_dims = nd;
    for (int d = 0; d < nd; ++d) ra.row_dims[d] = dims[d];
    for (int s = 0; s < NL; ++s)
      for (int d = 0; d < nd; ++d) ra.outer[s][d] = strides[s][d];
  }

  std::vector<NodeParams> params_;
  std::vector<std::unique_ptr<State>> plans_;  // most recent first
  bool profiling_ = false;
  AutotuneStats stats_;
};

}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln::runtime

