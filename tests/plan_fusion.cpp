// The fusion contract, checked through kernel_count(), and the plan text of explain().
#include "reference.hpp"

namespace {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto r = kiln::input<"r", 2>();
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
constexpr auto g = kiln::param<"g", 1>();
constexpr auto w2 = kiln::param<"w2", 2>();
constexpr auto b2 = kiln::param<"b2", 1>();
constexpr auto v = kiln::input<"v", 1>();
}  // namespace

TEST_CASE("W1, a pointwise chain, is one kernel; eager runs one per op") {
  constexpr auto y = kiln::gelu(v * 1.5f + 0.5f) * kiln::sigmoid(v) + kiln::tanh(v);
  CHECK(kiln::compile(y).kernel_count() == 1);
  CHECK(kiln::eager(y).kernel_count() == 7);  // mul, add, gelu, sigmoid, mul, tanh, add
  CHECK(kiln::compile<kiln::Eager>(y).kernel_count() == 7);
}

TEST_CASE("add + layer_norm is one kernel") {
  CHECK(kiln::compile(kiln::layer_norm(x + r, g, b, 1e-5)).kernel_count() == 1);
}

TEST_CASE("softmax and log_softmax are one kernel each") {
  CHECK(kiln::compile(kiln::softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::log_softmax(x)).kernel_count() == 1);
}

TEST_CASE("gelu(matmul(x, w) + b) is one GEMM with bias and GELU in its epilogue") {
  auto f = kiln::compile(kiln::gelu(kiln::matmul(x, w) + b));
  CHECK(f.kernel_count() == 1);
  const std::string plan = f.explain();
  CHECK(plan.find("gemm + epilogue") != std::string::npos);
  CHECK(plan.find("[matmul, add, gelu]") != std::string::npos);
  CHECK(kiln::explain(kiln::gelu(kiln::matmul(x, w) + b)) == plan);
}

TEST_CASE("W4, the FFN, is two kernels") {
  constexpr auto y = kiln::matmul(kiln::gelu(kiln::matmul(x, w) + b), w2) + b2;
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 2);
  const std::string plan = f.explain();
  CHECK(plan.find("kiln plan (fused, Default, Fused): 2 kernels") != std::string::npos);
  CHECK(plan.find("kernel 1: gemm + epilogue -> %9 (output 0) = [matmul, add]") != std::string::npos);
  CHECK(kiln::eager(y).kernel_count() == 5);
}

TEST_CASE("a value used by two kernels is recomputed by each when its operands are stored anyway") {
  constexpr auto h = kiln::exp(x);
  auto f = kiln::compile(kiln::outputs(kiln::sum<0>(h), kiln::sum<1>(h)));
  // exp(x) reads only x, a symbol: each sum's kernel evaluates it, nothing is stored.
  CHECK(f.kernel_count() == 2);
  CHECK(f.explain().find("recomputes %1 exp") != std::string::npos);
  const auto xt = kiln::randn<float>({6, 9}, 4);
  auto [s0, s1] = f(x = xt);
  for (std::size_t j = 0; j < 9; ++j) {
    double want = 0;
    for (std::size_t i = 0; i < 6; ++i) want += std::exp(double(xt.at({i, j})));
    CHECK(s0[j] == doctest::Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("a value used by two kernels is materialised once when recomputing it would store more") {
  // exp(x + x): its operand x + x is read by exp alone, so it is not stored anyway; the exp
  // gets a kernel of its own (with the add fused in) and each sum reads it.
  constexpr auto h = kiln::exp(x + x);
  auto f = kiln::compile(kiln::outputs(kiln::sum<0>(h), kiln::sum<1>(h)));
  CHECK(f.kernel_count() == 3);
  CHECK(f.explain().find("= [add, exp]") != std::string::npos);
  CHECK(f.explain().find("recomputes") == std::string::npos);
}

TEST_CASE("a matmul used outside its epilogue is materialised") {
  constexpr auto m = kiln::matmul(x, w);
  auto f = kiln::compile(kiln::outputs(kiln::relu(m), m));
  CHECK(f.kernel_count() == 2);
}

TEST_CASE("the plan names reductions and what each kernel reads") {
  auto f = kiln::compile(kiln::softmax(x));
  const std::string plan = f.explain();
  CHECK(plan.find("row reduction") != std::string::npos);
  CHECK(plan.find("[max, sub, exp, sum, div]") != std::string::npos);
  CHECK(plan.find("reads x") != std::string::npos);
}

TEST_CASE("a scalar chain gets a kernel of its own; a single scalar op stays inline") {
  constexpr auto t = kiln::input<"t", 0>();
  // lr / (1 - 0.9^t), AdamW's step size: four scalar ops, computed once, not per element.
  auto f = kiln::compile(x * (0.01f / (1.0f - kiln::exp(t * -0.105f))));
  CHECK(f.kernel_count() == 2);
  CHECK(f.explain().find("= [mul, exp, sub, div]; reads t") != std::string::npos);
  auto g = kiln::compile(x * (t * 0.5f));
  CHECK(g.kernel_count() == 1);
  const auto xt = kiln::randn<float>({3, 5}, 1);
  kiln::Tensor<float> tt(kiln::Shape{});
  tt[0] = 3.0f;
  const auto y = f(x = xt, t = tt);
  for (std::size_t i = 0; i < y.numel(); ++i)
    CHECK(y[i] == doctest::Approx(xt[i] * (0.01 / (1 - std::exp(3 * -0.105)))).epsilon(1e-5));
}
