// Reductions over one axis (every axis, negative axes, keepdim) and over everything, with
// fused pointwise prologues, against the float64 reference. Registered by ops_reduce.cpp with
// DEVICE_CASE: on the CPU, and on the GPU with the inputs on the device (on_device.hpp).
#pragma once
#include "on_device.hpp"

namespace reduce_cases {

template <int Axis, bool Keep, int Rank, class T = float>
void check_axis(const kiln::Shape& shape) {
  constexpr auto x = kiln::input<"x", Rank, T>();
  // A prologue, fused into the reduction kernel.
  constexpr auto p = x * 2 + 1;
  constexpr auto y = kiln::outputs(kiln::sum<Axis, Keep>(p), kiln::mean<Axis, Keep>(p), kiln::max<Axis, Keep>(p),
                                   kiln::min<Axis, Keep>(p));
  auto f = kiln::compile(y);
  auto e = kiln::eager(y);
  CHECK(f.kernel_count() == 4);
  const auto xt = cases::randn<T>(shape, 41);
  const auto rp = ref::map(ref::from(xt.cpu()), [](double v) { return v * 2 + 1; });
  constexpr int axis = Axis < 0 ? Axis + Rank : Axis;
  INFO("shape " << shape.str() << " axis " << Axis << " keep " << Keep);
  const double rtol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  for (int pass = 0; pass < 2; ++pass) {
    auto [s, m, mx, mn] = pass == 0 ? f(x = xt) : e(x = xt);
    ref::check_close(s.cpu(), ref::reduce(rp, axis, ref::Red::Sum, Keep), rtol, 1e-4);
    ref::check_close(m.cpu(), ref::reduce(rp, axis, ref::Red::Mean, Keep), rtol, 1e-5);
    ref::check_close(mx.cpu(), ref::reduce(rp, axis, ref::Red::Max, Keep));
    ref::check_close(mn.cpu(), ref::reduce(rp, axis, ref::Red::Min, Keep));
  }
}

inline void rank_1() {
  check_axis<0, false, 1>({1001});
  check_axis<-1, true, 1>({77});
}
inline void rank_2_each_axis() {
  check_axis<0, false, 2>({129, 35});
  check_axis<1, false, 2>({129, 35});
  check_axis<-1, true, 2>({129, 35});
  check_axis<-2, true, 2>({3, 700});
}
inline void rank_3_each_axis() {
  check_axis<0, true, 3>({5, 6, 7});
  check_axis<1, false, 3>({5, 6, 7});
  check_axis<2, true, 3>({5, 6, 7});
  check_axis<-3, false, 3>({300, 2, 3});
}
inline void float64() {
  check_axis<1, false, 2, double>({64, 33});
  check_axis<0, true, 2, double>({64, 33});
}
inline void size_1_and_long_axes() {
  check_axis<1, false, 2>({40, 1});
  check_axis<0, false, 2>({1, 40});
  check_axis<1, true, 2>({3, 100000});
}

inline void over_everything() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto y = kiln::outputs(kiln::sum(kiln::exp(x * 0.1f)), kiln::mean(x), kiln::max(x), kiln::min(x));
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 4);
  for (const kiln::Shape s : {kiln::Shape{3, 4, 5}, kiln::Shape{2, 300, 400}, kiln::Shape{1, 1, 1}}) {
    const auto xt = cases::randn(s, 43);
    const auto rx = ref::from(xt.cpu());
    auto [sm, mn, mx, mi] = f(x = xt);
    CHECK(sm.rank() == 0);
    ref::check_close(sm.cpu(), ref::reduce_all(ref::map(rx, [](double v) { return std::exp(v * 0.1); }), ref::Red::Sum), 1e-5);
    ref::check_close(mn.cpu(), ref::reduce_all(rx, ref::Red::Mean), 1e-4, 1e-6);
    ref::check_close(mx.cpu(), ref::reduce_all(rx, ref::Red::Max));
    ref::check_close(mi.cpu(), ref::reduce_all(rx, ref::Red::Min));
  }
}

// The gradient of a vector broadcast over the rows of x (a bias's gradient, the reduce-to kind):
// d/db sum((x + b)^2) = 2 (x's column sums + rows b), over many rows. On the GPU the rows are
// split over blocks (4099 rows: no split count divides them evenly, so the last split is short)
// and the splits' sums are added by a second kernel. Also a broadcast along a middle axis (the
// general path).
inline void column_sums_of_many_rows() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  constexpr auto x3 = kiln::input<"x3", 3>();
  constexpr auto c = kiln::param<"c", 3>();
  auto f = kiln::compile(std::get<0>(kiln::grad(kiln::sum(kiln::square(x + b)), b)));
  for (const kiln::Shape shape : {kiln::Shape{4099, 96}, kiln::Shape{2048, 128}, kiln::Shape{70, 1000}}) {
    INFO("x " << shape.str());
    const auto xt = cases::randn<float>(shape, 45), bt = cases::randn<float>({shape[1]}, 46);
    const double rows = static_cast<double>(shape[0]);
    const auto want = ref::zip(ref::reduce(ref::from(xt.cpu()), 0, ref::Red::Sum, false), ref::from(bt.cpu()),
                               [rows](double s, double v) { return 2 * (s + rows * v); });
    ref::check_close(f(x = xt, b = bt).cpu(), want, 1e-4, 1e-2);
    ref::check_close(f(x = xt, b = bt).cpu(), want, 1e-4, 1e-2);  // the plan's second call
  }
  const auto xt = cases::randn<float>({9, 300, 7}, 47), ct = cases::randn<float>({9, 1, 7}, 48);
  auto g = kiln::compile(std::get<0>(kiln::grad(kiln::sum(kiln::square(x3 + c)), c)));
  const auto want = ref::zip(ref::reduce(ref::from(xt.cpu()), 1, ref::Red::Sum, true), ref::from(ct.cpu()),
                             [](double s, double v) { return 2 * (s + 300 * v); });
  ref::check_close(g(x3 = xt, c = ct).cpu(), want, 1e-4, 1e-2);
}

inline void reduced_value_broadcast_back_is_one_kernel() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto y = x - kiln::mean<-1, true>(x) + kiln::max<1, true>(kiln::abs(x));
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 1);
  const auto xt = cases::randn({50, 70}, 45);
  const auto rx = ref::from(xt.cpu());
  const auto want = ref::zip(ref::zip(rx, ref::reduce(rx, 1, ref::Red::Mean, true), [](double p, double q) { return p - q; }),
                             ref::reduce(ref::map(rx, [](double v) { return std::abs(v); }), 1, ref::Red::Max, true),
                             [](double p, double q) { return p + q; });
  ref::check_close(f(x = xt).cpu(), want, 1e-5, 1e-5);
}

inline void cached_stage_input_of_another_space_is_recomputed() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto z = kiln::input<"z", 2>();
  constexpr auto e = kiln::exp(z);
  constexpr auto y = x + e / kiln::sum<-1, true>(e);  // e is [1, L], the output [R, L]
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 1);
  const auto xt = cases::randn({5, 33}, 46), zt = cases::randn({1, 33}, 47);
  const auto rxt = ref::from(xt.cpu());
  // x + exp(z) / sum(exp(z)) over the last axis
  const auto want = [&](const kiln::Tensor<float>& zv) {
    const auto re = ref::map(ref::from(zv.cpu()), [](double v) { return std::exp(v); });
    return ref::zip(rxt, ref::zip(re, ref::reduce(re, 1, ref::Red::Sum, true), [](double p, double q) { return p / q; }),
                    [](double p, double q) { return p + q; });
  };
  ref::check_close(f(x = xt, z = zt).cpu(), want(zt), 1e-5, 1e-6);
  // The same kernel with equal shapes takes the cached path.
  const auto z2 = cases::randn({5, 33}, 48);
  ref::check_close(f(x = xt, z = z2).cpu(), want(z2), 1e-5, 1e-6);
}

}  // namespace reduce_cases
