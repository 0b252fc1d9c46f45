// kiln tests: the 16-bit element types (kiln::bf16, kiln::f16) through every kernel kind, on a
// given device, against float64 references computed from the same 16-bit inputs. Included by
// dtypes.cpp (CPU) and cuda/cuda_dtypes.cpp (GPU), so both devices run the same cases.
//
// What the tolerances allow: each stored value is rounded once to the type (half an ulp:
// 2^-9 relative for bf16, 2^-12 for f16), maths and sums run in float. Where a plan stores an
// intermediate (a GEMM's result before its epilogue, the FFN's hidden layer) that rounding
// propagates once more, so those cases get about twice the tolerance.
#pragma once
#include "reference.hpp"

namespace dtype_cases {

template <class S>
kiln::Tensor<S> randn_on(const kiln::Shape& shape, std::uint64_t seed, kiln::Device dev, double scale = 1.0) {
  auto t = kiln::randn<double>(shape, seed);
  for (std::size_t i = 0; i < t.numel(); ++i) t[i] *= scale;
  return t.template as<S>().to(dev);
}

// v rounded to S, as a kernel stores it.
template <class S>
double round_to(double v) {
  return static_cast<double>(static_cast<float>(S(static_cast<float>(v))));
}

inline ref::Array add(const ref::Array& a, const ref::Array& b) {
  return ref::zip(a, b, [](double p, double q) { return p + q; });
}

// Checks got (any device) against want with the type's tolerances times `slack`.
template <class S>
void check(const kiln::Tensor<S>& got, const ref::Array& want, double slack = 1.0, double atol = -1) {
  ref::check_close(got.cpu(), want, ref::Tol<S>::rtol * slack, atol >= 0 ? atol : ref::Tol<S>::atol * slack);
}

template <class S>
void pointwise(kiln::Device dev) {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto y = kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x);
  // 96 columns: 16-byte vectors on the GPU; 100: the scalar path.
  for (std::size_t cols : {96, 100}) {
    const auto xt = randn_on<S>({37, cols}, 11 + cols, dev);
    const auto want =
        ref::map(ref::from(xt.cpu()), [](double v) { return ref::gelu(v * 1.5 + 0.5) * ref::sigmoid(v) + std::tanh(v); });
    check(kiln::compile(y)(x = xt), want);
    check(kiln::eager(y)(x = xt), want, 2.0);  // eager stores every intermediate in S
  }
  // silu, swiglu and softcap, in one kernel: its maths in float, one rounding to S.
  constexpr auto z = kiln::swiglu(x, x * 0.5f) + kiln::softcap(x * 8.0f, 5.0) - kiln::silu(x);
  const auto xt = randn_on<S>({37, 96}, 12, dev);
  check(kiln::compile(z)(x = xt), ref::map(ref::from(xt.cpu()), [](double v) {
          return ref::silu(v) * 0.5 * v + 5 * std::tanh(8 * v / 5) - ref::silu(v);
        }));
}

template <class S>
void row_ops(kiln::Device dev) {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto r = kiln::input<"r", 2, S>();
  constexpr auto g = kiln::param<"g", 1, S>();
  constexpr auto b = kiln::param<"b", 1, S>();
  const auto xt = randn_on<S>({48, 768}, 21, dev), rt = randn_on<S>({48, 768}, 22, dev);
  const auto gt = randn_on<S>({768}, 23, dev), bt = randn_on<S>({768}, 24, dev);
  const auto ln = ref::layer_norm(add(ref::from(xt.cpu()), ref::from(rt.cpu())), ref::from(gt.cpu()), ref::from(bt.cpu()), 1e-5);
  check(kiln::compile(kiln::layer_norm(x + r, g, b, 1e-5))(x = xt, r = rt, g = gt, b = bt), ln);
  const auto rms = ref::rms_norm(add(ref::from(xt.cpu()), ref::from(rt.cpu())), ref::from(gt.cpu()), 1e-6);
  check(kiln::compile(kiln::rms_norm(x + r, g, 1e-6))(x = xt, r = rt, g = gt), rms);
  // softmax over short rows (a warp per row on the GPU) and long ones (a block per row)
  for (std::size_t cols : {1024, 5000}) {
    const auto st = randn_on<S>({9, cols}, 25 + cols, dev, 4.0);
    const auto want = ref::softmax(ref::map(ref::from(st.cpu()), [](double v) { return v * 0.125; }));
    check(kiln::compile(kiln::softmax(x * 0.125f))(x = st), want, 1.0, 1e-7);
  }
}

template <class S>
void reductions(kiln::Device dev) {
  constexpr auto x = kiln::input<"x", 3, S>();
  const auto xt = randn_on<S>({6, 50, 70}, 31, dev);
  const auto xr = ref::from(xt.cpu());
  // sums of many terms in float: the result rounds once; the sum of |x| bounds its error
  check(kiln::compile(kiln::sum(x * x))(x = xt), ref::reduce_all(ref::map(xr, [](double v) { return v * v; }), ref::Red::Sum));
  check(kiln::compile(kiln::mean<1>(x))(x = xt), ref::reduce(xr, 1, ref::Red::Mean, false), 1.0, 1e-2);
  check(kiln::compile(kiln::max<-1>(x * 2.0f))(x = xt),
        ref::reduce(ref::map(xr, [](double v) { return 2 * v; }), 2, ref::Red::Max, false));
}

// A transformer FFN, y = gelu(x w1 + b1) w2 + b2 with 256 features and 512 hidden, and its
// weights on dev (drawn from seed, seed + 1, ...); run(f, xt) binds them.
template <class S>
struct Ffn {
  static constexpr auto x = kiln::input<"x", 2, S>();
  static constexpr auto w1 = kiln::param<"w1", 2, S>();
  static constexpr auto b1 = kiln::param<"b1", 1, S>();
  static constexpr auto w2 = kiln::param<"w2", 2, S>();
  static constexpr auto b2 = kiln::param<"b2", 1, S>();
  static constexpr auto y = kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2;
  kiln::Tensor<S> w1t, b1t, w2t, b2t;
  Ffn(kiln::Device dev, std::uint64_t seed)
      : w1t(randn_on<S>({256, 512}, seed, dev, 1.0 / 16)), b1t(randn_on<S>({512}, seed + 2, dev)),
        w2t(randn_on<S>({512, 256}, seed + 1, dev, 1.0 / 22.6)), b2t(randn_on<S>({256}, seed + 3, dev)) {}
  template <class F>
  kiln::Tensor<S> run(F& f, const kiln::Tensor<S>& xt) const {
    return f(x = xt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t);
  }
};

template <class S>
void matmul_ffn(kiln::Device dev) {
  const Ffn<S> ffn(dev, 41);
  auto f = kiln::compile(Ffn<S>::y);
  for (std::size_t batch : {1, 16, 64}) {
    const auto xt = randn_on<S>({batch, 256}, 45 + batch, dev);
    // the reference rounds the hidden layer to S where the plan stores it: the GEMM's result,
    // then gelu's output
    const auto z = ref::map(ref::matmul(ref::from(xt.cpu()), ref::from(ffn.w1t.cpu())), round_to<S>);
    const auto h = ref::map(add(z, ref::from(ffn.b1t.cpu())), [](double v) { return round_to<S>(ref::gelu(v)); });
    const auto want = add(ref::matmul(h, ref::from(ffn.w2t.cpu())), ref::from(ffn.b2t.cpu()));
    check(ffn.run(f, xt), want, 3.0, ref::Tol<S>::rtol);
  }
}

// Products of 1 to 5 rows against a weight, row-major [K, N] and as a transposed view of an
// [N, K] one (a decode step's projections; on the CPU, 16-bit products of up to 4 rows read the
// weight in place instead of widening it first).
template <class S>
void matmul_few_rows(kiln::Device dev) {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto w = kiln::param<"w", 2, S>();
  constexpr auto wn = kiln::param<"wn", 2, S>();
  auto f = kiln::compile(kiln::outputs(kiln::matmul(x, w), kiln::matmul(x, kiln::transpose(wn))));
  const auto wt = randn_on<S>({96, 200}, 61, dev, 0.1), wnt = randn_on<S>({200, 96}, 62, dev, 0.1);
  for (std::size_t m : {1, 3, 4, 5}) {
    INFO(m << " rows");
    const auto xt = randn_on<S>({m, 96}, 63 + m, dev);
    auto [y1, y2] = f(x = xt, w = wt, wn = wnt);
    const auto xr = ref::from(xt.cpu());
    check(y1, ref::matmul(xr, ref::from(wt.cpu())), 3.0, ref::Tol<S>::rtol);
    check(y2, ref::matmul(xr, ref::transpose(ref::from(wnt.cpu()))), 3.0, ref::Tol<S>::rtol);
  }
}

// The gradient of a broadcast bias (a reduce-to kernel) and of a matmul's operands.
template <class S>
void gradients(kiln::Device dev) {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto w = kiln::param<"w", 2, S>();
  constexpr auto b = kiln::param<"b", 1, S>();
  constexpr auto loss = kiln::sum(kiln::tanh(kiln::matmul(x, w) + b));
  auto [gw, gb] = kiln::grad(loss, w, b);
  auto f = kiln::compile(kiln::outputs(gw, gb));
  const auto xt = randn_on<S>({40, 24}, 51, dev), wt = randn_on<S>({24, 32}, 52, dev, 0.2), bt = randn_on<S>({32}, 53, dev);
  auto [dw, db] = f(x = xt, w = wt, b = bt);
  // d/dz tanh(z) = 1 - tanh^2; db = sum over rows, dw = x^T (1 - tanh^2)
  const auto xr = ref::from(xt.cpu());
  // the plan stores the GEMM's result in S before the epilogue adds b and takes tanh
  const auto z = add(ref::map(ref::matmul(xr, ref::from(wt.cpu())), round_to<S>), ref::from(bt.cpu()));
  const auto dz = ref::map(z, [](double v) { return 1 - std::tanh(v) * std::tanh(v); });
  ref::Array want_db = ref::zeros({32}), want_dw = ref::zeros({24, 32});
  for (std::size_t i = 0; i < 40; ++i)
    for (std::size_t j = 0; j < 32; ++j) {
      want_db.data[j] += dz.data[i * 32 + j];
      for (std::size_t k = 0; k < 24; ++k) want_dw.data[k * 32 + j] += xr.data[i * 24 + k] * dz.data[i * 32 + j];
    }
  check(db, want_db, 3.0, 4 * ref::Tol<S>::rtol);
  check(dw, want_dw, 3.0, 4 * ref::Tol<S>::rtol);
}

template <class S>
void all(kiln::Device dev) {
  SUBCASE("pointwise") { pointwise<S>(dev); }
  SUBCASE("layer_norm, rms_norm and softmax") { row_ops<S>(dev); }
  SUBCASE("reductions") { reductions<S>(dev); }
  SUBCASE("matmul: a transformer FFN") { matmul_ffn<S>(dev); }
  SUBCASE("matmul: a few rows against a weight and its transposed view") { matmul_few_rows<S>(dev); }
  SUBCASE("gradients") { gradients<S>(dev); }
}

}  // namespace dtype_cases
