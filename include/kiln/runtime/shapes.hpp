// kiln: call-time shape inference and the strides each kernel reads with. Every check runs
// before the first kernel, so a ShapeError leaves no output half-written.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/graph/graph.hpp"
#include "kiln/runtime/params.hpp"

namespace kiln::runtime {

// A value as a reader sees it: which buffer, with which strides (in elements).
struct Face {
  int buffer = -1;
  index_t strides[kMaxRank] = {};
};

// Row-major strides. Every shape reaching here keeps kiln's bound on sizes (shape.hpp: input
// tensors are checked when constructed, inferred shapes by infer_shape), so the running
// product, at most the product of the extents with zeros counted as 1, fits in index_t.
inline void contiguous_strides(const Shape& s, index_t* st) {
  index_t acc = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= static_cast<index_t>(s[d]);
  }
}

inline Shape broadcast(const char* op, const Shape& a, const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<std::size_t> out(static_cast<std::size_t>(r));
  for (int d = 0; d < r; ++d) {
    const int da = d - (r - a.rank()), db = d - (r - b.rank());
    const std::size_t x = da >= 0 ? a[da] : 1, y = db >= 0 ? b[db] : 1;
    if (x != y && x != 1 && y != 1)
      throw ShapeError(std::string(op) + ": shapes cannot be broadcast: " + a.str() + " and " + b.str());
    out[d] = x == 1 ? y : x;
  }
  return Shape(out);
}

// Whether `from` broadcasts to exactly `to`.
inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  for (int d = 0; d < from.rank(); ++d) {
    const std::size_t f = from[d], t = to[d + to.rank() - from.rank()];
    if (f != t && f != 1) return false;
  }
  return true;
}

inline Shape matmul_shape(const Shape& a, const Shape& b) {
  const int ra = a.rank(), rb = b.rank();
  if (a[ra - 1] != b[rb - 2])
    throw ShapeError("matmul: inner dimensions differ: " + a.str() + " x " + b.str());
  const std::size_t ba = ra == 3 ? a[0] : 1, bb = rb == 3 ? b[0] : 1;
  if (ba != bb && ba != 1 && bb != 1)
    throw ShapeError("matmul: batch dimensions differ: " + a.str() + " x " + b.str());
  if (ra == 2 && rb == 2) return Shape{a[0], b[1]};
  return Shape{std::max(ba, bb), a[ra - 2], b[rb - 1]};
}

inline Shape reduce_shape(const graph::NodeInfo& n, const Shape& in) {
  if (n.all) return Shape{};
  std::vector<std::size_t> out;
  for (int d = 0; d < in.rank(); ++d) {
    if (d != n.axis) out.push_back(in[d]);
    else if (n.keep) out.push_back(1);
  }
  return Shape(out);
}

// Axes [first, last] of `in` replaced by the extents p.dims (one may be -1: whatever makes the
// element counts agree); the axes before and after are kept.
inline Shape reshape_shape(const NodeParams& p, const Shape& in, int first, int last) {
  std::string target = "[";
  for (int d = 0; d < p.ndims; ++d) target += (d ? ", " : "") + std::to_string(p.dims[d]);
  target += "]";
  const std::string what =
      first == 0 && last == in.rank() - 1
          ? in.str() + " into " + target
          : "axes " + std::to_string(first) + " to " + std::to_string(last) + " of " + in.str() + " into " + target;
  std::size_t whole = 1;  // the elements of one index of the axes before `first`: the replaced axes' product
  for (int d = first; d <= last; ++d) whole *= in[d];
  std::vector<std::size_t> sizes(static_cast<std::size_t>(p.ndims));
  int infer = -1;
  std::size_t known = 1;
  for (int d = 0; d < p.ndims; ++d) {
    if (p.dims[d] == -1 && infer < 0) {
      infer = d;
    } else if (p.dims[d] < 0) {
      throw ShapeError("reshape: extents must be >= 0 with at most one -1, got " + target);
    } else {
      sizes[d] = static_cast<std::size_t>(p.dims[d]);
      if (__builtin_mul_overflow(known, sizes[d], &known) || known > kMaxElements)
        throw ShapeError("reshape: the target " + target + " has more elements than an index can address");
    }
  }
  if (infer >= 0) {
    if (known == 0 || whole % known != 0) throw ShapeError("reshape: cannot reshape " + what);
    sizes[infer] = whole / known;
  } else if (known != whole) {
    throw ShapeError("reshape: cannot reshape " + what);
  }
  std::vector<std::size_t> out(in.begin(), in.begin() + first);
  out.insert(out.end(), sizes.begin(), sizes.end());
  out.insert(out.end(), in.begin() + last + 1, in.end());
  return Shape(out);
}

// An axis copy (expr/ops/axis_copy.hpp) of sources along n.axis: the ranges it copies. Segment
// k copies positions [src_begin, src_begin + len) of operand `load` to [dst_begin, dst_begin +
// len) of the output; every other axis is copied whole. The *At forms' segments move with the
// run-time position p: each number plus p times its shift, p in [0, max_position].
struct AxisSegment {
  index_t src_begin = 0, dst_begin = 0, len = 0;
  int load = 0;
  signed char src_shift = 0, dst_shift = 0, len_shift = 0;
};
struct AxisCopyLayout {
  Shape out;
  int nsegments = 0;
  AxisSegment segments[kMaxAxisCopySegments];
  index_t max_position = 0;
};
inline AxisCopyLayout axis_copy_layout(const graph::NodeInfo& n, const std::vector<Shape>& shapes, const NodeParams& p) {
  const auto child = [&](int k) -> const Shape& { return shapes[n.children[k]]; };
  const int a = n.axis;
  const auto extent = [&](int k) { return static_cast<index_t>(child(k)[a]); };
  // Every axis but `a` must agree between x and y.
  const auto same_but_axis = [&](const char* op, const Shape& x, const Shape& y) {
    bool same = x.rank() == y.rank();
    for (int d = 0; same && d < x.rank(); ++d) same = d == a || x[d] == y[d];
    if (!same)
      throw ShapeError(std::string(op) + " along axis " + std::to_string(a) + ": shapes " + x.str() + " and " + y.str() +
                       " differ on another axis");
  };
  AxisCopyLayout l;
  switch (static_cast<AxisCopyForm>(n.copy_form)) {
    case AxisCopyForm::Concat: {
      same_but_axis("concat", child(0), child(1));
      l.out = child(0);
      l.out[a] = child(0)[a] + child(1)[a];
      l.nsegments = 2;
      l.segments[0] = {0, 0, extent(0)};
      l.segments[1] = {0, extent(0), extent(1), 1};
      return l;
    }
    case AxisCopyForm::ConcatParts: {  // the parts, of one shape, one after the other
      for (int k = 1; k < n.nchildren; ++k)
        if (!(child(k) == child(0)))
          throw ShapeError("concat_parts along axis " + std::to_string(a) + ": parts of shapes " + child(0).str() + " and " +
                           child(k).str() + "; every part must have one shape");
      l.out = child(0);
      l.out[a] = child(0)[a] * static_cast<std::size_t>(n.nchildren);
      l.nsegments = std::min(n.nchildren, kMaxAxisCopySegments);  // concat_parts takes at most that many
      for (int k = 0; k < l.nsegments; ++k) l.segments[k] = {0, k * extent(0), extent(0), k};
      return l;
    }
    case AxisCopyForm::Slice: {
      if (p.begin < 0 || p.begin > p.end || p.end > extent(0))
        throw ShapeError("slice [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + ") along axis " +
                         std::to_string(a) + " of shape " + child(0).str() + ": the range ends past the axis");
      l.out = child(0);
      l.out[a] = static_cast<std::size_t>(p.end - p.begin);
      l.nsegments = 1;
      l.segments[0] = {p.begin, 0, p.end - p.begin};
      return l;
    }
    case AxisCopyForm::Chunk:
    case AxisCopyForm::ChunkInsert: {  // part p.begin of p.end equal parts along the axis
      const bool part = static_cast<AxisCopyForm>(n.copy_form) == AxisCopyForm::Chunk;
      const index_t whole = part ? extent(0) : extent(1), parts = p.end;
      if (!part) same_but_axis("chunk_insert", child(0), child(1));
      if (whole % parts != 0 || (!part && extent(0) * parts != whole))
        throw ShapeError(std::string(part ? "chunk" : "chunk_insert") + " into " + std::to_string(parts) +
                         " parts along axis " + std::to_string(a) + " of shape " + child(part ? 0 : 1).str() +
                         ": the extent is not " + (part ? "a multiple of the number of parts" : "the parts' total"));
      const index_t len = whole / parts, at = p.begin * len;
      l.out = child(part ? 0 : 1);
      if (part) l.out[a] = static_cast<std::size_t>(len);
      l.nsegments = 1;
      l.segments[0] = part ? AxisSegment{at, 0, len} : AxisSegment{0, at, len};
      return l;
    }
    case AxisCopyForm::SwapHalves: {  // both sources are x: its second half, then its first
      const index_t half = extent(0) / 2;
      if (extent(0) % 2 != 0)
        throw ShapeError("swap_halves along axis " + std::to_string(a) + " of shape " + child(0).str() +
                         ": the extent must be even");
      l.out = child(0);
      l.nsegments = 2;
      l.segments[0] = {half, 0, half};
      l.segments[1] = {0, half, half, 1};
      return l;
    }
    case AxisCopyForm::Extract:
    case AxisCopyForm::Insert: {
      const bool extract = static_cast<AxisCopyForm>(n.copy_form) == AxisCopyForm::Extract;
      const char* op = extract ? "extract" : "insert";
      const int like = n.nchildren - 1;
      index_t off = p.begin;
      for (int k = 1; k < like; ++k) off += extent(k);
      same_but_axis(op, child(0), child(like));
      // extract: like's extent read from x at off; insert: x's extent written into like's at off.
      const index_t len = extract ? extent(like) : extent(0);
      const index_t room = extract ? extent(0) : extent(like);
      if (off < 0 || off + len > room)
        throw ShapeError(std::string(op) + " along axis " + std::to_string(a) + ": " + std::to_string(len) +
                         " positions at offset " + std::to_string(off) + " do not fit in " +
                         (extract ? child(0) : child(like)).str());
      l.out = child(like);
      l.nsegments = 1;
      l.segments[0] = extract ? AxisSegment{off, 0, len} : AxisSegment{0, off, len};
      return l;
    }
    case AxisCopyForm::WriteAt:
    case AxisCopyForm::ExtractAt:
    case AxisCopyForm::InsertAt:
    case AxisCopyForm::ZeroAt: {
      // Operands (x, window or like, position): a window of n positions at p in an axis of L.
      const auto form = static_cast<AxisCopyForm>(n.copy_form);
      const bool x_is_window = form == AxisCopyForm::InsertAt;
      same_but_axis(n.name, child(0), child(1));
      const index_t win = x_is_window ? extent(0) : extent(1), whole = x_is_window ? extent(1) : extent(0);
      if (win > whole)
        throw ShapeError(std::string(n.name) + " along axis " + std::to_string(a) + ": a window of " + std::to_string(win) +
                         " positions does not fit in " + child(x_is_window ? 1 : 0).str());
      if (child(2).numel() != 1)
        throw ShapeError(std::string(n.name) + ": the position must be one integer, not " + child(2).str());
      l.max_position = whole - win;
      l.out = form == AxisCopyForm::ExtractAt || form == AxisCopyForm::InsertAt ? child(1) : child(0);
      const AxisSegment before{0, 0, 0, 0, 0, 0, 1};                    // x[0, p)
      const AxisSegment after{win, win, whole - win, 0, 1, 1, -1};        // x[p + n, L)
      switch (form) {
        case AxisCopyForm::WriteAt:
          l.nsegments = 3;
          l.segments[0] = before;
          l.segments[1] = {0, 0, win, 1, 0, 1, 0};  // src at p
          l.segments[2] = after;
          break;
        case AxisCopyForm::ZeroAt:
          l.nsegments = 2;
          l.segments[0] = before;
          l.segments[1] = after;
          break;
        case AxisCopyForm::ExtractAt:
          l.nsegments = 1;
          l.segments[0] = {0, 0, win, 0, 1, 0, 0};  // x[p, p + n) to [0, n)
          break;
        default:  // InsertAt
          l.nsegments = 1;
          l.segments[0] = {0, 0, win, 0, 0, 1, 0};  // x to [p, p + n)
          break;
      }
      return l;
    }
  }
  return l;
}
inline Shape axis_copy_shape(const graph::NodeInfo& n, const std::vector<Shape>& shapes, const NodeParams& p) {
  return axis_copy_layout(n, shapes, p).out;
}

// embedding(ids, table): ids' shape then the table's row length; scatter_add_rows(ids, src,
// like): like's shape, src being ids' shape then like's row length.
inline Shape index_rows_shape(const graph::NodeInfo& n, const Shape& ids, const Shape& table_or_src, const Shape& like) {
  std::vector<std::size_t> rows(ids.begin(), ids.end());
  if (!n.scatter) {
    rows.push_back(table_or_src[1]);
    return Shape(rows);
  }
  rows.push_back(like[1]);
  if (!(table_or_src == Shape(rows)))
    throw ShapeError("scatter_add_rows: src " + table_or_src.str() + " must be ids' shape " + ids.str() +
                     " followed by the table's row length " + std::to_string(like[1]) + " (table " + like.str() + ")");
  return like;
}

// Attention's parts (expr/ops/attention.hpp): q [B, H, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv,
// Skv, Dv] and the cotangent g, which broadcasts to the output [B, H, Sq, Dv]; stats [B, H, Sq,
// 2] is the Stats part's own result.
inline Shape attention_shape(const graph::NodeInfo& n, const std::vector<Shape>& shapes) {
  const auto part = static_cast<AttentionPart>(n.attention_part);
  const auto child = [&](int k) -> const Shape& { return shapes[n.children[k]]; };
  const Shape &q = child(0), &k = child(1), &v = child(2);
  const std::string what = "q " + q.str() + ", k " + k.str() + ", v " + v.str();
  auto fail = [&](const std::string& why) { throw ShapeError(std::string(n.name) + ": " + why + " (" + what + ")"); };
  if (q[0] != k[0] || k[0] != v[0]) fail("q, k and v must have one batch size");
  if (k[1] != v[1] || k[2] != v[2]) fail("k and v must have one shape but for their head_dim");
  if (q[3] != k[3]) fail("q and k must have one head_dim");
  if (k[1] == 0 || q[1] == 0 || q[1] % k[1] != 0)
    fail("q's heads must be a positive multiple of k's and v's (grouped-query attention)");
  if (n.index_last) {
    const Shape& len = child(n.nchildren - 1);
    const bool batch_ok = len.rank() == 0 || len[0] == q[0] || len[0] == 1;
    if (len.rank() > 2 || !batch_ok || (len.rank() == 2 && len[1] != 2))
      fail("kv_len " + len.str() + " must be a scalar, one length per batch [" + std::to_string(q[0]) +
           "], or one key window (first, end) per batch [" + std::to_string(q[0]) + ", 2]");
  }
  const Shape out{q[0], q[1], q[2], v[3]};
  if (part != AttentionPart::Out) {
    const Shape& g = child(3);
    if (!broadcasts_to(g, out)) fail("the cotangent " + g.str() + " must broadcast to the output's shape " + out.str());
  }
  switch (part) {
    case AttentionPart::Out:
      return out;
    case AttentionPart::Stats:
      return Shape{q[0], q[1], q[2], 2};
    case AttentionPart::GradQ:
      return q;
    case AttentionPart::GradK:
      return k;
    case AttentionPart::GradV:
      return v;
  }
  return out;
}

// Shape of node i from its operands' shapes, before the size check below.
inline Shape infer_shape_unchecked(const graph::NodeInfo& n, const std::vector<Shape>& shapes, const NodeParams& p) {
  const auto child = [&](int k) -> const Shape& { return shapes[n.children[k]]; };
  switch (n.kind) {
    case NodeKind::Constant:  // a constant, or a count of an operand's elements
      return Shape{};
    case NodeKind::Pointwise: {
      Shape s = child(0);
      for (int k = 1; k < n.nchildren; ++k) s = broadcast(n.name, s, child(k));
      return s;
    }
    case NodeKind::Reduce:
      return reduce_shape(n, child(0));
    case NodeKind::Matmul:
      return matmul_shape(child(0), child(1));
    case NodeKind::Permute: {  // axis d of the result is axis perm[d] of the operand
      Shape s = child(0);
      for (int d = 0; d < n.rank; ++d) s[d] = child(0)[n.perm[d]];
      return s;
    }
    case NodeKind::Reshape:
      return reshape_shape(p, child(0), n.reshape_first, n.reshape_last);
    case NodeKind::Unsqueeze: {
      std::vector<std::size_t> out(child(0).begin(), child(0).end());
      out.insert(out.begin() + n.axis, 1);
      return Shape(out);
    }
    case NodeKind::ReshapeLike:
      if (child(0).numel() != child(1).numel())
        throw ShapeError("reshape: cannot reshape " + child(0).str() + " into " + child(1).str());
      return child(1);
    case NodeKind::ReduceTo:
      if (!broadcasts_to(child(1), child(0)))
        throw ShapeError("sum_to: " + child(1).str() + " does not broadcast to " + child(0).str());
      return child(1);
    case NodeKind::AxisCopy:
      return axis_copy_shape(n, shapes, p);
    case NodeKind::Convert:
      return child(0);
    case NodeKind::Dropout:
      if (!(child(1) == Shape{2}))
        throw ShapeError("dropout: rng must have shape [2], (seed, offset), not " + child(1).str());
      return child(0);
    case NodeKind::IndexRows:
      return index_rows_shape(n, child(0), child(1), n.scatter ? child(2) : child(1));
    case NodeKind::Attention:
      return attention_shape(n, shapes);
    case NodeKind::Symbol:
    case NodeKind::Shared:  // never a node: flattening resolves it to its value's node
      break;
  }
  return Shape{};
}

// Shape of node i from its operands' shapes. A result that breaks kiln's bound on sizes (a
// broadcast or a matmul of addressable operands can give 2^80 elements) is a ShapeError naming
// the op, raised here, before any buffer is sized or any kernel runs.
inline Shape infer_shape(const graph::NodeInfo& n, const std::vector<Shape>& shapes, const NodeParams& p) {
  Shape s = infer_shape_unchecked(n, shapes, p);
  if (s.size_problem()) s.require_addressable((std::string(n.name) + ": the result shape").c_str());
  return s;
}

// Strides of a load of a value (shape `v`, face `f`) evaluated in space `p`, relative to the
// row dims of space `o` (all dims of o but the last) and to the last axis of p:
// p's outer dims align right with o's outer dims, v aligns right with p, size-1 dims broadcast.
inline void load_strides(const Shape& v, const Face& f, const Shape& p, const Shape& o, index_t* outer,
                         index_t& inner) {
  const int rv = v.rank(), rp = p.rank(), ro = o.rank();
  auto value_stride = [&](int pdim) -> index_t {  // stride of v along dim pdim of p
    const int vd = pdim - (rp - rv);
    return (vd < 0 || v[vd] == 1) ? 0 : f.strides[vd];
  };
  for (int d = 0; d + 1 < ro; ++d) {
    const int e = d - (ro - rp);
    outer[d] = (e < 0 || e >= rp - 1 || p[e] == 1) ? 0 : value_stride(e);
  }
  inner = rp == 0 ? 0 : value_stride(rp - 1);
}

// Merges adjacent dims that every load walks as one (stride[d] == stride[d+1] * extent[d+1]).
// dims: row dims then, if with_inner, the inner extent last; strides alike per load.
inline void collapse_dims(int& ndims, index_t* dims, index_t (*strides)[kMaxRank + 1], int nloads) {
  for (int d = ndims - 2; d >= 0; --d) {
    bool ok = true;
    for (int s = 0; s < nloads && ok; ++s) ok = strides[s][d] == strides[s][d + 1] * dims[d + 1];
    if (!ok) continue;
    dims[d] *= dims[d + 1];
    for (int s = 0; s < nloads; ++s) strides[s][d] = strides[s][d + 1];
    for (int e = d + 1; e + 1 < ndims; ++e) {
      dims[e] = dims[e + 1];
      for (int s = 0; s < nloads; ++s) strides[s][e] = strides[s][e + 1];
    }
    --ndims;
  }
}

}  // namespace kiln::runtime
