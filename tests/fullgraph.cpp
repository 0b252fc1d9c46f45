// Graph breaks: kiln::host splits the program into compiled segments joined by a host call;
// explain() lists the segments and the break.
#include "reference.hpp"

namespace {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();

// A host function: clamps each row's values to [-1, 1] (think: a step no kernel covers).
kiln::Tensor<float> clamp_rows(const kiln::Tensor<float>& t) {
  kiln::Tensor<float> out = t;
  for (std::size_t i = 0; i < out.numel(); ++i) out[i] = std::clamp(out[i], -1.0f, 1.0f);
  return out;
}
}  // namespace

TEST_CASE("a host function splits the program into two compiled segments") {
  constexpr auto y = kiln::softmax(kiln::host(clamp_rows, kiln::matmul(x, w) * 0.5f) + 1.0f);
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 2);  // gemm + epilogue; then the row kernel
  const auto xt = kiln::randn<float>({6, 5}, 1), wt = kiln::randn<float>({5, 7}, 2);
  const auto h = ref::map(ref::matmul(ref::from(xt), ref::from(wt)), [](double v) { return std::clamp(0.5 * v, -1.0, 1.0); });
  ref::check_close(f(x = xt, w = wt), ref::softmax(ref::map(h, [](double v) { return v + 1; })), 1e-5, 1e-6);
  const std::string e = f.explain();
  CHECK(e.find("graph break 0: kiln::host") != std::string::npos);
  CHECK(e.find("reads host0") != std::string::npos);
  CHECK(e.find("[matmul, mul]") != std::string::npos);
}

TEST_CASE("values the later segment shares with the first, several breaks, several outputs") {
  constexpr auto a = kiln::exp(x * 0.1f);
  constexpr auto y = kiln::outputs(kiln::host(clamp_rows, kiln::host(clamp_rows, a) * 3.0f) + a, kiln::sum(a));
  auto f = kiln::compile(y);
  const auto xt = kiln::randn<float>({4, 9}, 3);
  auto [p, s] = f(x = xt);
  const auto ra = ref::map(ref::from(xt), [](double v) { return std::exp(v * 0.1); });
  ref::check_close(p, ref::zip(ra, ra, [](double v, double u) { return std::clamp(std::clamp(v, -1.0, 1.0) * 3, -1.0, 1.0) + u; }));
  ref::check_close(s, ref::reduce_all(ra, ref::Red::Sum), 1e-5);
  CHECK(f.explain().find("graph break 1") != std::string::npos);
}

TEST_CASE("a host function returning the wrong rank is reported") {
  auto flatten = [](const kiln::Tensor<float>& t) { return kiln::Tensor<float>({t.numel()}); };
  auto f = kiln::compile(kiln::host(flatten, x) * 2.0f);
  const auto xt = kiln::randn<float>({2, 3}, 4);
  CHECK_THROWS_WITH_AS(f(x = xt), "host: the function returned shape [6], of rank 1; it must return rank 2", kiln::ShapeError);
}

TEST_CASE("a host function may change the extents") {
  auto pad = [](const kiln::Tensor<float>& t) {
    kiln::Tensor<float> out({t.shape()[0], t.shape()[1] + 1});
    out.fill(0.0f);
    for (std::size_t i = 0; i < t.shape()[0]; ++i)
      for (std::size_t j = 0; j < t.shape()[1]; ++j) out.at({i, j}) = t.at({i, j});
    return out;
  };
  auto f = kiln::compile<kiln::ReduceOverhead>(kiln::sum<1>(kiln::host(pad, x + 1.0f)));
  const auto xt = kiln::randn<float>({3, 4}, 5);
  ref::check_close(f(x = xt), ref::reduce(ref::map(ref::from(xt), [](double v) { return v + 1; }), 1, ref::Red::Sum, false), 1e-5, 1e-6);
}
