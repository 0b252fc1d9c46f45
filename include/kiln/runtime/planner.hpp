// kiln: build_plan, which plans one shape signature (runtime/plan.hpp says what a plan holds).
//
//   1. shapes: the inputs', then every node's by its shape rule (runtime/shapes.hpp);
//   2. buffers: each kernel's root goes to an output, or to an arena buffer; views read their
//      source's buffer with their own strides (faces);
//   3. each kernel's arguments: extents, strides (broadcasts are stride 0; dims every load walks
//      alike are collapsed), constants, traffic and operation counts;
//   4. kernels not run for these shapes: identities, merges, and what the backend's refine step
//      folds (runtime/plan_rewrites.hpp);
//   5. kiln::assign targets written in place where that is safe (runtime/plan_rewrites.hpp);
//   6. lifetimes of the arena buffers, and their offsets (runtime/memory.hpp).
#pragma once
#include <algorithm>
#include <vector>

#include "kiln/runtime/kind_args.hpp"
#include "kiln/runtime/plan.hpp"
#include "kiln/runtime/plan_rewrites.hpp"

namespace kiln::runtime {

template <class F>
struct Planner : PlanRewrites<F> {
  using Rewrites = PlanRewrites<F>;
  using Rewrites::assign_in_place, Rewrites::merge_kernels, Rewrites::skip_identities, Rewrites::write_reshaped_outputs;
  using Plan = ShapePlan<F>;
  using program = typename F::program;
  static constexpr int N = F::N, NOut = F::NOut, nkernels = F::nkernels, kSymbols = F::kSymbols;
  static constexpr const auto& graph() { return F::graph(); }
  static constexpr const auto& plan() { return F::plan(); }

  // scalars_first: the executor runs the scalar kernels (ProgramFacts::kScalarKernels) before
  // the others, so their results must live from kernel 0. refine(plan, group_buffers): the
  // executor's step after the kernels' arguments are filled and before lifetimes are planned
  // (it may mark kernels Folded).
  template <class Refine>
  static void build(Plan& st, const std::array<Shape, kSymbols + 1>& inputs, const std::vector<NodeParams>& params,
                    bool scalars_first, Refine&& refine) {
    st.key.assign(inputs.begin(), inputs.begin() + kSymbols);
    st.shapes.resize(N);
    for (int i = 0, s = 0; i < N; ++i) {
      const auto& n = graph().nodes[i];
      st.shapes[i] = n.kind == NodeKind::Symbol ? inputs[s++] : infer_shape(n, st.shapes, params[i]);
    }

    // Buffers: the inputs, the outputs, then arena buffers.
    std::vector<ArenaRequest> arena;
    int nbuffers = F::kFirstArenaBuffer;
    auto arena_buffer = [&](int node) {
      arena.push_back({st.node_bytes(node)});
      return nbuffers++;
    };
    GroupBuffers<F> group_out{};
    std::vector<bool> keep_to_end;  // arena buffers an assign reads after the last kernel
    for (int g = 0; g < nkernels; ++g) {
      const int root = plan().groups[g].root;
      int out = -1;
      bool assigned = false;
      for (int k = NOut - 1; k >= 0; --k)
        if (graph().outputs[k] == root) {
          if (F::kAssignTarget[k] >= 0) assigned = true;
          else out = kSymbols + k;
        }
      group_out[g] = out >= 0 ? out : arena_buffer(root);
      if (out < 0 && assigned) {
        keep_to_end.resize(arena.size(), false);
        keep_to_end[group_out[g] - F::kFirstArenaBuffer] = true;
      }
    }
    for (int k = 0; k < NOut; ++k) st.output_source[k] = group_out[plan().group_of[graph().outputs[k]]];

    assign_faces(st, group_out);
    // The matmul of a GEMM kernel accumulates in the output when the epilogue keeps its shape.
    std::array<bool, F::kArray> in_place{};
    for (int g = 0; g < nkernels; ++g) {
      const auto& grp = plan().groups[g];
      if (grp.kind != schedule::KernelKind::Gemm) continue;
      in_place[g] = grp.root == grp.gemm || st.shapes[grp.root] == st.shapes[grp.gemm];
      Face& f = st.faces[grp.gemm];
      f.buffer = in_place[g] ? group_out[g] : arena_buffer(grp.gemm);
      contiguous_strides(st.shapes[grp.gemm], f.strides);
    }

    skip_identities(st, group_out, arena);
    write_reshaped_outputs(st, group_out, arena);
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      fill_kernel<G>(st, params, group_out[G], in_place[G]);
    });
    merge_kernels(st, group_out);
    refine(st, std::as_const(group_out));
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
      const auto& pr = st.template slot<G>();
      if (!st.runs(G)) return;  // merged (the kernel it runs in touches its output) or an identity
      // (a named array: nvcc 13.0's front end rejects a braced list in a range-for inside a generic lambda)
      const std::array<int, 5> operands{pr.out_buffer, pr.a_buffer, pr.b_buffer, pr.acc_buffer, pr.index_buffer};
      for (int b : operands) touch(G, b);
      for (int b : pr.extra_buffer) touch(G, b);
      for (int b : pr.load_buffer) touch(G, b);
    });
    if (scalars_first)
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if constexpr (F::kScalarKernels.is[G]) touch(0, st.template slot<G>().out_buffer);
      });
    for (std::size_t a = 0; a < arena.size(); ++a) {
      const int b = F::kFirstArenaBuffer + static_cast<int>(a);
      arena[a].first = first[b];
      arena[a].last = std::max(last[b], first[b]);
      if (a < keep_to_end.size() && keep_to_end[a]) arena[a].last = nkernels;
    }
    st.arena_bytes = plan_memory(arena);
    st.buffers.assign(nbuffers, 0);
    for (std::size_t a = 0; a < arena.size(); ++a) st.buffers[F::kFirstArenaBuffer + a] = arena[a].offset;
  }

 private:
  // Where each value is read from: symbols from their input, views from their source with
  // their own strides, stored values from their kernel's buffer.
  static void assign_faces(Plan& st, const GroupBuffers<F>& group_out) {
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
      if (n.kind == NodeKind::Permute) {
        const Face& src = st.faces[n.children[0]];
        vf.buffer = src.buffer;
        for (int d = 0; d < n.rank; ++d) vf.strides[d] = src.strides[n.perm[d]];
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
  }

  // A Constant leaf's value, or what kiln::count derives from its operand's shape.
  static double constant_value(const Plan& st, const std::vector<NodeParams>& params, int node) {
    const auto& n = graph().nodes[node];
    if (n.nchildren == 0) return params[node].scalar;
    const Shape& s = st.shapes[n.children[0]];
    return static_cast<double>(n.all ? s.numel() : s[n.axis]);
  }

  // The shape of iteration space `space` of kernel G.
  template <int G>
  static Shape space_shape(const Plan& st, int space) {
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

  // Kernel G's arguments (pointers excepted) and explain()'s counts for it.
  template <int G>
  static void fill_kernel(Plan& st, const std::vector<NodeParams>& params, int out_buffer, bool in_place) {
    using Desc = typename Plan::template desc<G>;
    using T = typename Desc::value_type;
    constexpr auto& ki = program::template kernel_info<G>;
    constexpr auto kind = ki.group.kind;
    auto& pr = st.template slot<G>();
    auto& ra = pr.row_args();
    pr.out_buffer = out_buffer;

    const Shape o = space_shape<G>(st, 0);
    const int ro = o.rank();
    ra.nrow_dims = std::max(ro - 1, 0);
    for (int d = 0; d + 1 < ro; ++d) ra.row_dims[d] = static_cast<index_t>(o[d]);
    ra.len = ro ? static_cast<index_t>(o[ro - 1]) : 1;
    if constexpr (kind != schedule::KernelKind::AxisCopy && kind != schedule::KernelKind::IndexRows &&
                  kind != schedule::KernelKind::Attention)
      for (int s = 0; s < Desc::nloads; ++s) {
        const int n = ki.load_node[s];
        const bool copied = ki.group.copy && n == ki.group.root;
        const Face& f = copied ? st.view_faces[n] : st.faces[n];
        pr.load_buffer[s] = f.buffer;
        load_strides(st.shapes[n], f, space_shape<G>(st, ki.load_space[s]), o, ra.outer[s], ra.inner[s]);
      }
    for (int c = 0; c < Desc::nconsts; ++c)
      ra.consts[c] = static_cast<compute_t<T>>(constant_value(st, params, ki.const_node[c]));
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
    } else if constexpr (kind == schedule::KernelKind::AxisCopy) {
      fill_axis_copy<Desc>(st, graph().nodes[ki.group.root], params[ki.group.root], ki, pr);
    } else if constexpr (kind == schedule::KernelKind::IndexRows) {
      // The ids are contiguous over the row space, so merging its dims keeps ids[r] the id of
      // row r. A gather reads its table row by the id (no stride over the rows); a scatter
      // reads src as a row kernel reads a load.
      const Face& f = st.faces[ki.load_node[0]];
      auto& a = pr.args;
      pr.index_buffer = st.faces[ki.index_node].buffer;
      pr.load_buffer[0] = f.buffer;
      if constexpr (Desc::scatter) {
        a.table_rows = static_cast<index_t>(st.shapes[ki.group.root][0]);
        load_strides(st.shapes[ki.load_node[0]], f, o, o, ra.outer[0], ra.inner[0]);
      } else {
        a.table_rows = static_cast<index_t>(st.shapes[ki.load_node[0]][0]);
        a.table_row_stride = f.strides[0];
        a.inner[0] = f.strides[1];
      }
      collapse(ra, false);
    } else if constexpr (kind == schedule::KernelKind::Attention) {
      st.ops[G] = fill_attention<Desc>(st, graph().nodes[ki.group.root], ki, pr);
    } else if constexpr (kind == schedule::KernelKind::Convert) {
      collapse(ra, true);  // an elementwise map: every dim its load walks alike is merged
    } else if constexpr (kind == schedule::KernelKind::Dropout) {
      collapse(ra, true);  // the output's row-major order, whatever dims are merged
      const auto& node = graph().nodes[ki.group.root];
      pr.index_buffer = st.faces[ki.index_node].buffer;
      pr.args.p = static_cast<float>(node.probability);
      pr.args.scale = static_cast<compute_t<T>>(1.0 / (1.0 - node.probability));
      pr.args.stream = node.stream;
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
      ra.row_cache = ra.len <= lower::kRowCache;
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
    } else if constexpr (kind == schedule::KernelKind::AxisCopy) {
      st.ops[G] = 0;  // a copy: the segments' elements are read, the whole output written
      reads = 0;
      // (at position 0 for the forms whose segments move: their total length does not change)
      for (int k = 0; k < pr.args.nsegments; ++k)
        reads += static_cast<double>(pr.args.seg_len[k]) * elements /
                 static_cast<double>(std::max<std::size_t>(st.shapes[ki.group.root][pr.args.axis], 1)) * elem;
    } else if constexpr (kind == schedule::KernelKind::Attention) {
      // counted above
    } else if constexpr (kind == schedule::KernelKind::Convert) {
      st.write_bytes[G] = st.out_bytes[G] = elements * sizeof(typename Desc::out_type);
      st.ops[G] = elements;
    } else if constexpr (kind == schedule::KernelKind::Dropout) {
      st.ops[G] = elements;  // a multiply per element (and a Philox block per four)
    } else if constexpr (kind == schedule::KernelKind::IndexRows) {
      // The rows the ids name (a gather reads no other row of the table), and the ids.
      reads = elements * elem + static_cast<double>(ra.rows) * sizeof(typename Desc::index_type);
      st.ops[G] = Desc::scatter ? elements : 0;
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
  }

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
};

// Plans one shape signature of the program F describes (see Planner::build).
template <class F, class Refine>
void build_plan(ShapePlan<F>& plan, const std::array<Shape, F::kSymbols + 1>& inputs, const std::vector<NodeParams>& params,
                bool scalars_first, Refine&& refine) {
  Planner<F>::build(plan, inputs, params, scalars_first, refine);
}

}  // namespace kiln::runtime
