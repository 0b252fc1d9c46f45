// The plan cases that run kernels: skipped sum_to kernels and their readers, an assigned sum_to
// that is still run, an eager chain that reuses its intermediates' memory. Run on
// cases::device(): the CPU (plan_fusion.cpp, plan_memory.cpp) and the GPU
// (cuda/cuda_modes.cpp), against float64. The plan itself does not depend on the device.
#pragma once
#include <cmath>
#include <string>

#include "on_device.hpp"

namespace plan_cases {

// d/d(matmul) of matmul(x, w) + b is sum_to(dy, the matmul's shape): the identity, as the
// matmul has the sum's shape. The next gradient (through w) reads dy itself.
inline void identity_sum_to_not_run() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto r = kiln::input<"r", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  constexpr auto w3 = kiln::param<"w3", 2>();
  constexpr auto loss = kiln::sum(kiln::matmul(kiln::tanh(kiln::matmul(x, w) + b), w3) * r);
  const auto [gw, gb, gw3] = kiln::grad(loss, w, b, w3);
  auto f = kiln::compile(kiln::outputs(gw, gb, gw3));
  const auto xt = cases::randn({7, 5}, 31), wt = cases::randn({5, 6}, 32), bt = cases::randn({6}, 33);
  const auto w3t = cases::randn({6, 4}, 34), rt = cases::randn({7, 4}, 35);
  auto [tgw, tgb, tgw3] = f(x = xt, w = wt, b = bt, w3 = w3t, r = rt);
  CHECK(f.explain().find("not run: its input has its shape") != std::string::npos);
  // References in float64: h = tanh(x w + b), dh = r w3^T (1 - h^2).
  const ref::Array X = ref::from(xt.cpu()), W = ref::from(wt.cpu()), B = ref::from(bt.cpu());
  const ref::Array W3 = ref::from(w3t.cpu()), R = ref::from(rt.cpu());
  const ref::Array z = ref::matmul(X, W);
  ref::Array h = z;
  for (std::size_t i = 0; i < h.numel(); ++i) h.data[i] = std::tanh(z.data[i] + B.data[i % 6]);
  const ref::Array gw3_ref = ref::matmul(ref::transpose(h), R);
  ref::Array dh = ref::matmul(R, ref::transpose(W3));
  for (std::size_t i = 0; i < dh.numel(); ++i) dh.data[i] *= 1 - h.data[i] * h.data[i];
  ref::check_close(tgw3.cpu(), gw3_ref);
  ref::check_close(tgw.cpu(), ref::matmul(ref::transpose(X), dh));
  ref::check_close(tgb.cpu(), ref::reduce(dh, 0, ref::Red::Sum, false));
}

// Its value is copied from its own buffer after the last kernel (skipping the
// kernel once left that buffer empty). p <- sum_to(x, p) with x of p's shape: p = x.
inline void assigned_identity_sum_to_runs() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto p = kiln::param<"p", 2>();
  auto f = kiln::compile(kiln::outputs(kiln::assign(p, kiln::sum_to(x, p))));
  const auto xt = cases::randn({4, 5}, 41);
  kiln::Tensor<float> pt = cases::randn({4, 5}, 42);
  f(x = xt, p = pt);
  ref::check_close(pt.cpu(), ref::from(xt.cpu()));
  CHECK(f.explain().find("not run") == std::string::npos);
}

// A vjp's cotangent given whole: kiln::vjp reads it as expand_as(g, y), and the gradient of
// an operand of y's shape sums that to the operand's shape, which neither broadcasts nor sums
// anything, so that kernel is not run either. y = x w + b: dx = g w^T, dw = x^T g, db = the
// column sums of g.
inline void whole_cotangent_not_copied() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto g = kiln::input<"g", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  constexpr auto y = kiln::matmul(x, w) + b;
  auto f = kiln::compile(std::apply([](const auto&... d) { return kiln::outputs(d...); }, kiln::vjp(y, g, x, w, b)));
  const auto xt = cases::randn({9, 5}, 43), wt = cases::randn({5, 6}, 44), bt = cases::randn({6}, 45);
  const auto gt = cases::randn({9, 6}, 46);
  auto [dx, dw, db] = f(x = xt, g = gt, w = wt, b = bt);
  CHECK(f.explain().find("not run: its input has its shape") != std::string::npos);
  const ref::Array X = ref::from(xt.cpu()), W = ref::from(wt.cpu()), G = ref::from(gt.cpu());
  ref::check_close(dx.cpu(), ref::matmul(G, ref::transpose(W)));
  ref::check_close(dw.cpu(), ref::matmul(ref::transpose(X), G));
  ref::check_close(db.cpu(), ref::reduce(G, 0, ref::Red::Sum, false));
}

// An output that is a reshape of a stored value (here a GEMM's, also read by tanh) is written
// by that value's kernel, not copied from it: z = x w, outputs unflatten(z) and tanh(z).
inline void reshaped_output_written_in_place() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  const auto z = kiln::shared<"z">(kiln::matmul(x, w));
  auto f = kiln::compile(kiln::outputs(kiln::unflatten<1>(z, {2, -1}), kiln::tanh(z)));
  const auto xt = cases::randn({7, 5}, 47), wt = cases::randn({5, 6}, 48);
  auto [zt, tt] = f(x = xt, w = wt);
  CHECK(f.explain().find("writes the output, a reshape of it, directly") != std::string::npos);
  CHECK(zt.shape() == kiln::Shape{7, 2, 3});
  const ref::Array Z = ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu()));
  ref::Array T = Z;
  for (std::size_t i = 0; i < T.numel(); ++i) T.data[i] = std::tanh(Z.data[i]);
  ref::Array Z3 = Z;
  Z3.shape = {7, 2, 3};
  ref::check_close(zt.cpu(), Z3);
  ref::check_close(tt.cpu(), T);
  auto [zt2, tt2] = f(x = xt, w = wt);  // a second call, into new outputs, gives the same
  ref::check_close(zt2.cpu(), Z3);
}

inline void eager_chain_reuses_memory() {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto y = kiln::exp(kiln::exp(kiln::exp(x * 0.1f) * 0.1f) * 0.1f) * 0.1f;
  auto e = kiln::eager(y);
  CHECK(e.kernel_count() == 7);
  const auto xt = cases::randn({10000}, 3);
  ref::check_close(e(x = xt).cpu(), ref::map(ref::from(xt.cpu()), [](double v) {
                     return std::exp(std::exp(std::exp(v * 0.1) * 0.1) * 0.1) * 0.1;
                   }));
}

// A bias gradient beside its weight gradient: with z = (x / 32) w + b + c (of order one for the
// widths used), loss = sum(tanh(z) r) and dz = r (1 - tanh(z)^2): gw = x^T dz / 32, gb = dz
// summed over its rows (b is [n]), gc = dz summed over its columns (c is [k, 1]), and an update
// b - gb / 2 that reads gb after the GEMM. The plan gives gb's sum_to to gw's GEMM (the rank-1
// sum first); on CUDA cuBLASLt's BGRADA writes it during the product (must_fold: the device is
// one where cuBLASLt was seen to offer it, the H200; elsewhere either way is right), and gc's
// sum_to, which is not a column sum, runs as its own kernel. On the CPU both run as their own
// kernels. Two calls: under ReduceOverhead the second runs a captured graph.
template <class T = float, class Policy = kiln::Default>
inline void bias_gradient_beside_the_weight_gradient(std::size_t k, std::size_t in, std::size_t n, bool must_fold = false) {
  constexpr auto x = kiln::input<"x", 2, T>();
  constexpr auto r = kiln::input<"r", 2, T>();
  constexpr auto w = kiln::param<"w", 2, T>();
  constexpr auto b = kiln::param<"b", 1, T>();
  constexpr auto c = kiln::param<"c", 2, T>();
  constexpr auto loss = kiln::sum(kiln::tanh(kiln::matmul(x * 0.03125f, w) + b + c) * r);
  const auto [gw, gb, gc] = kiln::grad(loss, w, b, c);
  auto f = kiln::compile<Policy>(kiln::outputs(gw, gb, gc, b - gb * 0.5f));
  CAPTURE(k);
  CAPTURE(n);
  const auto xt = cases::randn<T>({k, in}, 61), wt = cases::randn<T>({in, n}, 62), bt = cases::randn<T>({n}, 63);
  const auto ct = cases::randn<T>({k, 1}, 64), rt = cases::randn<T>({k, n}, 65);
  // References in float64 from the same (rounded) inputs.
  const ref::Array X = ref::from(xt.cpu()), W = ref::from(wt.cpu()), B = ref::from(bt.cpu());
  const ref::Array C = ref::from(ct.cpu()), R = ref::from(rt.cpu());
  ref::Array dz = ref::matmul(X, W);
  for (std::size_t i = 0; i < dz.numel(); ++i) {
    const double h = std::tanh(dz.data[i] / 32 + B.data[i % n] + C.data[i / n]);
    dz.data[i] = R.data[i] * (1 - h * h);
  }
  const ref::Array gb_ref = ref::reduce(dz, 0, ref::Red::Sum, false);
  // bf16: each dz is rounded to 8 bits (relative 2^-9) before the sums and the product, so a sum
  // of m terms of order one is off by about 2^-9 sqrt(m) (0.03 to 0.05 seen over 300 and 1024
  // terms): atol 0.01 sqrt(m) (gw's terms are 32 times smaller). f32: atol 1e-5 (elements that
  // cancel to near zero miss 2e-5 relative). A wrong or missing row is off by O(1).
  const bool half = sizeof(T) == 2;
  const auto tol = [&](std::size_t terms) { return half ? 0.01 * std::sqrt(double(terms)) : 1e-5; };
  const double rtol = half ? 3e-2 : ref::Tol<T>::rtol;
  for (int call = 0; call < 2; ++call) {
    CAPTURE(call);
    auto [tgw, tgb, tgc, tbn] = f(x = xt, w = wt, b = bt, c = ct, r = rt);
    ref::check_close(tgw.cpu(), ref::map(ref::matmul(ref::transpose(X), dz), [](double v) { return v / 32; }), rtol,
                     half ? tol(k) / 32 : tol(k));
    ref::check_close(tgb.cpu(), gb_ref, rtol, tol(k));
    ref::check_close(tgc.cpu(), ref::reduce(dz, 1, ref::Red::Sum, true), rtol, tol(n));
    ref::check_close(tbn.cpu(), ref::zip(B, gb_ref, [](double p, double q) { return p - q / 2; }), rtol, tol(k));
  }
  const std::string text = f.explain();
  CHECK(text.find("(the column sums of B, cuBLASLt's BGRADA)") != std::string::npos);  // the plan
  const std::size_t folded = text.find("computed by kernel");
  if (folded != std::string::npos) CHECK(text.find("computed by kernel", folded + 1) == std::string::npos);
  if (!cases::device().is_cuda()) CHECK(folded == std::string::npos);
  else if (must_fold) CHECK(folded != std::string::npos);
  else MESSAGE("cuBLASLt's BGRADA " << (folded != std::string::npos ? "wrote" : "did not write") << " the bias gradient");
}

}  // namespace plan_cases
