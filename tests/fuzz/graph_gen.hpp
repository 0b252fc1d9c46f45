// kiln's differential fuzzer, the generator: a random expression graph per seed, drawn at compile
// time (kiln's graphs are types), with an independent float64 evaluation of the same graph
// (tests/reference.hpp) and a printable form.
//
// Every value of a graph is an [M, N] matrix (N even); M and N are chosen when it runs, so one
// compiled graph is checked on several shapes. G<Seed, Depth> is a leaf (x or y) at depth 0 and
// otherwise an op drawn from kOps by the seed, whose operands are graphs of smaller depth with
// seeds derived from it; it is spelled Node<Op, A[, B]>, the form regression tests use. The ops
// keep the [M, N] shape, and reach every kind of kernel: pointwise and broadcast operands, reductions broadcast back, last-axis normalisations, GEMMs with and
// without an epilogue, transposed and permuted views, axis copies (concat, chunk, slices, windows
// at a run-time position), embedding rows, rotary embedding, fused attention, dropout, casts.
// Operands that could overflow are bounded first (exp(tanh a), log(1 + a^2)), so a graph is
// well conditioned enough to compare against float64 with a tolerance per element type.
//
// The leaves, by their bit in Op::uses (a graph binds the leaves its ops use, and only those):
//   x, y [M, N]; row, row2 [N]; col [M, 1]; wn [N, N]; wm [M, M];
//   ids [M] (i64, in [0, V)) with table [V, N]; pos (i64 scalar, in [0, N)); rng [2] (i64).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "../reference.hpp"
#include "kiln/core/philox.hpp"

namespace fuzz {

enum Leaf : unsigned {
  kX = 1, kY = 2, kRow = 4, kRow2 = 8, kCol = 16, kWn = 32, kWm = 64, kIds = 128, kTable = 256, kPos = 512, kRng = 1024
};
constexpr unsigned kFloatLeaves = kX | kY | kRow | kRow2 | kCol | kWn | kWm | kTable;

template <class T>
struct Leaves {
  static constexpr auto x = kiln::input<"x", 2, T>();
  static constexpr auto y = kiln::input<"y", 2, T>();
  static constexpr auto row = kiln::input<"row", 1, T>();
  static constexpr auto row2 = kiln::input<"row2", 1, T>();
  static constexpr auto col = kiln::input<"col", 2, T>();
  static constexpr auto wn = kiln::input<"wn", 2, T>();
  static constexpr auto wm = kiln::input<"wm", 2, T>();
  static constexpr auto ids = kiln::input<"ids", 1, kiln::i64>();
  static constexpr auto table = kiln::input<"table", 2, T>();
  static constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  static constexpr auto rng = kiln::input<"rng", 1, kiln::i64>();
};

// The leaves' values in float64 (already rounded to the element type under test) and the
// integers, for the reference.
struct Env {
  std::size_t M = 0, N = 0;
  ref::Array x, y, row, row2, col, wn, wm, table;
  std::vector<std::int64_t> ids;
  std::int64_t pos = 0;
  std::uint64_t seed = 0, offset = 0;
  bool smooth = false;
  mutable double magnitude = 0;  // the largest finite |value| the evaluation produced
  const ref::Array& note(const ref::Array& a) const {
    for (double v : a.data)
      if (std::isfinite(v)) magnitude = std::max(magnitude, std::abs(v));
    return a;
  }
};

constexpr std::uint64_t mix(std::uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace r {  // float64 helpers of the reference
inline ref::Array add(const ref::Array& a, const ref::Array& b) { return ref::zip(a, b, [](double p, double q) { return p + q; }); }
inline ref::Array mul(const ref::Array& a, const ref::Array& b) { return ref::zip(a, b, [](double p, double q) { return p * q; }); }
inline ref::Array scale(const ref::Array& a, double s) { return ref::map(a, [s](double p) { return p * s; }); }
// Columns [b, e) of a [M, N] matrix, and a and b side by side.
inline ref::Array cols(const ref::Array& a, std::size_t b, std::size_t e) {
  const std::size_t M = a.shape[0], N = a.shape[1];
  ref::Array o = ref::zeros({M, e - b});
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = b; j < e; ++j) o.data[i * (e - b) + j - b] = a.data[i * N + j];
  return o;
}
inline ref::Array hcat(const ref::Array& a, const ref::Array& b) {
  const std::size_t M = a.shape[0], Na = a.shape[1], Nb = b.shape[1];
  ref::Array o = ref::zeros({M, Na + Nb});
  for (std::size_t i = 0; i < M; ++i) {
    for (std::size_t j = 0; j < Na; ++j) o.data[i * (Na + Nb) + j] = a.data[i * Na + j];
    for (std::size_t j = 0; j < Nb; ++j) o.data[i * (Na + Nb) + Na + j] = b.data[i * Nb + j];
  }
  return o;
}
// softmax(a bᵀ · scale) c over the rows of a (queries) and b, c (keys, values); causal: query i
// sees keys j <= i (M queries, M keys).
inline ref::Array attention(const ref::Array& q, const ref::Array& k, const ref::Array& v, bool causal) {
  const std::size_t M = q.shape[0], N = q.shape[1];
  const double scale = 1.0 / std::sqrt(static_cast<double>(N));
  ref::Array o = ref::zeros({M, N});
  std::vector<double> s(M);
  for (std::size_t i = 0; i < M; ++i) {
    const std::size_t keys = causal ? i + 1 : M;
    double mx = -INFINITY;
    for (std::size_t j = 0; j < keys; ++j) {
      double acc = 0;
      for (std::size_t d = 0; d < N; ++d) acc += q.data[i * N + d] * k.data[j * N + d];
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    double den = 0;
    for (std::size_t j = 0; j < keys; ++j) den += (s[j] = std::exp(s[j] - mx));
    for (std::size_t j = 0; j < keys; ++j)
      for (std::size_t d = 0; d < N; ++d) o.data[i * N + d] += s[j] / den * v.data[j * N + d];
  }
  return o;
}
}  // namespace r

// The ops. Each has an arity (1 or 2 graph operands), the leaves it uses besides its operands,
// build<L>(a, b) (kiln) and eval(env, a, b) (float64). A macro keeps each op on a few lines;
// `a` and `b` are the operands in both forms, `L` the leaves' symbols and `e` the Env.
#define KILN_FUZZ_OP(Name, Arity, Uses, Build, ...)                                                   \
  struct Name {                                                                                    \
    static constexpr int arity = Arity;                                                            \
    static constexpr unsigned uses = Uses;                                                         \
    static constexpr const char* name = #Name;                                                     \
    template <class L, class A, class B>                                                           \
    static constexpr auto build([[maybe_unused]] A a, [[maybe_unused]] B b) {                      \
      return Build;                                                                                \
    }                                                                                              \
    static ref::Array eval([[maybe_unused]] const Env& e, [[maybe_unused]] const ref::Array& a,    \
                           [[maybe_unused]] const ref::Array& b) {                                 \
      return __VA_ARGS__;                                                                          \
    }                                                                                              \
  };
#define KILN_FUZZ_MAP(Name, Build, F) KILN_FUZZ_OP(Name, 1, 0, Build, ref::map(a, [](double v) { return F; }))
#define KILN_FUZZ_ZIP(Name, Build, F) \
  KILN_FUZZ_OP(Name, 2, 0, Build, ref::zip(a, b, [](double v, double w) { return F; }))

namespace op {
// Pointwise, one operand.
KILN_FUZZ_MAP(neg, -a, -v)
KILN_FUZZ_MAP(abs, kiln::abs(a), std::abs(v))
KILN_FUZZ_MAP(exp_tanh, kiln::exp(kiln::tanh(a)), std::exp(std::tanh(v)))
KILN_FUZZ_MAP(log1p_sq, kiln::log(kiln::square(a) + 1.0), std::log(v * v + 1))
KILN_FUZZ_MAP(sqrt1p_sq, kiln::sqrt(1.0 + kiln::square(a)), std::sqrt(1 + v * v))
KILN_FUZZ_MAP(rsqrt1p_sq, kiln::rsqrt(kiln::square(a) + 1.0), 1 / std::sqrt(v * v + 1))
KILN_FUZZ_MAP(sin, kiln::sin(a), std::sin(v))
KILN_FUZZ_MAP(cos, kiln::cos(a), std::cos(v))
KILN_FUZZ_MAP(tanh, kiln::tanh(a), std::tanh(v))
KILN_FUZZ_MAP(sigmoid, kiln::sigmoid(a), ref::sigmoid(v))
KILN_FUZZ_MAP(relu, kiln::relu(a), std::max(v, 0.0))
KILN_FUZZ_MAP(square_tanh, kiln::square(kiln::tanh(a)) * 2.0, std::tanh(v) * std::tanh(v) * 2)
KILN_FUZZ_MAP(silu, kiln::silu(a), ref::silu(v))
KILN_FUZZ_MAP(gelu, kiln::gelu(a), ref::gelu(v))
KILN_FUZZ_MAP(gelu_tanh, kiln::gelu_tanh(a), ref::gelu_tanh(v))
KILN_FUZZ_MAP(normal_cdf, kiln::normal_cdf(a), 0.5 * std::erfc(-v / std::sqrt(2.0)))
KILN_FUZZ_MAP(softcap, kiln::softcap(a, 1.5), 1.5 * std::tanh(v / 1.5))
KILN_FUZZ_MAP(pow3, kiln::pow(kiln::tanh(a), 3.0), std::pow(std::tanh(v), 3.0))
KILN_FUZZ_MAP(affine, a * 0.5 - 0.25, v * 0.5 - 0.25)
// Pointwise, two operands.
KILN_FUZZ_ZIP(add, a + b, v + w)
KILN_FUZZ_ZIP(sub, a - b, v - w)
KILN_FUZZ_ZIP(mul, a * b, v* w)
KILN_FUZZ_ZIP(div, a / (kiln::square(b) + 1.0), v / (w * w + 1))
KILN_FUZZ_ZIP(maximum, kiln::maximum(a, b), std::max(v, w))
KILN_FUZZ_ZIP(minimum, kiln::minimum(a, b), std::min(v, w))
KILN_FUZZ_ZIP(where_gt, kiln::where(a > b, a, b * 0.5), v > w ? v : w * 0.5)
KILN_FUZZ_ZIP(swiglu, kiln::swiglu(a, b), ref::silu(v) * w)
// Broadcast operands: a row [N] and a column [M, 1].
KILN_FUZZ_OP(add_row, 1, kRow, a + L::row, r::add(a, e.row))
KILN_FUZZ_OP(mul_col, 1, kCol, a * L::col, r::mul(a, e.col))
KILN_FUZZ_OP(row_minus, 1, kRow | kCol, L::row - a * L::col, ref::zip3(e.row, a, e.col, [](double p, double q, double s) { return p - q * s; }))
// Reductions, broadcast back.
KILN_FUZZ_OP(center_max, 1, 0, (a - kiln::max<1, true>(a)), ref::zip(a, ref::reduce(a, 1, ref::Red::Max, true), [](double p, double q) { return p - q; }))
KILN_FUZZ_OP(scale_colmean, 2, 0, (a * kiln::mean<0, true>(b)), r::mul(a, ref::reduce(b, 0, ref::Red::Mean, true)))
KILN_FUZZ_OP(add_rowsum, 1, 0, (a + kiln::sum<1, true>(a) * 0.125), r::add(a, r::scale(ref::reduce(a, 1, ref::Red::Sum, true), 0.125)))
KILN_FUZZ_OP(sub_colmin, 1, 0, (a - kiln::min<0, true>(a)), ref::zip(a, ref::reduce(a, 0, ref::Red::Min, true), [](double p, double q) { return p - q; }))
KILN_FUZZ_OP(add_total, 2, 0, a + kiln::mean(b), ref::zip(a, ref::reduce_all(b, ref::Red::Mean), [](double p, double q) { return p + q; }))
// Last-axis normalisations.
KILN_FUZZ_OP(softmax, 1, 0, kiln::softmax(a), ref::softmax(a))
KILN_FUZZ_OP(log_softmax, 1, 0, kiln::log_softmax(a), ref::log_softmax(a))
KILN_FUZZ_OP(layer_norm, 1, kRow | kRow2, kiln::layer_norm(a, L::row, L::row2), ref::layer_norm(a, e.row, e.row2, 1e-5))
KILN_FUZZ_OP(layer_norm_nobias, 1, kRow, kiln::layer_norm(a, L::row), ref::layer_norm(a, e.row, ref::zeros({e.N}), 1e-5))
KILN_FUZZ_OP(rms_norm, 1, kRow, kiln::rms_norm(a, L::row), ref::rms_norm(a, e.row, 1e-6))
// GEMMs (scaled so that magnitudes stay near 1), with and without an epilogue.
KILN_FUZZ_OP(mm_wn, 1, kWn, kiln::matmul(a, L::wn), ref::matmul(a, e.wn))
KILN_FUZZ_OP(mm_wm, 1, kWm, kiln::matmul(L::wm, a), ref::matmul(e.wm, a))
KILN_FUZZ_OP(mm_bias_gelu, 1, kWn | kRow, kiln::gelu(kiln::matmul(a, L::wn) + L::row),
             ref::map(r::add(ref::matmul(a, e.wn), e.row), ref::gelu))
KILN_FUZZ_OP(mm_wn_t, 1, kWn, kiln::matmul(a, kiln::transpose(L::wn)), ref::matmul(a, ref::transpose(e.wn)))
KILN_FUZZ_OP(attention_unfused, 2, 0, kiln::matmul(kiln::softmax(kiln::matmul(a, kiln::transpose(b))), b),
             ref::matmul(ref::softmax(ref::matmul(a, ref::transpose(b))), b))
// Layout: transposed GEMM operands, a rank-3 permute, reshapes, axis copies.
KILN_FUZZ_OP(mm_transposed, 1, kWm, kiln::transpose(kiln::matmul(kiln::transpose(a), kiln::transpose(L::wm))),
             ref::matmul(e.wm, a))
KILN_FUZZ_OP(interleave, 1, 0, (kiln::flatten<1, 2>(kiln::transpose<1, 2>(kiln::unflatten<1>(a, {2, -1})))),
             [&] {
               ref::Array o = a;
               const std::size_t h = e.N / 2;
               for (std::size_t i = 0; i < e.M; ++i)
                 for (std::size_t j = 0; j < e.N; ++j) o.data[i * e.N + (j % h) * 2 + j / h] = a.data[i * e.N + j];
               return o;
             }())
KILN_FUZZ_OP(reshape_round_trip, 2, 0, (kiln::reshape_as(kiln::flatten<0, 1>(a) * kiln::flatten<0, 1>(b), a)), r::mul(a, b))
KILN_FUZZ_OP(swap_halves, 1, 0, kiln::swap_halves<1>(a), r::hcat(r::cols(a, e.N / 2, e.N), r::cols(a, 0, e.N / 2)))
KILN_FUZZ_OP(chunk_concat, 2, 0,
             (kiln::concat<1>(std::get<0>(kiln::chunk<2, 1>(a)) * std::get<1>(kiln::chunk<2, 1>(b)), std::get<0>(kiln::chunk<2, 1>(b)))),
             r::hcat(r::mul(r::cols(a, 0, e.N / 2), r::cols(b, e.N / 2, e.N)), r::cols(b, 0, e.N / 2)))
// Columns 1 and 0 side by side ([M, 2]), weighted 1 and 2 by their column index and summed
// back onto a: a + a[:, 1] + 2 a[:, 0].
KILN_FUZZ_OP(slice_concat, 1, 0,
             (a + kiln::sum<1, true>([](auto c) { return c * (kiln::column_index(c) + 1.0); }(
                      kiln::concat<1>(kiln::slice<1, 1, 2>(a), kiln::slice<1, 0, 1>(a))))),
             [&] {
               const auto s = ref::zip(r::cols(a, 1, 2), r::cols(a, 0, 1), [](double p, double q) { return p + 2 * q; });
               return r::add(a, s);
             }())
KILN_FUZZ_OP(write_col, 2, kPos, (kiln::write_slice<1>(a, L::pos, kiln::slice<1, 0, 1>(b))),
             [&] {
               ref::Array o = a;
               for (std::size_t i = 0; i < e.M; ++i) o.data[i * e.N + e.pos] = b.data[i * e.N];
               return o;
             }())
KILN_FUZZ_OP(zero_col, 1, kPos, (kiln::zero_window<1>(a, L::pos, kiln::slice<1, 0, 1>(a))),
             [&] {
               ref::Array o = a;
               for (std::size_t i = 0; i < e.M; ++i) o.data[i * e.N + e.pos] = 0;
               return o;
             }())
KILN_FUZZ_OP(keep_col, 1, kPos, (kiln::insert<1>(kiln::extract<1>(a, L::pos, kiln::slice<1, 0, 1>(a)), L::pos, a)),
             [&] {
               ref::Array o = ref::zeros({e.M, e.N});
               for (std::size_t i = 0; i < e.M; ++i) o.data[i * e.N + e.pos] = a.data[i * e.N + e.pos];
               return o;
             }())
// Index, rotary, attention, dropout, casts.
KILN_FUZZ_OP(embed, 1, kIds | kTable, a + kiln::embedding(L::ids, L::table),
             [&] {
               ref::Array o = a;
               for (std::size_t i = 0; i < e.M; ++i)
                 for (std::size_t j = 0; j < e.N; ++j) o.data[i * e.N + j] += e.table.data[e.ids[i] * e.N + j];
               return o;
             }())
KILN_FUZZ_OP(rope, 1, kY | kRow, kiln::rope(a, L::y, L::row),
             [&] {
               ref::Array o = a;
               const std::size_t h = e.N / 2;
               for (std::size_t i = 0; i < e.M; ++i)
                 for (std::size_t j = 0; j < e.N; ++j) {
                   const double rot = j < h ? -a.data[i * e.N + j + h] : a.data[i * e.N + j - h];
                   o.data[i * e.N + j] = a.data[i * e.N + j] * e.y.data[i * e.N + j] + rot * e.row.data[j];
                 }
               return o;
             }())
KILN_FUZZ_OP(attention, 2, kY, (kiln::flatten<0, 2>(kiln::attention(kiln::unsqueeze<0>(kiln::unsqueeze<0>(a)), kiln::unsqueeze<0>(kiln::unsqueeze<0>(b)), kiln::unsqueeze<0>(kiln::unsqueeze<0>(L::y))))),
             r::attention(a, b, e.y, false))
KILN_FUZZ_OP(attention_causal, 2, 0, (kiln::flatten<0, 2>(kiln::attention<kiln::causal>(kiln::unsqueeze<0>(kiln::unsqueeze<0>(a)), kiln::unsqueeze<0>(kiln::unsqueeze<0>(b)), kiln::unsqueeze<0>(kiln::unsqueeze<0>(a))))),
             r::attention(a, b, a, true))
KILN_FUZZ_OP(dropout, 1, kRng, kiln::dropout<0.25>(a, L::rng),
             [&] {
               ref::Array o = a;
               for (std::size_t i = 0; i < o.numel(); ++i)
                 o.data[i] = kiln::philox::uniform(e.seed, e.offset, 0, i) >= 0.25 ? a.data[i] / 0.75 : 0.0;
               return o;
             }())
// Through float and back: the reference rounds to float, except where it is differentiated
// (Env::smooth), since the derivative of a rounding is taken as 1.
KILN_FUZZ_OP(cast_f32, 1, 0, kiln::cast<typename decltype(a)::dtype>(kiln::cast<float>(a)),
             e.smooth ? a : ref::map(a, [](double v) { return static_cast<double>(static_cast<float>(v)); }))
}  // namespace op

#undef KILN_FUZZ_ZIP
#undef KILN_FUZZ_MAP
#undef KILN_FUZZ_OP

template <class... Ops>
struct OpList {
  static constexpr int size = sizeof...(Ops);
};
using kOps = OpList<op::neg, op::abs, op::exp_tanh, op::log1p_sq, op::sqrt1p_sq, op::rsqrt1p_sq, op::sin, op::cos,
                    op::tanh, op::sigmoid, op::relu, op::square_tanh, op::silu, op::gelu, op::gelu_tanh, op::normal_cdf,
                    op::softcap, op::pow3, op::affine, op::add, op::sub, op::mul, op::div, op::maximum, op::minimum,
                    op::where_gt, op::swiglu, op::add_row, op::mul_col, op::row_minus, op::center_max,
                    op::scale_colmean, op::add_rowsum, op::sub_colmin, op::add_total, op::softmax, op::log_softmax,
                    op::layer_norm, op::layer_norm_nobias, op::rms_norm, op::mm_wn, op::mm_wm, op::mm_bias_gelu,
                    op::mm_wn_t, op::attention_unfused, op::mm_transposed, op::interleave, op::reshape_round_trip,
                    op::swap_halves, op::chunk_concat, op::slice_concat, op::write_col, op::zero_col, op::keep_col,
                    op::embed, op::rope, op::attention, op::attention_causal, op::dropout, op::cast_f32>;

template <int I, class... Ops>
struct nth;
template <class O, class... Ops>
struct nth<0, O, Ops...> {
  using type = O;
};
template <int I, class O, class... Ops>
struct nth<I, O, Ops...> : nth<I - 1, Ops...> {};
template <int I, class List>
struct op_at;
template <int I, class... Ops>
struct op_at<I, OpList<Ops...>> : nth<I, Ops...> {};

// A graph spelled by its structure: the leaves X and Y, and Node<Op, A> or Node<Op, A, B>. Each
// offers uses() (its leaves' bits), build<L>() (the kiln expression over leaf symbols L),
// eval(env) (float64), str() (readable) and spelling() (the C++ type, for a regression test: a
// graph named by its structure keeps its meaning when kOps changes, a seed does not).
struct X {
  static constexpr unsigned uses() { return kX; }
  template <class L>
  static constexpr auto build() { return L::x; }
  static ref::Array eval(const Env& e) { return e.note(e.x); }
  static std::string str() { return "x"; }
  static std::string spelling() { return "X"; }
};
struct Y {
  static constexpr unsigned uses() { return kY; }
  template <class L>
  static constexpr auto build() { return L::y; }
  static ref::Array eval(const Env& e) { return e.note(e.y); }
  static std::string str() { return "y"; }
  static std::string spelling() { return "Y"; }
};
template <class Op, class A, class B = void>
struct Node {
  static_assert((Op::arity == 1) == std::is_void_v<B>, "Node: give an op as many operands as its arity");
  using op = Op;
  using a = A;
  using b = B;
  static constexpr unsigned uses() {
    if constexpr (Op::arity == 1) return Op::uses | A::uses();
    else return Op::uses | A::uses() | B::uses();
  }
  template <class L>
  static constexpr auto build() {
    if constexpr (Op::arity == 1) return Op::template build<L>(A::template build<L>(), 0);
    else return Op::template build<L>(A::template build<L>(), B::template build<L>());
  }
  static ref::Array eval(const Env& e) {
    const ref::Array x = A::eval(e);
    if constexpr (Op::arity == 1) return e.note(Op::eval(e, x, x));
    else return e.note(Op::eval(e, x, B::eval(e)));
  }
  static std::string str() {
    if constexpr (Op::arity == 1) return std::string(Op::name) + "(" + A::str() + ")";
    else return std::string(Op::name) + "(" + A::str() + ", " + B::str() + ")";
  }
  static std::string spelling() {
    if constexpr (Op::arity == 1) return std::string("Node<op::") + Op::name + ", " + A::spelling() + ">";
    else return std::string("Node<op::") + Op::name + ", " + A::spelling() + ", " + B::spelling() + ">";
  }
};

// The graph drawn from a seed: a leaf at depth 0, else the op kOps[mix(Seed) % size] over
// operand a of depth Depth - 1 and (for two operands) b of a depth drawn in [0, Depth - 1], so
// trees vary; the operands' seeds are derived from Seed.
template <std::uint64_t Seed, int Depth>
struct Draw {
  using Op = typename op_at<static_cast<int>(mix(Seed) % kOps::size), kOps>::type;
  using A = typename Draw<mix(Seed ^ 0xa5a5), Depth - 1>::type;
  using type = std::conditional_t<Op::arity == 1, Node<Op, A>,
                                  Node<Op, A, typename Draw<mix(Seed ^ 0x5a5a), static_cast<int>(mix(Seed ^ 0x77) % Depth)>::type>>;
};
template <std::uint64_t Seed>
struct Draw<Seed, 0> {
  using type = std::conditional_t<mix(Seed) % 2 == 0, X, Y>;
};
template <std::uint64_t Seed, int Depth>
using G = typename Draw<Seed, Depth>::type;

// The subtrees of a graph, each before the graphs that contain it, leaves left out (they are
// not programs): the candidates a failing graph is minimised over.
template <class... Ts>
struct TypeList {};
template <class... Ls>
struct concat_lists;
template <class... A>
struct concat_lists<TypeList<A...>> {
  using type = TypeList<A...>;
};
template <class... A, class... B, class... Rest>
struct concat_lists<TypeList<A...>, TypeList<B...>, Rest...> : concat_lists<TypeList<A..., B...>, Rest...> {};
template <class Graph>
struct subtrees {
  using type = TypeList<>;  // a leaf
};
template <class Op, class A, class B>
struct subtrees<Node<Op, A, B>> {
  using type = typename concat_lists<typename subtrees<A>::type, typename subtrees<B>::type, TypeList<Node<Op, A, B>>>::type;
};
template <class Op, class A>
struct subtrees<Node<Op, A, void>> {
  using type = typename concat_lists<typename subtrees<A>::type, TypeList<Node<Op, A>>>::type;
};

}  // namespace fuzz
