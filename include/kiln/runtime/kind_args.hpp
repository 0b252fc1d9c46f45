// kiln: the planner's arguments for the axis-copy and attention kinds (Planner::fill_kernel's
// branches for them, and the in-place form of write_slice): extents, strides and segments from
// the plan's shapes and faces (a face is a value's buffer and strides).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/runtime/plan.hpp"

namespace kiln::runtime {

// Each source through its own strides (it has the output's shape but along the axis); the
// segments from the node's layout. Dims are not collapsed: the axis stays addressable.
template <class Desc, class Plan, class Slot, class KernelInfo>
void fill_axis_copy(const Plan& st, const graph::NodeInfo& node, const NodeParams& params, const KernelInfo& ki, Slot& pr) {
  const AxisCopyLayout layout = axis_copy_layout(node, st.shapes, params);
  const int ro = st.shapes[ki.group.root].rank();
  auto& a = pr.args;
  a.axis = ro > 0 ? node.axis : 0;
  a.op = node.name;
  for (int s = 0; s < Desc::nloads; ++s) {
    const Face& f = st.faces[ki.load_node[s]];
    pr.load_buffer[s] = f.buffer;
    for (int d = 0; d + 1 < ro; ++d) a.outer[s][d] = f.strides[d];
    a.inner[s] = f.strides[ro - 1];
  }
  a.nsegments = layout.nsegments;
  for (int k = 0; k < layout.nsegments; ++k) {
    const AxisSegment& g = layout.segments[k];
    a.seg_load[k] = g.load;
    a.src_begin[k] = g.src_begin;
    a.dst_begin[k] = g.dst_begin;
    a.seg_len[k] = g.len;
    a.src_shift[k] = g.src_shift;
    a.dst_shift[k] = g.dst_shift;
    a.len_shift[k] = g.len_shift;
  }
  if constexpr (!std::is_void_v<typename Desc::position_type>) {
    pr.index_buffer = st.faces[ki.index_node].buffer;
    a.max_position = layout.max_position;
  }
}

// write_slice(x, p, src) assigned to x, in place: the output is x's tensor (face `x`), and the
// kernel walks src's elements only, writing each at its place in the window (AxisCopyArgs,
// window_only). explain()'s traffic becomes src's, read once and written once.
template <class Desc, class Plan, class Slot, class KernelInfo>
void make_window_only(Plan& st, int g, const KernelInfo& ki, const Face& x, Slot& pr) {
  auto& a = pr.args;
  const Shape& src = st.shapes[ki.load_node[1]];
  const int r = src.rank();
  a.window_only = true;
  a.nrow_dims = std::max(r - 1, 0);
  a.rows = 1;
  for (int d = 0; d + 1 < r; ++d) {
    a.row_dims[d] = static_cast<index_t>(src[d]);
    a.rows *= a.row_dims[d];
    a.out_outer[d] = x.strides[d];
  }
  a.len = r ? static_cast<index_t>(src[r - 1]) : 1;
  a.out_inner = r ? x.strides[r - 1] : 1;
  a.out_axis_stride = x.strides[a.axis < a.nrow_dims ? a.axis : r - 1];
  st.read_bytes[g] = st.write_bytes[g] = static_cast<double>(src.numel()) * sizeof(typename Desc::value_type);
}

// Each operand through its own strides over (batch, head, position) and along its last axis, 0
// where it broadcasts (the cotangent of a loss's sum); dims are not collapsed. Returns explain()'s
// operation count.
template <class Desc, class Plan, class Slot, class KernelInfo>
double fill_attention(const Plan& st, const graph::NodeInfo& node, const KernelInfo& ki, Slot& pr) {
  using T = typename Desc::value_type;
  const Shape &q = st.shapes[node.children[0]], &k = st.shapes[node.children[1]], &v = st.shapes[node.children[2]];
  auto& a = pr.args;
  for (int s = 0; s < Desc::nloads; ++s) {
    const Shape& sh = st.shapes[ki.load_node[s]];
    const Face& f = st.faces[ki.load_node[s]];
    pr.load_buffer[s] = f.buffer;
    for (int d = 0; d < 3; ++d) a.outer[s][d] = sh[d] == 1 ? 0 : f.strides[d];
    a.inner[s] = sh[3] == 1 ? 0 : f.strides[3];
  }
  a.batch = static_cast<index_t>(q[0]);
  a.heads = static_cast<index_t>(q[1]);
  a.kv_heads = static_cast<index_t>(k[1]);
  a.q_len = static_cast<index_t>(q[2]);
  a.kv_len = static_cast<index_t>(k[2]);
  a.head_dim = static_cast<index_t>(q[3]);
  a.v_dim = static_cast<index_t>(v[3]);
  a.scale = static_cast<compute_t<T>>(node.scale > 0 ? node.scale : 1.0 / std::sqrt(static_cast<double>(std::max<index_t>(a.head_dim, 1))));
  if constexpr (!std::is_void_v<typename Desc::length_type>) {  // kv_len: [], [B], or [B, 2] windows
    const Shape& ls = st.shapes[ki.index_node];
    const Face& lf = st.faces[ki.index_node];
    pr.index_buffer = lf.buffer;
    a.ids_stride = ls.rank() >= 1 && ls[0] != 1 ? lf.strides[0] : 0;
    a.windows = ls.rank() == 2;
    a.end_offset = a.windows ? lf.strides[1] : 0;
  }
  // 2 per multiply-add of each product over the (query, key) pairs the mask keeps (q k^T and
  // p v forward; the backward's recomputed q k^T, g v^T and its own).
  double pairs = 0;
  for (index_t i = 0; i < a.q_len; ++i) pairs += static_cast<double>(a.keys_seen_full(i, Desc::causal));
  const double d = static_cast<double>(a.head_dim), dv = static_cast<double>(a.v_dim);
  constexpr bool three_products = Desc::part_kind == AttentionPart::GradQ || Desc::part_kind == AttentionPart::GradK;
  const double per_pair = three_products ? 2 * d + dv : d + dv;
  return 2 * per_pair * pairs * static_cast<double>(a.batch * a.heads);
}

}  // namespace kiln::runtime
