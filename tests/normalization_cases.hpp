// softmax, log_softmax and layer_norm against the float64 reference; each is one row kernel.
// Registered by ops_normalization.cpp, with DEVICE_CASE for those the GPU runs too, with the
// inputs on the device (on_device.hpp).
#pragma once
#include "on_device.hpp"

namespace normalization_cases {

template <int Rank, class T>
void check_softmax(const kiln::Shape& shape, double scale) {
  constexpr auto x = kiln::input<"x", Rank, T>();
  auto f = kiln::compile(kiln::outputs(kiln::softmax(x * 1.0), kiln::log_softmax(x)));
  auto e = kiln::eager(kiln::outputs(kiln::softmax(x * 1.0), kiln::log_softmax(x)));
  kiln::Tensor<T> host = kiln::randn<T>(shape, 81);
  for (std::size_t i = 0; i < host.numel(); ++i) host[i] *= static_cast<T>(scale);
  const auto rx = ref::from(host);
  const auto xt = host.to(cases::device());
  INFO("shape " << shape.str() << " scale " << scale);
  const double rtol = std::is_same_v<T, float> ? 5e-5 : 1e-11;
  for (int pass = 0; pass < 2; ++pass) {
    auto [s, l] = pass ? e(x = xt) : f(x = xt);
    ref::check_close(s.cpu(), ref::softmax(rx), rtol, 1e-7);
    ref::check_close(l.cpu(), ref::log_softmax(rx), rtol, 1e-5);
  }
}

inline void softmax_and_log_softmax_with_large_logits() {
  check_softmax<2, float>({33, 1000}, 1.0);
  check_softmax<2, float>({8, 65}, 100.0);  // needs the max subtraction to stay finite
  check_softmax<1, float>({129}, 3.0);
  check_softmax<3, float>({2, 3, 17}, 1.0);
  check_softmax<2, double>({9, 50}, 10.0);
}

inline void add_and_layer_norm_one_kernel() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto r = kiln::input<"r", 3>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  auto f = kiln::compile(kiln::layer_norm(x + r, g, b, 1e-5));
  auto e = kiln::eager(kiln::layer_norm(x + r, g, b, 1e-5));
  CHECK(f.kernel_count() == 1);
  const auto xt = cases::randn({3, 17, 768}, 82), rt = cases::randn({3, 17, 768}, 83);
  const auto gt = cases::randn({768}, 84), bt = cases::randn({768}, 85);
  const auto want = ref::layer_norm(ref::zip(ref::from(xt.cpu()), ref::from(rt.cpu()), [](double p, double q) { return p + q; }),
                                    ref::from(gt.cpu()), ref::from(bt.cpu()), 1e-5);
  ref::check_close(f(x = xt, r = rt, g = gt, b = bt).cpu(), want, 1e-4, 1e-5);
  ref::check_close(e(x = xt, r = rt, g = gt, b = bt).cpu(), want, 1e-4, 1e-5);

  constexpr auto xd = kiln::input<"xd", 2, double>();
  constexpr auto gd = kiln::param<"gd", 1, double>();
  constexpr auto bd = kiln::param<"bd", 1, double>();
  auto fd = kiln::compile(kiln::layer_norm(xd, gd, bd, 1e-12));
  const auto xdt = cases::randn<double>({5, 40}, 86), gdt = cases::randn<double>({40}, 87), bdt = cases::randn<double>({40}, 88);
  ref::check_close(fd(xd = xdt, gd = gdt, bd = bdt).cpu(),
                   ref::layer_norm(ref::from(xdt.cpu()), ref::from(gdt.cpu()), ref::from(bdt.cpu()), 1e-12), 1e-11, 1e-12);
}

// rms_norm(x + r, w), Llama's, and rms_norm(x, 1 + w), Gemma's, each one kernel, f32 and f64;
// layer_norm without a bias, one kernel.
inline void rms_norm_and_layer_norm_without_bias() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto r = kiln::input<"r", 3>();
  constexpr auto w = kiln::param<"w", 1>();
  const auto add = [](double p, double q) { return p + q; };
  const auto xt = cases::randn({3, 17, 768}, 91), rt = cases::randn({3, 17, 768}, 92), wt = cases::randn({768}, 93);
  const auto rx = ref::from(xt.cpu()), rr = ref::from(rt.cpu()), rw = ref::from(wt.cpu());
  {
    auto f = kiln::compile(kiln::rms_norm(x + r, w, 1e-6));
    auto e = kiln::eager(kiln::rms_norm(x + r, w, 1e-6));
    CHECK(f.kernel_count() == 1);
    const auto want = ref::rms_norm(ref::zip(rx, rr, add), rw, 1e-6);
    ref::check_close(f(x = xt, r = rt, w = wt).cpu(), want, 1e-4, 1e-5);
    ref::check_close(e(x = xt, r = rt, w = wt).cpu(), want, 1e-4, 1e-5);
  }
  {
    auto f = kiln::compile(kiln::rms_norm(x, 1 + w, 1e-6));
    CHECK(f.kernel_count() == 1);
    const auto want = ref::rms_norm(rx, ref::map(rw, [](double v) { return 1 + v; }), 1e-6);
    ref::check_close(f(x = xt, w = wt).cpu(), want, 1e-4, 1e-5);
  }
  {
    auto f = kiln::compile(kiln::layer_norm(x + r, w, 1e-5));
    auto e = kiln::eager(kiln::layer_norm(x + r, w));
    CHECK(f.kernel_count() == 1);
    const auto want = ref::layer_norm(ref::zip(rx, rr, add), rw, ref::zeros({768}), 1e-5);
    ref::check_close(f(x = xt, r = rt, w = wt).cpu(), want, 1e-4, 1e-5);
    ref::check_close(e(x = xt, r = rt, w = wt).cpu(), want, 1e-4, 1e-5);
  }
  constexpr auto xd = kiln::input<"xd", 2, double>();
  constexpr auto wd = kiln::param<"wd", 1, double>();
  const auto xdt = cases::randn<double>({5, 40}, 94), wdt = cases::randn<double>({40}, 95);
  ref::check_close(kiln::compile(kiln::rms_norm(xd, wd, 1e-12))(xd = xdt, wd = wdt).cpu(),
                   ref::rms_norm(ref::from(xdt.cpu()), ref::from(wdt.cpu()), 1e-12), 1e-11, 1e-12);
  ref::check_close(kiln::compile(kiln::layer_norm(xd, wd, 1e-12))(xd = xdt, wd = wdt).cpu(),
                   ref::layer_norm(ref::from(xdt.cpu()), ref::from(wdt.cpu()), ref::zeros({40}), 1e-12), 1e-11, 1e-12);
}

}  // namespace normalization_cases
