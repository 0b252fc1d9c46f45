// kiln: the fusion planner, a constexpr function from GraphInfo to a Plan. It follows
// Inductor's rules (DESIGN.md, Kernel kinds and fusion rules):
// - Pointwise: a producer is inlined into its consumers when they all sit in one kernel.
// - Row reduction: a reduction along the last axis that keeps the axis joins the kernel of
//   its consumers as a "stage"; its prologue and the epilogue that broadcasts it back over the
//   row are the same kernel.
// - GEMM + epilogue: a matmul whose consumers all sit in one pointwise kernel becomes that
//   kernel's GEMM; the pointwise ops run as its epilogue.
// - Recomputation (the rematerialisation of AOTAutograd's partitioner): a pointwise value read
//   by several kernels (at most kMaxRecompute), none of which needs it in memory, whose operands
//   are stored anyway (leaves, or values that other kernels read from memory), is not stored:
//   each of those kernels evaluates it from its operands. A training step then keeps z for the
//   backward kernels, not both z and sigmoid(z).
// - Multiple outputs (Inductor's fusion of kernels that share an iteration space): a pointwise
//   kernel A whose value is read first by a pointwise kernel B of the same rank and element
//   type (every other reader runs after B) is merged into B: B evaluates A's value anyway (it
//   is inlined there) and stores it as an extra output, so A's inputs are read once and A is
//   not launched. AdamW's m, v and weight updates become one kernel. Shapes are run-time, so
//   the merge holds per shape signature (the runtime checks that A's shape is B's); where it
//   does not, A runs as its own kernel and B recomputes A's value from A's inputs.
// - Bias gradients (cuBLASLt's BGRADA): a sum_to kernel that sums the stored right operand B
//   of a GEMM kernel over its rows (a linear layer's gb beside gw = x^T dz) may be written by
//   that GEMM (fold_bias_gradients; the runtime decides per shape signature, on CUDA only).
// - Axis copies (concat, slice), index-rows ops (embedding, scatter_add_rows) and attention's
//   parts are kernels of their own that read their operands from memory through their strides.
// - Everything else is materialised: outputs, matmul operands, sources of views, values used
//   by several kernels. Views (transpose, reshape) never run a kernel.
// Nodes are visited from the last to the first, so every consumer is placed before its
// producers are considered; kernels run in the order of their roots, which is topological.
#pragma once
#include "kiln/graph/graph.hpp"

namespace kiln::schedule {

enum class KernelKind : std::uint8_t { Row, Gemm, AxisReduce, TotalReduce, ReduceTo, AxisCopy, IndexRows, Attention, Convert, Dropout };

inline constexpr int kMaxStages = 8;
inline constexpr int kMaxRecompute = 4;  // kernels that may each recompute one value
inline constexpr int kMaxExtra = 4;      // kernels merged into one (its extra outputs)

struct Group {
  KernelKind kind{};
  int root = -1;      // the materialised node this kernel writes
  int gemm = -1;      // Gemm: the matmul node
  bool copy = false;  // Row: the root is a symbol or view copied into its own buffer
  int nstages = 0;    // Row: reductions along the last axis, in topological order
  int stages[kMaxStages] = {};
  int nextra = 0;               // Row: kernels merged into this one, whose roots it also writes
  int extra[kMaxExtra] = {};    // their indices, in execution order
  int merged_into = -1;         // Row: the later kernel that evaluates and writes this root
  // Bias gradients (fold_bias_gradients): a GEMM kernel C = A B and a sum_to kernel that sums
  // the stored B over its rows. On CUDA, where the shapes allow, cuBLASLt's BGRADA epilogue
  // writes that sum during the product and the sum_to kernel does not run.
  int bias_grad = -1;    // Gemm: the sum_to kernel it may compute
  int folded_into = -1;  // ReduceTo: the GEMM kernel that may compute it
};

template <int N>
struct Plan {
  int group_of[N > 0 ? N : 1] = {};       // -1: a symbol, a constant or a view
  bool materialized[N > 0 ? N : 1] = {};  // has a buffer of its own
  int ngroups = 0;
  Group groups[N > 0 ? N : 1] = {};       // in execution order
  // Recomputed values: never stored; each kernel in recompute_in evaluates them.
  bool recompute[N > 0 ? N : 1] = {};
  int nrecompute_in[N > 0 ? N : 1] = {};
  int recompute_in[N > 0 ? N : 1][kMaxRecompute] = {};
  constexpr bool recomputed_in(int node, int group) const {
    for (int k = 0; k < nrecompute_in[node]; ++k)
      if (recompute_in[node][k] == group) return true;
    return false;
  }
  // Whether kernel `group` evaluates node (a pointwise op of its own, or of a kernel merged
  // into it, or a value it recomputes).
  constexpr bool evaluated_in(int node, int group) const {
    const int own = group_of[node];
    if (own == group || (own >= 0 && groups[own].merged_into == group)) return true;
    if (!recompute[node]) return false;
    for (int k = 0; k < nrecompute_in[node]; ++k)
      if (recompute_in[node][k] == group || groups[recompute_in[node][k]].merged_into == group) return true;
    return false;
  }
};

constexpr bool is_view(NodeKind k) {
  return k == NodeKind::Permute || k == NodeKind::Reshape || k == NodeKind::Unsqueeze || k == NodeKind::ReshapeLike;
}
constexpr bool needs_contiguous_source(NodeKind k) { return k == NodeKind::Reshape || k == NodeKind::ReshapeLike; }
constexpr bool is_leaf(NodeKind k) { return k == NodeKind::Symbol || k == NodeKind::Constant; }

// Whether permute node i, read through its strides, has a unit stride in one of its last two
// axes, which a GEMM operand needs (a matrix is read by rows or by columns). Its source chain is
// permutes over a contiguous value (anything stored: a symbol, an output, a kernel's result, a
// reshape); map[d] follows axis d of node i down the chain. An unsqueeze in the chain answers
// no (the value is then copied).
template <int N, int NOut>
constexpr bool unit_stride_in_last_two(const graph::GraphInfo<N, NOut>& g, int i) {
  const int r = g.nodes[i].rank;
  int map[kMaxRank] = {};
  for (int d = 0; d < r; ++d) map[d] = d;
  int c = i;
  // An output is stored contiguously even when it is a view (it is copied out).
  for (; g.nodes[c].kind == NodeKind::Permute && (c == i || !g.is_output[c]); c = g.nodes[c].children[0])
    for (int d = 0; d < r; ++d) map[d] = g.nodes[c].perm[map[d]];
  if (g.nodes[c].kind == NodeKind::Unsqueeze) return false;
  return r < 2 || map[r - 1] == r - 1 || map[r - 2] == r - 1;
}

// A pointwise kernel of its own (no stages, not a copy) over a non-scalar value.
template <int N, int NOut>
constexpr bool plain_pointwise(const graph::GraphInfo<N, NOut>& g, const Plan<N>& p, int grp) {
  const Group& G = p.groups[grp];
  if (G.kind != KernelKind::Row || G.copy || G.nstages != 0 || g.nodes[G.root].rank == 0) return false;
  for (int i = 0; i < N; ++i)
    if (p.group_of[i] == grp && g.nodes[i].column_index) return false;  // its rows are never collapsed
  return true;
}

// The first kernel that evaluates a live reader of node's value (p.ngroups: none reads it), or
// -1 where a reader reads it through a view (at other elements) or is a leaf or in no kernel:
// the kernels that may write node's value in another kernel's place must run before it.
template <int N, int NOut>
constexpr int first_reader_kernel(const graph::GraphInfo<N, NOut>& g, const Plan<N>& p, const bool* live, int node) {
  int first = p.ngroups;
  for (int u = node + 1; u < N; ++u) {
    if (!live[u] || !g.reads_value(u, node)) continue;
    if (is_view(g.nodes[u].kind) || is_leaf(g.nodes[u].kind)) return -1;
    const int n_in = p.recompute[u] ? p.nrecompute_in[u] : 1;
    for (int k = 0; k < n_in; ++k) {
      const int grp = p.recompute[u] ? p.recompute_in[u][k] : p.group_of[u];
      if (grp < 0) return -1;
      if (grp < first) first = grp;
    }
  }
  return first;
}

// Multiple outputs (see the top of this file): merges kernel a into the first kernel that
// evaluates a reader of a's root, where that kernel is a plain pointwise one of the same rank
// and element type and every reader of a's root is evaluated there or later. Readers through
// views (which read a's buffer at other elements) keep a's kernel.
template <int N, int NOut>
constexpr void merge_outputs(const graph::GraphInfo<N, NOut>& g, Plan<N>& p, const bool* live) {
  for (int a = 0; a < p.ngroups; ++a) {
    Group& A = p.groups[a];
    if (!plain_pointwise(g, p, a) || A.nextra > 0) continue;
    const int first = first_reader_kernel(g, p, live, A.root);
    if (first < 0 || first >= p.ngroups || first <= a) continue;
    Group& B = p.groups[first];
    if (!plain_pointwise(g, p, first) || B.merged_into >= 0 || B.nextra == kMaxExtra) continue;
    if (g.nodes[B.root].rank != g.nodes[A.root].rank || g.nodes[B.root].dtype != g.nodes[A.root].dtype) continue;
    A.merged_into = first;
    B.extra[B.nextra++] = a;
  }
}

// Bias gradients (the backward of a bias add, cuBLASLt's BGRADA): a sum_to kernel R that only
// sums a stored rank-2 value c (its tree is a load of c), and a GEMM kernel G whose matmul has c
// as its right operand B (directly, or through a sum_to of c that is the identity where the
// shapes agree: the gradient of a matmul's output before it reaches the matmul), of the same
// element type. G may then write R's root, the column sums of B, during the product: that is
// the bias gradient beside the weight gradient x^T dz. Every reader of R's root must run after
// G and read it from memory as a value (no view). Whether the fold happens is the runtime's
// call per shape signature (R sums B's rows into one row, B is stored row-major, the device is
// a CUDA one and cuBLASLt offers the epilogue); otherwise R runs as its own kernel. A GEMM gets
// one such R: sums to rank 1 first (from [k, n], only a column sum fits), then to rank 2 (a
// [1, n] bias, or a [k, 1] one, which the runtime then leaves to R).
template <int N, int NOut>
constexpr void fold_bias_gradients(const graph::GraphInfo<N, NOut>& g, Plan<N>& p, const bool* live) {
  for (int pass = 1; pass <= 2; ++pass) {
    for (int r = 0; r < p.ngroups; ++r) {
      Group& R = p.groups[r];
      if (R.kind != KernelKind::ReduceTo || R.folded_into >= 0) continue;
      const graph::NodeInfo& sum = g.nodes[R.root];
      const int c = sum.children[0];
      const graph::NodeInfo& cn = g.nodes[c];
      if (cn.rank != 2 || sum.rank != pass || sum.dtype != cn.dtype) continue;
      if (cn.kind == NodeKind::Constant || is_view(cn.kind) || p.recompute[c] || p.group_of[c] == r) continue;
      // The first kernel reading R's root (p.ngroups: an output only); a view of it keeps R.
      const int first = first_reader_kernel(g, p, live, R.root);
      if (first < 0) continue;
      for (int k = 0; k < p.ngroups; ++k) {
        Group& G = p.groups[k];
        if (G.kind != KernelKind::Gemm || G.bias_grad >= 0 || k >= first) continue;
        const graph::NodeInfo& mm = g.nodes[G.gemm];
        const int b = mm.children[1];
        const bool through_identity = g.nodes[b].kind == NodeKind::ReduceTo && g.nodes[b].children[0] == c;
        if (mm.rank != 2 || mm.dtype != cn.dtype || (b != c && !through_identity)) continue;
        G.bias_grad = r;
        R.folded_into = k;
        break;
      }
    }
  }
}

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

  // The kernels that evaluate the live readers of node c other than `except` (kMaxRecompute + 1
  // at most: more means "too many"), whether any reads it from memory (a matmul or a view).
  // Every reader must have been placed (readers come after c; the walk goes backwards).
  bool must_store[N > 0 ? N : 1] = {};  // a recomputed value relies on it being stored
  auto users_of = [&](int c, int except, int* in, int& nin, bool& any, bool& memory) {
    for (int u = c + 1; u < N; ++u) {
      if (u == except || !live[u] || !g.reads_value(u, c)) continue;  // shape-only uses bind nothing
      any = true;
      const NodeKind uk = g.nodes[u].kind;
      if (uk == NodeKind::Matmul || uk == NodeKind::AxisCopy || uk == NodeKind::IndexRows || uk == NodeKind::Attention ||
          uk == NodeKind::Convert || uk == NodeKind::Dropout ||
          is_view(uk))
        memory = true;
      const int n_in = p.recompute[u] ? p.nrecompute_in[u] : 1;
      for (int k = 0; k < n_in; ++k) {
        const int grp = p.recompute[u] ? p.recompute_in[u][k] : p.group_of[u];
        bool seen = false;
        for (int e = 0; e < nin; ++e) seen = seen || in[e] == grp;
        if (!seen && nin <= kMaxRecompute) in[nin++] = grp;
      }
    }
  };
  // Whether operand c of node i will be stored whatever i does: a symbol, or a value that is
  // an output, is read from memory, or is read by two kernels besides i. All its other readers
  // must already be placed (they come after i).
  auto stored_anyway = [&](int c, int i) {
    const NodeKind k = g.nodes[c].kind;
    if (k == NodeKind::Symbol) return true;
    if (k == NodeKind::Constant || is_view(k) || g.nodes[c].column_index) return false;
    for (int u = c + 1; u < i; ++u)
      if (live[u] && g.reads_value(u, c)) return false;  // a reader not placed yet
    int in[kMaxRecompute + 1] = {};
    int nin = 0;
    bool any = false, memory = false;
    users_of(c, i, in, nin, any, memory);
    return g.is_output[c] || memory || nin >= 2;
  };

  for (int i = N - 1; i >= 0; --i) {
    const graph::NodeInfo& n = g.nodes[i];
    if (!live[i]) continue;
    bool reshaped = false;  // a transpose read by a reshape must be made contiguous first
    bool gemm_operand = false;
    for (int u = i + 1; u < N; ++u)
      if (live[u] && g.reads_value(u, i)) {
        reshaped = reshaped || needs_contiguous_source(g.nodes[u].kind);
        gemm_operand = gemm_operand || g.nodes[u].kind == NodeKind::Matmul;
      }

    if (is_leaf(n.kind) || is_view(n.kind)) {
      // A reshape needs a contiguous source: a strided view under one is copied first. So does
      // a GEMM operand without a unit stride in its last two axes.
      if (g.is_output[i] || ((n.kind == NodeKind::Permute || n.kind == NodeKind::Unsqueeze) && reshaped) ||
          (n.kind == NodeKind::Permute && gemm_operand && !unit_stride_in_last_two(g, i))) {
        tmp[new_group(i, KernelKind::Row)].copy = true;
      }
      continue;
    }

    // Can node i join the one kernel all its consumers sit in? The kernels evaluating its
    // consumers: their own, or, for a recomputed consumer, each kernel that recomputes it.
    int users_in[kMaxRecompute + 1] = {};
    int nusers_in = 0;
    bool any_user = false, in_memory = false;
    users_of(i, -1, users_in, nusers_in, any_user, in_memory);
    const int target = nusers_in == 1 ? users_in[0] : -1;
    bool joinable = fuse && !g.is_output[i] && any_user && !in_memory && target >= 0;
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

    // Recompute rather than store: a pointwise value read by a few kernels, none from memory,
    // whose operands are stored anyway (so recomputing it adds no stored value).
    if (!joinable && fuse && !g.is_output[i] && !in_memory && !must_store[i] && n.kind == NodeKind::Pointwise &&
        n.rank > 0 && !n.column_index && nusers_in >= 2 && nusers_in <= kMaxRecompute) {
      bool ok = true;
      for (int e = 0; e < nusers_in; ++e) ok = ok && !tmp[users_in[e]].copy;
      for (int k = 0; k < n.nchildren && ok; ++k)
        if (n.reads_value_of(k)) ok = stored_anyway(n.children[k], i);
      if (ok) {
        p.recompute[i] = true;
        p.nrecompute_in[i] = nusers_in;
        for (int e = 0; e < nusers_in; ++e) p.recompute_in[i][e] = users_in[e];
        for (int k = 0; k < n.nchildren; ++k)
          if (n.reads_value_of(k)) must_store[n.children[k]] = true;
        continue;
      }
    }

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
    } else if (n.kind == NodeKind::AxisCopy) {
      new_group(i, KernelKind::AxisCopy);
    } else if (n.kind == NodeKind::IndexRows) {
      new_group(i, KernelKind::IndexRows);
    } else if (n.kind == NodeKind::Attention) {
      new_group(i, KernelKind::Attention);
    } else if (n.kind == NodeKind::Convert) {
      new_group(i, KernelKind::Convert);
    } else if (n.kind == NodeKind::Dropout) {
      new_group(i, KernelKind::Dropout);
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
  for (int i = 0; i < N; ++i) {
    if (p.group_of[i] >= 0) p.group_of[i] = remap[p.group_of[i]];
    for (int k = 0; k < p.nrecompute_in[i]; ++k) p.recompute_in[i][k] = remap[p.recompute_in[i][k]];
  }
  if (fuse) {
    merge_outputs(g, p, live);
    fold_bias_gradients(g, p, live);
  }
  return p;
}

}  // namespace kiln::schedule
