// Reverse mode test helpers: an op's vjp rule against central finite differences in float64
// on random inputs. Used by the autodiff_*.cpp tests (split so each compiles in under a minute).
// unary and binary run the gradient on cases::device() (on_device.hpp), so a GPU test can run
// the same cases; the finite differences, the reference, always run on the CPU.
#pragma once
#include "on_device.hpp"

namespace gradcheck {

constexpr double kStep = 1e-6;

// |analytic - numeric| <= 1e-6 + 1e-5 |numeric| for every element of every variable.
inline void check(const std::string& name, const kiln::Tensor<double>& analytic, const std::vector<double>& numeric) {
  INFO("op: " << name);
  REQUIRE(analytic.numel() == numeric.size());
  int bad = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i)
    if (!(std::abs(analytic[i] - numeric[i]) <= 1e-6 + 1e-5 * std::abs(numeric[i])) && bad++ == 0) first = i;
  INFO("first mismatch at " << first << ": analytic " << analytic[first] << ", numeric " << numeric[first]);
  CHECK(bad == 0);
}

// Central differences of loss(v) over the elements of v.
template <class Loss>
std::vector<double> numeric_gradient(kiln::Tensor<double> v, Loss&& loss) {
  std::vector<double> g(v.numel());
  for (std::size_t i = 0; i < v.numel(); ++i) {
    const double keep = v[i];
    v[i] = keep + kStep;
    const double up = loss(v);
    v[i] = keep - kStep;
    const double down = loss(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * kStep);
  }
  return g;
}

// loss = sum(f(x) * r) with a random weight r, so every output element has its own cotangent.
template <int R, class Build>
void unary(const std::string& name, Build build, const kiln::Shape& shape, double lo, double hi) {
  constexpr auto x = kiln::input<"x", R, double>();
  constexpr auto y = build(x);
  constexpr auto r = kiln::input<"r", decltype(y)::rank, double>();
  constexpr auto loss = kiln::sum(y * r);
  const auto xt = kiln::rand<double>(shape, 1, lo, hi);
  const auto rt = kiln::randn<double>(kiln::compile(y)(x = xt).shape(), 2);
  auto [gx] = kiln::grad(loss, x);
  auto f = kiln::compile(loss);
  const auto dev = cases::device();
  check(name, kiln::compile(gx)(x = xt.to(dev), r = rt.to(dev)).cpu(),
        numeric_gradient(xt, [&](const auto& v) { return f(x = v, r = rt)[0]; }));
}

template <int RA, int RB, class Build>
void binary(const std::string& name, Build build, const kiln::Shape& sa, const kiln::Shape& sb, double lo, double hi) {
  constexpr auto a = kiln::input<"a", RA, double>();
  constexpr auto b = kiln::input<"b", RB, double>();
  constexpr auto y = build(a, b);
  constexpr auto r = kiln::input<"r", decltype(y)::rank, double>();
  constexpr auto loss = kiln::sum(y * r);
  const auto at = kiln::rand<double>(sa, 3, lo, hi), bt = kiln::rand<double>(sb, 4, lo, hi);
  const auto rt = kiln::randn<double>(kiln::compile(y)(a = at, b = bt).shape(), 5);
  auto [ga, gb] = kiln::grad(loss, a, b);
  auto f = kiln::compile(loss);
  auto g = kiln::compile(kiln::outputs(ga, gb));
  const auto dev = cases::device();
  auto [gat, gbt] = g(a = at.to(dev), b = bt.to(dev), r = rt.to(dev));
  check(name + " (first operand)", gat.cpu(), numeric_gradient(at, [&](const auto& v) { return f(a = v, b = bt, r = rt)[0]; }));
  check(name + " (second operand)", gbt.cpu(), numeric_gradient(bt, [&](const auto& v) { return f(a = at, b = v, r = rt)[0]; }));
}

}  // namespace gradcheck
