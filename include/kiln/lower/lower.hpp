// kiln: lowering. For each kernel group of the plan, enumerate its load slots (a node read
// in one iteration space), its scalar slots and its stages (KernelInfo, constexpr), and build
// the evaluator trees and the kernel descriptor type from them.
//
// Iteration spaces of a kernel: space 0 is where the output tree runs (the root's shape; for
// a root that is a row reduction, its shape with the last axis kept). Space s + 1 is the
// input of row stage s. Reduce kernels have one space, the input of the reduction.
#pragma once
#include <array>
#include <tuple>
#include <utility>


#include "kiln/graph/graph.hpp"
#include "kiln/lower/evaluator.hpp"
#include "kiln/schedule/plan.hpp"

namespace kiln::lower {

using schedule::Group;
using schedule::KernelKind;
using schedule::kMaxStages;

// Calls f(std::integral_constant<int, I>{}) for I in [0, N) in order: a compile-time loop, e.g.
// over a program's kernels (inside f, `decltype(i)::value` is a constant expression). A fold
// over an index sequence: Boost.Hana's for_each over a range did the same at more compile time
// (docs/architecture.md, "Plain C++20 rather than Boost.Hana").
template <int N, class F>
constexpr void for_each_index(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }(std::make_integer_sequence<int, N>{});
}

enum class LowerCase : std::uint8_t { Load, Constant, Stage, Op };

template <int Cap>
struct KernelInfo {
  Group group{};
  int space_node[kMaxStages + 1] = {};  // the node whose value spans each space
  int nloads = 0;
  int load_node[Cap] = {};
  int load_space[Cap] = {};
  int nconsts = 0;
  int const_node[Cap] = {};
  int acc_slot = -1;  // Gemm: the load slot of the matmul's result
  int index_node = -1;  // an integer operand read through the kernel's own pointer, not a load slot (ids, kv_len, a position)
  bool cached[kMaxStages] = {};  // Row: the stage keeps its input's values for the row

  constexpr int cached_stage_of(int n) const {
    for (int s = 0; s < group.nstages; ++s)
      if (cached[s] && space_node[s + 1] == n) return s;
    return -1;
  }

  constexpr int stage_index(int n) const {
    for (int s = 0; s < group.nstages; ++s)
      if (group.stages[s] == n) return s;
    return -1;
  }
  constexpr int load_slot(int n, int space) const {
    for (int k = 0; k < nloads; ++k)
      if (load_node[k] == n && load_space[k] == space) return k;
    return -1;
  }
  constexpr int const_slot(int n) const {
    for (int k = 0; k < nconsts; ++k)
      if (const_node[k] == n) return k;
    return -1;
  }
};

template <int N, int NOut>
constexpr LowerCase lower_case(const graph::GraphInfo<N, NOut>& g, const schedule::Plan<N>& p, int grp, int n) {
  const Group& G = p.groups[grp];
  if (g.nodes[n].kind == NodeKind::Constant) return LowerCase::Constant;
  if (G.copy) return LowerCase::Load;
  for (int s = 0; s < G.nstages; ++s)
    if (G.stages[s] == n) return LowerCase::Stage;
  // Its own ops, those of kernels merged into it, and values it evaluates again (recomputed).
  if (g.nodes[n].kind == NodeKind::Pointwise && p.evaluated_in(n, grp)) return LowerCase::Op;
  return LowerCase::Load;
}

template <int N, int NOut>
constexpr auto make_kernel_info(const graph::GraphInfo<N, NOut>& g, const schedule::Plan<N>& p, int grp) {
  constexpr int Cap = N * (kMaxStages + 1) + 1;
  KernelInfo<Cap> k{};
  k.group = p.groups[grp];
  const Group& G = k.group;

  // Visit a tree in the order the type-level lowering does, numbering slots on first sight.
  auto visit = [&](auto& self, int n, int space) -> void {
    switch (lower_case(g, p, grp, n)) {
      case LowerCase::Constant:
        if (k.const_slot(n) < 0) k.const_node[k.nconsts++] = n;
        return;
      case LowerCase::Stage:
        return;
      case LowerCase::Load:
        if (k.load_slot(n, space) < 0) {
          k.load_node[k.nloads] = n;
          k.load_space[k.nloads++] = space;
        }
        return;
      case LowerCase::Op:
        for (int c = 0; c < g.nodes[n].nchildren; ++c)
          if (g.nodes[n].reads_value_of(c)) self(self, g.nodes[n].children[c], space);
        return;
    }
  };
  if (G.kind == KernelKind::Row || G.kind == KernelKind::Gemm) {
    k.space_node[0] = G.root;
    visit(visit, G.root, 0);
    int ncached = 0;
    for (int s = 0; s < G.nstages; ++s) {
      const int input = g.nodes[G.stages[s]].children[0];
      k.space_node[s + 1] = input;
      visit(visit, input, s + 1);
      // A computed stage input that other trees of the kernel read too: keep it per row
      // (at most two stages, so the row caches stay small).
      if (lower_case(g, p, grp, input) == LowerCase::Op && g.use_count[input] > 1 && ncached < 2) {
        k.cached[s] = true;
        ++ncached;
      }
    }
    for (int e = 0; e < G.nextra; ++e) visit(visit, p.groups[G.extra[e]].root, 0);  // extra outputs
    if (G.kind == KernelKind::Gemm) {
      // The accumulator is a load slot even when no epilogue op reads it.
      if (k.load_slot(G.gemm, 0) < 0) {
        k.load_node[k.nloads] = G.gemm;
        k.load_space[k.nloads++] = 0;
      }
      k.acc_slot = k.load_slot(G.gemm, 0);
    }
  } else if (G.kind == KernelKind::AxisCopy || G.kind == KernelKind::Attention) {
    // The output's space; a load per source (the operands read for their values), in order.
    // An integer last operand (attention's kv_len, a window's position) is read through the
    // kernel's own pointer, as index rows' ids are.
    k.space_node[0] = G.root;
    const auto& n = g.nodes[G.root];
    const int nloaded = n.index_last ? n.nchildren - 1 : n.nchildren;
    if (n.index_last) k.index_node = n.children[nloaded];
    for (int c = 0; c < nloaded; ++c)
      if (n.reads_value_of(c)) {
        k.load_node[k.nloads] = n.children[c];
        k.load_space[k.nloads++] = 0;
      }
  } else if (G.kind == KernelKind::Convert || G.kind == KernelKind::Dropout) {
    // The operand, read from memory through its strides, in the output's space (and dropout's
    // rng through the kernel's own pointer).
    k.space_node[0] = G.root;
    k.load_node[0] = g.nodes[G.root].children[0];
    k.load_space[0] = 0;
    k.nloads = 1;
    if (g.nodes[G.root].index_last) k.index_node = g.nodes[G.root].children[1];
  } else if (G.kind == KernelKind::IndexRows) {
    // Load slot 0 is the table (embedding) or src (scatter_add_rows). The iteration space is
    // the positions of the ids and the row length: the output's for a gather, src's for a scatter.
    const auto& n = g.nodes[G.root];
    k.index_node = n.children[0];
    k.space_node[0] = n.scatter ? n.children[1] : G.root;
    k.load_node[0] = n.children[1];
    k.load_space[0] = 0;
    k.nloads = 1;
  } else {
    k.space_node[0] = g.nodes[G.root].children[0];
    visit(visit, k.space_node[0], 0);
  }
  return k;
}

// The compile-time program of one expression: graph, plan, and one lowered kernel per group.
template <class Root, bool Fuse>
struct Program {
  using graph_type = graph::graph_of<Root>;
  static constexpr int size = graph_type::size;
  static constexpr auto& graph = graph_type::info;
  static constexpr schedule::Plan<size> plan = schedule::make_plan(graph_type::info, Fuse);
  static constexpr int nkernels = plan.ngroups;

  template <int G>
  static constexpr auto kernel_info = make_kernel_info(graph_type::info, plan, G);

  template <int G, int Node, int Space, LowerCase C = lower_case(graph_type::info, plan, G, Node)>
  struct lower_tree;
  template <int G, int Node, int Space>
  struct lower_tree<G, Node, Space, LowerCase::Load> {
    static constexpr int slot = kernel_info<G>.load_slot(Node, Space);
    using type = std::conditional_t<graph_type::info.nodes[Node].rank == 0, LScalar<slot>, LLoad<slot>>;
  };
  template <int G, int Node, int Space>
  struct lower_tree<G, Node, Space, LowerCase::Constant> {
    using type = LConst<kernel_info<G>.const_slot(Node)>;
  };
  template <int G, int Node, int Space>
  struct lower_tree<G, Node, Space, LowerCase::Stage> {
    using type = LStage<kernel_info<G>.stage_index(Node)>;
  };
  template <int G, int Node, int Space>
  struct lower_tree<G, Node, Space, LowerCase::Op> {
    // The operands whose values the op reads (shape-only operands are not evaluated).
    static constexpr auto value_children = [] {
      std::array<int, 4> c{};
      int n = 0;
      for (int k = 0; k < graph_type::info.nodes[Node].nchildren; ++k)
        if (graph_type::info.nodes[Node].reads_value_of(k)) c[n++] = graph_type::info.nodes[Node].children[k];
      c[3] = n;
      return c;
    }();
    template <std::size_t... C>
    static auto build(std::index_sequence<C...>)
        -> LOp<typename graph_type::template node<Node>::op_type,
               typename lower_tree<G, value_children[C], Space>::type...>;
    using op = std::conditional_t<graph_type::info.nodes[Node].column_index, LIndex,
                                  decltype(build(std::make_index_sequence<value_children[3]>{}))>;
    // A cached stage's input, read by a tree that runs after that stage (the output tree, or a
    // later stage), comes from the row cache; earlier stages recompute it.
    static constexpr int cached = kernel_info<G>.cached_stage_of(Node);
    using type = std::conditional_t<(cached >= 0 && (Space == 0 || Space > cached + 1)), LCached<cached, op>, op>;
  };

  template <int G, class Seq>
  struct stage_list;
  template <int G, int... S>
  struct stage_list<G, std::integer_sequence<int, S...>> {
    using type = TypeList<Stage<graph_type::info.nodes[kernel_info<G>.group.stages[S]].reduce_kind,
                                typename lower_tree<G, kernel_info<G>.space_node[S + 1], S + 1>::type,
                                kernel_info<G>.cached[S]>...>;
  };

  template <int G, KernelKind K = kernel_info<G>.group.kind>
  struct lower_kernel;
  // SlotAlias of kernel G: for each load slot, the first slot that loads the same node.
  template <int G, class Seq = std::make_integer_sequence<int, kernel_info<G>.nloads>>
  struct slot_alias;
  template <int G, int... K>
  struct slot_alias<G, std::integer_sequence<int, K...>> {
    static constexpr int first(int k) {
      for (int j = 0; j < k; ++j)
        if (kernel_info<G>.load_node[j] == kernel_info<G>.load_node[k]) return j;
      return k;
    }
    // Empty where no slot aliases another (every pointwise kernel): descriptors stay shared.
    using type = std::conditional_t<((first(K) == K) && ...), SlotAlias<>, SlotAlias<first(K)...>>;
  };

  // The trees of the roots of the kernels merged into G, which G writes too.
  template <int G, class Seq>
  struct extra_list;
  template <int G, int... E>
  struct extra_list<G, std::integer_sequence<int, E...>> {
    using type = TypeList<typename lower_tree<G, plan.groups[kernel_info<G>.group.extra[E]].root, 0>::type...>;
  };

  template <int G>
  struct lower_kernel<G, KernelKind::Row> {
    static constexpr auto& ki = kernel_info<G>;
    using T = typename graph_type::template node<ki.group.root>::dtype;
    using type = RowKernel<T, typename lower_tree<G, ki.group.root, 0>::type,
                           typename stage_list<G, std::make_integer_sequence<int, ki.group.nstages>>::type,
                           ki.nloads, ki.nconsts, typename slot_alias<G>::type,
                           typename extra_list<G, std::make_integer_sequence<int, ki.group.nextra>>::type>;
  };
  template <int G>
  struct lower_kernel<G, KernelKind::Gemm> {
    static constexpr auto& ki = kernel_info<G>;
    using T = typename graph_type::template node<ki.group.root>::dtype;
    using type = GemmKernel<T, typename lower_tree<G, ki.group.root, 0>::type, ki.acc_slot, ki.nloads, ki.nconsts>;
  };
  // The type of kernel G's index operand (index_node), or void where it has none.
  template <int I>
  static auto index_type_of() {
    if constexpr (I < 0) return std::type_identity<void>{};
    else return std::type_identity<typename graph_type::template node<I>::dtype>{};
  }
  template <int G>
  using index_type_t = typename decltype(index_type_of<kernel_info<G>.index_node>())::type;

  template <int G>
  struct lower_kernel<G, KernelKind::AxisCopy> {
    static constexpr auto& ki = kernel_info<G>;
    using type = AxisCopyKernel<typename graph_type::template node<ki.group.root>::dtype, ki.nloads, index_type_t<G>>;
  };
  template <int G>
  struct lower_kernel<G, KernelKind::Convert> {
    static constexpr auto& ki = kernel_info<G>;
    using type = ConvertKernel<typename graph_type::template node<ki.group.root>::dtype,
                               typename graph_type::template node<ki.load_node[0]>::dtype>;
  };
  template <int G>
  struct lower_kernel<G, KernelKind::Dropout> {
    using type = DropoutKernel<typename graph_type::template node<kernel_info<G>.group.root>::dtype>;
  };
  template <int G>
  struct lower_kernel<G, KernelKind::IndexRows> {
    static constexpr auto& ki = kernel_info<G>;
    using type = IndexRowsKernel<typename graph_type::template node<ki.group.root>::dtype,
                                 typename graph_type::template node<ki.index_node>::dtype, graph_type::info.nodes[ki.group.root].scatter>;
  };
  template <int G>
  struct lower_kernel<G, KernelKind::Attention> {
    static constexpr auto& ki = kernel_info<G>;
    static constexpr auto& n = graph_type::info.nodes[ki.group.root];
    // T is q's type (the statistics the Stats part writes are its compute type); I kv_len's.
    using type = AttentionKernel<typename graph_type::template node<n.children[0]>::dtype, n.attention_part, n.causal, ki.nloads,
                                 index_type_t<G>>;
  };
  template <int G>
  struct lower_kernel<G, KernelKind::ReduceTo> {
    static constexpr auto& ki = kernel_info<G>;
    using T = typename graph_type::template node<ki.group.root>::dtype;
    using type = ReduceToKernel<T, typename lower_tree<G, ki.space_node[0], 0>::type, ki.nloads, ki.nconsts>;
  };
  template <int G, KernelKind K>
    requires(K == KernelKind::AxisReduce || K == KernelKind::TotalReduce)
  struct lower_kernel<G, K> {
    static constexpr auto& ki = kernel_info<G>;
    using T = typename graph_type::template node<ki.group.root>::dtype;
    using type = ReduceKernel<T, graph_type::info.nodes[ki.group.root].reduce_kind,
                              typename lower_tree<G, ki.space_node[0], 0>::type, K == KernelKind::TotalReduce,
                              ki.nloads, ki.nconsts>;
  };

  template <int G>
  using kernel = typename lower_kernel<G>::type;
};

}  // namespace kiln::lower
