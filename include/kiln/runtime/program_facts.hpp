// kiln: what is known of a compiled program before any call, as constants: its symbols, its
// outputs and which of them assign, the element size of every node, the kernels that compute
// one value from the inputs, and the values a training step keeps between its forward and
// backward kernels. The plan, the executors and the compiled object all read these.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "kiln/lower/lower.hpp"

namespace kiln::runtime {

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
  // Each symbol is the target of at most one kiln::assign: two would write one tensor twice,
  // and which value it kept would depend on the kernel order.
  static_assert([] {
    for (std::size_t i = 0; i < sizeof...(Es); ++i)
      for (std::size_t j = i + 1; j < sizeof...(Es); ++j)
        if (assigns[i] && assigns[j] && targets[i] == targets[j]) return false;
    return true;
  }(), "kiln::outputs: two kiln::assign outputs target one symbol; assign each symbol once");
};

template <class Program, class Root>
struct ProgramFacts {
  using program = Program;
  using graph_type = typename program::graph_type;
  static constexpr int N = program::size;
  static constexpr int NOut = graph_type::noutputs;
  static constexpr int nkernels = program::nkernels;
  static constexpr int kArray = nkernels > 0 ? nkernels : 1;  // per-kernel arrays
  static constexpr const auto& graph() { return program::graph; }
  static constexpr const auto& plan() { return program::plan; }

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
  static constexpr const char* symbol_name(int s) { return program::graph.nodes[kSymbolNodes[s]].name; }

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
  // Symbols a CUDA graph reads or writes where the bound tensor lives (a kiln::param, or a
  // kiln::assign target): the graphs of persistent policies are kept per set of their
  // addresses. The other symbols (kiln::input) are copied into buffers of the plan.
  static constexpr std::array<bool, kSymbols + 1> kInPlace = [] {
    std::array<bool, kSymbols + 1> a{};
    for (int s = 0; s < kSymbols; ++s) a[s] = program::graph.nodes[kSymbolNodes[s]].param;
    for (int k = 0; k < NOut; ++k)
      if (kAssignTarget[k] >= 0) a[kAssignTarget[k]] = true;
    return a;
  }();
  static_assert([] {
    for (int k = 0; k < NOut; ++k)
      if (root_outputs<Root>::assigns[k] && kAssignTarget[k] < 0) return false;
    return true;
  }(), "kiln::assign: the target symbol is not read by the program; an assigned symbol must be an input of it");

  // Buffers of a call: the inputs (0 .. kSymbols-1), the outputs (kSymbols .. kSymbols+NOut-1),
  // then at most one arena buffer per node plus one scratch per kernel.
  static constexpr int kMaxBuffers = kSymbols + NOut + N + nkernels + 1;
  static constexpr int kFirstArenaBuffer = kSymbols + NOut;

  template <int I>
  using dtype_of = typename graph_type::template node<I>::dtype;
  static constexpr std::array<std::size_t, N> kElementSize = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<std::size_t, N>{sizeof(dtype_of<I>)...};
  }(std::make_integer_sequence<int, N>{});

  static constexpr int symbol_index(std::uint64_t id) {
    for (int s = 0; s < kSymbols; ++s)
      if (program::graph.nodes[kSymbolNodes[s]].symbol_id == id) return s;
    return -1;
  }

  // Scalar kernels: a row kernel without stages whose output has rank 0 and whose loads are all
  // leaves (inputs, parameters): one value from the call's inputs, like AdamW's bias
  // corrections (two per parameter). A backend may run them first, together
  // (the CUDA executor's one launch); the plan then keeps their results alive from kernel 0.
  template <int G>
  static constexpr bool is_scalar_kernel() {
    const auto& ki = program::template kernel_info<G>;
    bool scalar = ki.group.kind == schedule::KernelKind::Row && ki.group.nstages == 0 && !ki.group.copy &&
                  graph().nodes[ki.group.root].rank == 0;
    for (int s = 0; s < ki.nloads; ++s) scalar = scalar && schedule::is_leaf(graph().nodes[ki.load_node[s]].kind);
    return scalar;
  }
  struct ScalarKernels {
    std::array<bool, kArray> is{};
    std::array<int, kArray> index{};
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
};

}  // namespace kiln::runtime
