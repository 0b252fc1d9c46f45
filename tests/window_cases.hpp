// write_slice and the other windows at a run-time position (extract, insert, zero_window)
// against a float64 reference: several positions through one compiled program, along a middle
// and the last axis; a static KV cache written in place by kiln::assign and read by the
// attention after it; the copy kept when a later kernel reads the old value; positions past the
// axis; bad shapes; and gradients by finite differences. Registered by ops_window.cpp with
// DEVICE_CASE: on the CPU, and on the GPU with the inputs on the device (on_device.hpp).
#pragma once
#include <cmath>

#include "gradcheck.hpp"

namespace window_cases {

// x with src written at positions [pos, pos + n) along axis.
inline ref::Array write(const ref::Array& x, const ref::Array& src, int axis, std::size_t pos) {
  ref::Array out = x;
  for (std::size_t i = 0; i < src.numel(); ++i) {
    auto idx = ref::unravel(i, src.shape);
    idx[axis] += pos;
    out.data[ref::ravel(idx, x.shape)] = src.data[i];
  }
  return out;
}

inline kiln::Tensor<kiln::i64> position(std::int64_t p) {
  return kiln::from_vector<kiln::i64>({p}, kiln::Shape{}).to(cases::device());
}

inline void write_slice_at_run_time_positions() {
  constexpr auto x = kiln::input<"x", 4>();
  constexpr auto s = kiln::input<"s", 4>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  auto mid = kiln::compile(kiln::write_slice<2>(x, pos, s) * 2);  // with a consumer after it
  auto last = kiln::compile(kiln::write_slice<-1>(x, pos, s));
  const auto xt = cases::randn({2, 3, 10, 5}, 901);
  const auto s2 = cases::randn({2, 3, 3, 5}, 902), s3 = cases::randn({2, 3, 10, 2}, 903);
  const auto rx = ref::from(xt.cpu());
  for (std::int64_t p : {0, 4, 7}) {
    INFO("position " << p);
    const auto want = ref::map(write(rx, ref::from(s2.cpu()), 2, static_cast<std::size_t>(p)), [](double v) { return 2 * v; });
    ref::check_close(mid(x = xt, s = s2, pos = position(p)).cpu(), want, 0, 0);
    ref::check_close(last(x = xt, s = s3, pos = position(p % 4)).cpu(),
                     write(rx, ref::from(s3.cpu()), 3, static_cast<std::size_t>(p % 4)), 0, 0);
  }
  // src read through its strides: a transposed view.
  constexpr auto t = kiln::input<"t", 4>();
  auto viewed = kiln::compile(kiln::write_slice<2>(x, pos, kiln::transpose(t)));
  const auto tt = cases::randn({2, 3, 5, 4}, 904);
  ref::check_close(viewed(x = xt, t = tt, pos = position(6)).cpu(), write(rx, ref::transpose(ref::from(tt.cpu())), 2, 6), 0, 0);
}

inline void extract_insert_and_zero_window() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto w = kiln::input<"w", 3>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i32>();
  auto f = kiln::compile(kiln::outputs(kiln::extract<1>(x, pos, w), kiln::insert<1>(w, pos, x), kiln::zero_window<1>(x, pos, w)));
  const auto xt = cases::randn({3, 9, 4}, 905), wt = cases::randn({3, 2, 4}, 906);
  const auto rx = ref::from(xt.cpu()), rw = ref::from(wt.cpu());
  for (std::int32_t p : {0, 5, 7}) {
    INFO("position " << p);
    const auto [e, i, z] = f(x = xt, w = wt, pos = kiln::from_vector<kiln::i32>({p}, kiln::Shape{}).to(cases::device()));
    ref::Array want_e = rw;
    for (std::size_t k = 0; k < want_e.numel(); ++k) {
      auto idx = ref::unravel(k, rw.shape);
      idx[1] += static_cast<std::size_t>(p);
      want_e.data[k] = rx.data[ref::ravel(idx, rx.shape)];
    }
    ref::check_close(e.cpu(), want_e, 0, 0);
    ref::check_close(i.cpu(), write(ref::zeros(rx.shape), rw, 1, static_cast<std::size_t>(p)), 0, 0);
    ref::check_close(z.cpu(), write(rx, ref::zeros(rw.shape), 1, static_cast<std::size_t>(p)), 0, 0);
  }
}

// One decode step of a static KV cache: the new token's k and v are written at pos in place
// (kiln::assign of a write_slice of the cache itself), and attention reads the first pos + 1
// positions of the updated caches. One compiled program serves every position; under
// ReduceOverhead on CUDA one graph is captured and replayed.
inline void decode_steps_write_the_cache_in_place() {
  constexpr auto kc = kiln::input<"kc", 4, double>();
  constexpr auto vc = kiln::input<"vc", 4, double>();
  constexpr auto q = kiln::input<"q", 4, double>();
  constexpr auto kn = kiln::input<"kn", 4, double>();
  constexpr auto vn = kiln::input<"vn", 4, double>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  constexpr auto len = kiln::input<"len", 0, kiln::i64>();
  constexpr auto k_all = kiln::write_slice<2>(kc, pos, kn);
  constexpr auto v_all = kiln::write_slice<2>(vc, pos, vn);
  auto step = kiln::compile<kiln::ReduceOverhead>(
      kiln::outputs(kiln::attention<kiln::causal>(q, k_all, v_all, len), kiln::assign(kc, k_all), kiln::assign(vc, v_all)));
  const std::size_t B = 2, H = 4, Hkv = 2, L = 12, D = 8;
  auto kct = kiln::zeros<double>({B, Hkv, L, D}).to(cases::device());
  auto vct = kiln::zeros<double>({B, Hkv, L, D}).to(cases::device());
  ref::Array rk = ref::zeros({B, Hkv, L, D}), rv = ref::zeros({B, Hkv, L, D});
  // The step's inputs stay at one address (a graph keeps the addresses it was captured with);
  // each step copies new values into them.
  auto qt = cases::randn<double>({B, H, 1, D}, 909), knt = cases::randn<double>({B, Hkv, 1, D}, 909);
  auto vnt = cases::randn<double>({B, Hkv, 1, D}, 909);
  auto pt = position(0), lt = position(0);
  for (std::int64_t p = 0; p < 5; ++p) {
    INFO("position " << p);
    qt.copy_from(kiln::randn<double>({B, H, 1, D}, 910 + 3 * p));
    knt.copy_from(kiln::randn<double>({B, Hkv, 1, D}, 911 + 3 * p));
    vnt.copy_from(kiln::randn<double>({B, Hkv, 1, D}, 912 + 3 * p));
    pt.copy_from(kiln::from_vector<kiln::i64>({p}, kiln::Shape{}));
    lt.copy_from(kiln::from_vector<kiln::i64>({p + 1}, kiln::Shape{}));
    const auto [y] = step(q = qt, kc = kct, vc = vct, kn = knt, vn = vnt, pos = pt, len = lt);
    rk = write(rk, ref::from(knt.cpu()), 2, static_cast<std::size_t>(p));
    rv = write(rv, ref::from(vnt.cpu()), 2, static_cast<std::size_t>(p));
    ref::check_close(kct.cpu(), rk, 0, 0);
    ref::check_close(vct.cpu(), rv, 0, 0);
    // The reference: softmax over the first p + 1 keys of query head h's kv head, for one query.
    const auto rq = ref::from(qt.cpu());
    ref::Array want = ref::zeros({B, H, 1, D});
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < H; ++h) {
        const std::size_t g = h / (H / Hkv), n = static_cast<std::size_t>(p + 1);
        std::vector<double> score(n);
        double top = -INFINITY, total = 0;
        for (std::size_t j = 0; j < n; ++j) {
          for (std::size_t d = 0; d < D; ++d) score[j] += rq.data[(b * H + h) * D + d] * rk.data[((b * Hkv + g) * L + j) * D + d];
          score[j] /= std::sqrt(static_cast<double>(D));
          top = std::max(top, score[j]);
        }
        for (double& e : score) total += (e = std::exp(e - top));
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t d = 0; d < D; ++d)
            want.data[(b * H + h) * D + d] += score[j] / total * rv.data[((b * Hkv + g) * L + j) * D + d];
      }
    ref::check_close(y.cpu(), want, 1e-12, 1e-12);
  }
  CHECK(step.explain().find("assigned in place") != std::string::npos);
  [](const auto& f) {  // a build with CUDA: one graph for every position
    if constexpr (requires { f.graph_captures(); })
      if (cases::device().is_cuda()) {
        CHECK(f.graph_captures() == 1);
        CHECK(f.graph_replays() >= 3);
      }
  }(step);
}

// A later kernel reads the old value: the write is not done in place, and both values are right.
inline void old_value_read_after_the_write() {
  constexpr auto c = kiln::input<"c", 2, double>();
  constexpr auto s = kiln::input<"s", 2, double>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  constexpr auto updated = kiln::write_slice<0>(c, pos, s);
  auto f = kiln::compile(kiln::outputs(kiln::assign(c, updated), kiln::sum<0, true>(updated) + c));
  auto ct = cases::randn<double>({6, 5}, 920);
  const auto st = cases::randn<double>({2, 5}, 921);
  const auto rc = ref::from(ct.cpu()), rs = ref::from(st.cpu());
  const auto [got] = f(c = ct, s = st, pos = position(3));
  const auto rn = write(rc, rs, 0, 3);
  ref::Array want = ref::zeros({6, 5});
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 5; ++j) {
      double col = 0;
      for (std::size_t k = 0; k < 6; ++k) col += rn.data[k * 5 + j];
      want.data[i * 5 + j] = col + rc.data[i * 5 + j];
    }
  ref::check_close(got.cpu(), want, 1e-12, 1e-12);
  ref::check_close(ct.cpu(), rn, 0, 0);
}

inline void positions_past_the_axis_and_bad_shapes() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto s = kiln::input<"s", 3>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  auto f = kiln::compile(kiln::outputs(kiln::assign(x, kiln::write_slice<1>(x, pos, s))));
  auto xt = cases::randn({2, 10, 3}, 930);
  const auto st = cases::randn({2, 3, 3}, 931);
  const auto before = ref::from(xt.cpu());
  if (cases::device().is_cpu()) {
    CHECK_THROWS_WITH_AS(f(x = xt, s = st, pos = position(8)),
                         doctest::Contains("write_slice: position 8 along axis 1 places the window past the axis; positions 0 to 7 fit"),
                         kiln::IndexError);
    CHECK_THROWS_AS(f(x = xt, s = st, pos = position(-1)), kiln::IndexError);
    ref::check_close(xt.cpu(), before, 0, 0);  // nothing written
  } else {  // clamped to the axis: at 7
    f(x = xt, s = st, pos = position(8));
    ref::check_close(xt.cpu(), write(before, ref::from(st.cpu()), 1, 7), 0, 0);
  }
  CHECK_THROWS_WITH_AS(f(x = xt, s = cases::randn({2, 3, 4}, 932), pos = position(0)),
                       doctest::Contains("write_slice along axis 1: shapes [2, 10, 3] and [2, 3, 4] differ on another axis"),
                       kiln::ShapeError);
  CHECK_THROWS_WITH_AS(f(x = xt, s = cases::randn({2, 11, 3}, 933), pos = position(0)),
                       doctest::Contains("write_slice along axis 1: a window of 11 positions does not fit in [2, 10, 3]"),
                       kiln::ShapeError);
}

// d/dx and d/ds of sum(write_slice(x, pos, s) * r), and d/dx of the extract-insert round trip,
// against central differences.
inline void gradients() {
  constexpr auto x = kiln::input<"x", 3, double>();
  constexpr auto s = kiln::input<"s", 3, double>();
  constexpr auto r = kiln::input<"r", 3, double>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  constexpr auto loss = kiln::sum(kiln::write_slice<1>(kiln::tanh(x), pos, s * s) * r);
  constexpr auto round = kiln::sum(kiln::insert<2>(kiln::extract<2>(x, pos, kiln::slice<2, 0, 2>(x)), pos, x) * r);
  auto value = kiln::compile(loss);
  auto value_round = kiln::compile(round);
  auto [gx, gs] = kiln::grad(loss, x, s);
  auto [gr] = kiln::grad(round, x);
  auto grads = kiln::compile(kiln::outputs(gx, gs, gr));
  const auto xt = kiln::randn<double>({2, 6, 3}, 940), st = kiln::randn<double>({2, 2, 3}, 941);
  const auto rt = kiln::randn<double>({2, 6, 3}, 942);
  const auto pt = kiln::from_vector<kiln::i64>({1}, kiln::Shape{});
  const auto dev = cases::device();
  const auto [ax, as, ar] = grads(x = xt.to(dev), s = st.to(dev), r = rt.to(dev), pos = pt.to(dev));
  auto at = [&](const kiln::Tensor<double>& a, const kiln::Tensor<double>& b) { return value(x = a, s = b, r = rt, pos = pt)[0]; };
  gradcheck::check("write_slice dx", ax.cpu(), gradcheck::numeric_gradient(xt, [&](const auto& v) { return at(v, st); }));
  gradcheck::check("write_slice ds", as.cpu(), gradcheck::numeric_gradient(st, [&](const auto& v) { return at(xt, v); }));
  gradcheck::check("extract and insert dx", ar.cpu(),
                   gradcheck::numeric_gradient(xt, [&](const auto& v) { return value_round(x = v, r = rt, pos = pt)[0]; }));
}

}  // namespace window_cases
