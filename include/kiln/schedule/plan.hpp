// kiln: the fusion planner, a constexpr function from GraphInfo to a Plan. It follows
// Inductor's rules (DESIGN.md, Kernel kinds and fusion rules):
// - Pointwise: a producer is inlined into its consumers when they all sit in one kernel.
// - Row reduction: a reduction along the last axis that keeps the axis joins the kernel of
//   its consumers as a "stage"; its prologue and the epilogue that broadcasts it back over the
//   row are the same kernel.
// - GEMM + epilogue: a matmul whose consumers all sit in one pointwise kernel becomes that
//   kernel's GEMM; the pointwise ops run as its epilogue.
// - Everything else is materialised: outputs, matmul operands, sources of views, values used
//   by several kernels. Views (transpose, reshape) never run a kernel.
// Nodes are visited from the last to the first, so every consumer is placed before its
// producers are considered; kernels run in the order of their roots, which is topological.
#pragma once
#include "kiln/graph/graph.hpp"

namespace kiln::schedule {

enum class KernelKind : std::uint8_t { Row, Gemm, AxisReduce, TotalReduce, ReduceTo };

inline constexpr int kMaxStages = 8;

struct Group {
  KernelKind kind{};
  int root = -1;      // the materialised node this kernel writes
  int gemm = -1;      // Gemm: the matmul node
  bool copy = false;  // Row: the root is a symbol or view copied into its own buffer
  int nstages = 0;    // Row: reductions along the last axis, in topological order
  int stages[kMaxStages] = {};
};

template <int N>
struct Plan {
  int group_of[N > 0 ? N : 1] = {};       // -1: a symbol, a constant or a view
  bool materialized[N > 0 ? N : 1] = {};  // has a buffer of its own
  int ngroups = 0;
  Group groups[N > 0 ? N : 1] = {};       // in execution order
};

constexpr bool is_view(NodeKind k) {
  return k == NodeKind::Transpose || k == NodeKind::Reshape || k == NodeKind::Unsqueeze || k == NodeKind::ReshapeLike;
}
constexpr bool needs_contiguous_source(NodeKind k) { return k == NodeKind::Reshape || k == NodeKind::ReshapeLike; }
constexpr bool is_leaf(NodeKind k) { return k == NodeKind::Symbol || k == NodeKind::Constant; }

template <int N, int NOut>
constexpr Plan<N> make_plan(const graph::GraphInfo<N, NOut>& g, bool fuse) {
  Plan<N> p{};
  Group tmp[N > 0 ? N : 1] = {};
  int ntmp = 0;
  for (int i = 0; i < N; ++i) p.group_of[i] = -1;

  auto new_group = [&](int i, KernelKind kind) {
    Group& grp = tmp[ntmp];
    grp.kind = kind;
    grp.root = i;
    p.group_of[i] = ntmp++;
    p.materialized[i] = true;
    return ntmp - 1;
  };

  // Live nodes: outputs and what live nodes read the value of. A node read only for its shape
  // (kiln::sum_to's target, say) never runs.
  bool live[N > 0 ? N : 1] = {};
  for (int i = N - 1; i >= 0; --i) {
    live[i] = g.is_output[i];
    for (int u = i + 1; u < N && !live[i]; ++u) live[i] = live[u] && g.reads_value(u, i);
  }

  for (int i = N - 1; i >= 0; --i) {
    const graph::NodeInfo& n = g.nodes[i];
    if (!live[i]) continue;
    bool reshaped = false;  // a transpose read by a reshape must be made contiguous first
    for (int u = i + 1; u < N; ++u)
      if (live[u] && g.reads_value(u, i) && needs_contiguous_source(g.nodes[u].kind)) reshaped = true;

    if (is_leaf(n.kind) || is_view(n.kind)) {
      // A reshape needs a contiguous source: a strided view under one is copied first.
      if (g.is_output[i] || ((n.kind == NodeKind::Transpose || n.kind == NodeKind::Unsqueeze) && reshaped)) {
        tmp[new_group(i, KernelKind::Row)].copy = true;
      }
      continue;
    }

    // Can node i join the one kernel all its consumers sit in?
    int target = -1;
    bool joinable = fuse && !g.is_output[i];
    bool any_user = false;
    for (int u = i + 1; u < N && joinable; ++u) {
      if (!live[u] || !g.reads_value(u, i)) continue;  // shape-only uses do not bind a node to a kernel
      any_user = true;
      const NodeKind uk = g.nodes[u].kind;
      if (uk == NodeKind::Matmul || is_view(uk)) joinable = false;  // read from memory
      else if (target == -1) target = p.group_of[u];
      else if (target != p.group_of[u]) joinable = false;
    }
    joinable = joinable && any_user && target >= 0;
    // A scalar computed from scalars by several ops (AdamW's bias correction lr / (1 - beta^t),
    // say) is computed once by a kernel of its own, not once per element of a larger kernel.
    // A single scalar op (b * 0.5) stays inline: a kernel costs more than it saves.
    if (joinable && n.rank == 0 && n.kind == NodeKind::Pointwise && g.nodes[tmp[target].root].rank > 0) {
      int ops = 0, stack[N > 0 ? N : 1] = {}, top = 0;
      stack[top++] = i;
      while (top > 0 && ops < 3) {
        const int c = stack[--top];
        if (g.nodes[c].rank != 0 || g.nodes[c].kind != NodeKind::Pointwise) continue;
        ++ops;
        for (int k = 0; k < g.nodes[c].nchildren; ++k)
          if (g.nodes[c].reads_value_of(k) && top < N) stack[top++] = g.nodes[c].children[k];
      }
      if (ops >= 3) joinable = false;
    }
    if (n.column_index) joinable = false;  // j must be its own last-axis index: a kernel of its own

    if (joinable) {
      Group& t = tmp[target];
      if (n.kind == NodeKind::Pointwise) {
        p.group_of[i] = target;
        continue;
      }
      const bool row_stage = n.kind == NodeKind::Reduce && !n.all && n.keep &&
                             n.axis == g.nodes[n.children[0]].rank - 1;
      // A full kernel (kMaxStages stages) leaves the reduction a kernel of its own.
      if (row_stage && t.kind == KernelKind::Row && !t.copy && t.nstages < kMaxStages) {
        t.stages[t.nstages++] = i;
        p.group_of[i] = target;
        continue;
      }
      if (n.kind == NodeKind::Matmul && t.kind == KernelKind::Row && !t.copy && t.nstages == 0 &&
          g.nodes[t.root].rank == n.rank) {
        t.kind = KernelKind::Gemm;
        t.gemm = i;
        p.group_of[i] = target;
        continue;
      }
    }

    // Node i roots a kernel of its own.
    if (n.kind == NodeKind::Pointwise) {
      new_group(i, KernelKind::Row);
    } else if (n.kind == NodeKind::Matmul) {
      tmp[new_group(i, KernelKind::Gemm)].gemm = i;
    } else if (n.kind == NodeKind::ReduceTo) {
      new_group(i, KernelKind::ReduceTo);
    } else if (n.all) {
      new_group(i, KernelKind::TotalReduce);
    } else if (n.axis == g.nodes[n.children[0]].rank - 1) {
      Group& grp = tmp[new_group(i, KernelKind::Row)];
      grp.stages[grp.nstages++] = i;
    } else {
      new_group(i, KernelKind::AxisReduce);
    }
  }

  // Stages were found from the last node backwards: put them in topological order. Kernels
  // run in the order of their roots.
  for (int k = 0; k < ntmp; ++k) {
    Group& grp = tmp[k];
    for (int a = 0, b = grp.nstages - 1; a < b; ++a, --b) {
      const int s = grp.stages[a];
      grp.stages[a] = grp.stages[b];
      grp.stages[b] = s;
    }
  }
  int remap[N > 0 ? N : 1] = {};
  for (int k = 0; k < ntmp; ++k) {
    const int pos = ntmp - 1 - k;  // groups were created with descending roots
    p.groups[pos] = tmp[k];
    remap[k] = pos;
  }
  p.ngroups = ntmp;
  for (int i = 0; i < N; ++i)
    if (p.group_of[i] >= 0) p.group_of[i] = remap[p.group_of[i]];
  return p;
}

}  // namespace kiln::schedule
