// Reverse mode: reductions and row ops, against central finite differences in float64.
// Registered by autodiff_reduce.cpp with DEVICE_CASE: on the CPU, and on the GPU with the
// gradients computed there (gradcheck.hpp, on_device.hpp).
#pragma once
#include "gradcheck.hpp"

namespace autodiff_reduce_cases {

inline void reductions() {
  using gradcheck::unary;
  const kiln::Shape s{3, 4, 5};
  unary<3>("sum, axis 1", [](auto x) { return kiln::sum<1>(x); }, s, -2, 2);
  unary<3>("sum, last axis kept", [](auto x) { return kiln::sum<-1, true>(x); }, s, -2, 2);
  unary<3>("sum of everything", [](auto x) { return kiln::sum(x); }, s, -2, 2);
  unary<3>("mean, axis 0", [](auto x) { return kiln::mean<0>(x); }, s, -2, 2);
  unary<3>("mean of everything", [](auto x) { return kiln::mean(x); }, s, -2, 2);
  unary<3>("max, axis 2", [](auto x) { return kiln::max<2>(x); }, s, -2, 2);
  unary<3>("min, axis 1 kept", [](auto x) { return kiln::min<1, true>(x); }, s, -2, 2);
  unary<3>("max of everything", [](auto x) { return kiln::max(x); }, s, -2, 2);
}

inline void row_ops() {
  using gradcheck::check, gradcheck::numeric_gradient, gradcheck::unary;
  unary<2>("softmax", [](auto x) { return kiln::softmax(x); }, {3, 6}, -2, 2);
  unary<2>("log_softmax", [](auto x) { return kiln::log_softmax(x * 2.0); }, {3, 6}, -2, 2);
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto g = kiln::param<"g", 1, double>();
  constexpr auto b = kiln::param<"b", 1, double>();
  constexpr auto r = kiln::input<"r", 2, double>();
  constexpr auto loss = kiln::sum(kiln::layer_norm(x, g, b, 1e-5) * r);
  const auto xt = kiln::randn<double>({4, 7}, 6), gt = kiln::randn<double>({7}, 7), bt = kiln::randn<double>({7}, 8);
  const auto rt = kiln::randn<double>({4, 7}, 9);
  auto [gx, gg, gb] = kiln::grad(loss, x, g, b);
  auto f = kiln::compile(loss);
  const auto dev = cases::device();
  auto [dx, dg, db] = kiln::compile(kiln::outputs(gx, gg, gb))(x = xt.to(dev), g = gt.to(dev), b = bt.to(dev), r = rt.to(dev));
  check("layer_norm x", dx.cpu(), numeric_gradient(xt, [&](const auto& v) { return f(x = v, g = gt, b = bt, r = rt)[0]; }));
  check("layer_norm gamma", dg.cpu(), numeric_gradient(gt, [&](const auto& v) { return f(x = xt, g = v, b = bt, r = rt)[0]; }));
  check("layer_norm beta", db.cpu(), numeric_gradient(bt, [&](const auto& v) { return f(x = xt, g = gt, b = v, r = rt)[0]; }));
}

// rms_norm (and its Gemma form, weight 1 + w) and layer_norm without a bias, in x and the weight.
inline void rms_norm_and_layer_norm_without_bias() {
  using gradcheck::check, gradcheck::numeric_gradient;
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w = kiln::param<"w", 1, double>();
  constexpr auto r = kiln::input<"r", 2, double>();
  const auto xt = kiln::randn<double>({4, 7}, 10), wt = kiln::randn<double>({7}, 11);
  const auto rt = kiln::randn<double>({4, 7}, 12);
  const auto dev = cases::device();
  const auto both = [&](const std::string& name, auto loss) {
    auto [gx, gw] = kiln::grad(loss, x, w);
    auto f = kiln::compile(loss);
    auto [dx, dw] = kiln::compile(kiln::outputs(gx, gw))(x = xt.to(dev), w = wt.to(dev), r = rt.to(dev));
    check(name + " x", dx.cpu(), numeric_gradient(xt, [&](const auto& v) { return f(x = v, w = wt, r = rt)[0]; }));
    check(name + " weight", dw.cpu(), numeric_gradient(wt, [&](const auto& v) { return f(x = xt, w = v, r = rt)[0]; }));
  };
  both("rms_norm", kiln::sum(kiln::rms_norm(x, w, 1e-6) * r));
  both("rms_norm, weight 1 + w", kiln::sum(kiln::rms_norm(x * 0.5, 1 + w, 1e-6) * r));
  both("layer_norm without a bias", kiln::sum(kiln::layer_norm(x, w, 1e-5) * r));
}

}  // namespace autodiff_reduce_cases
