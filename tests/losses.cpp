// Losses: cross-entropy from class labels (through one_hot and column_index) against a float64
// reference and against the one-hot form, values and gradients; mse.
#include "gradcheck.hpp"

using namespace gradcheck;

namespace {
constexpr auto labels = kiln::input<"labels", 1>();
constexpr auto like = kiln::input<"like", 2>();
}  // namespace

TEST_CASE("one_hot turns labels into rows of 0 and 1; a label out of range gives zeros") {
  kiln::Tensor<float> lt({5}), liket({5, 4});
  const float values[] = {0, 3, 1, 7, -1};  // 7 and -1 are outside [0, 4)
  for (std::size_t i = 0; i < 5; ++i) lt[i] = values[i];
  liket.fill(0.0f);
  for (auto* f : {+[](const kiln::Tensor<float>& l, const kiln::Tensor<float>& k) {
                    return kiln::compile(kiln::nn::one_hot(labels, like))(labels = l, like = k);
                  },
                  +[](const kiln::Tensor<float>& l, const kiln::Tensor<float>& k) {
                    return kiln::eager(kiln::nn::one_hot(labels, like))(labels = l, like = k);
                  }}) {
    const auto oh = f(lt, liket);
    REQUIRE(oh.shape() == kiln::Shape{5, 4});
    for (std::size_t i = 0; i < 5; ++i)
      for (std::size_t j = 0; j < 4; ++j) CHECK(oh.at({i, j}) == (static_cast<float>(j) == values[i] ? 1.0f : 0.0f));
  }
  // column_index inside a larger program keeps its own rows (they are never collapsed).
  const auto ci = kiln::compile(kiln::column_index(like) * 2.0f + like)(like = liket);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(ci.at({i, j}) == 2.0f * j);
}

TEST_CASE("cross_entropy from labels matches the one-hot form and a float64 reference, with its gradient") {
  constexpr auto z = kiln::param<"z", 2, double>();
  constexpr auto labels64 = kiln::input<"labels", 1, double>();
  constexpr auto targets = kiln::input<"targets", 2, double>();
  const std::size_t B = 9, C = 6;
  const auto zt = kiln::randn<double>({B, C}, 21);
  kiln::Tensor<double> lt({B}), tt({B, C});
  tt.fill(0.0);
  for (std::size_t i = 0; i < B; ++i) {
    lt[i] = static_cast<double>((i * 5 + 2) % C);
    tt.at({i, (i * 5 + 2) % C}) = 1.0;
  }
  const auto from_labels = kiln::nn::cross_entropy(z, labels64);
  const auto from_one_hot = kiln::nn::cross_entropy(z, targets);
  const auto [g_labels] = kiln::grad(from_labels, z);
  const auto [g_one_hot] = kiln::grad<1>(from_one_hot, z);
  auto [l1, d1] = kiln::compile(kiln::outputs(from_labels, g_labels))(z = zt, labels64 = lt);
  auto [l2, d2] = kiln::compile(kiln::outputs(from_one_hot, g_one_hot))(z = zt, targets = tt);
  // Reference: mean over rows of logsumexp(z_i) - z_i[label_i].
  double ref = 0;
  for (std::size_t i = 0; i < B; ++i) {
    double m = -1e300, s = 0;
    for (std::size_t j = 0; j < C; ++j) m = std::max(m, zt.at({i, j}));
    for (std::size_t j = 0; j < C; ++j) s += std::exp(zt.at({i, j}) - m);
    ref += m + std::log(s) - zt.at({i, static_cast<std::size_t>(lt[i])});
  }
  ref /= B;
  CHECK(l1[0] == doctest::Approx(ref).epsilon(1e-12));
  CHECK(l2[0] == doctest::Approx(ref).epsilon(1e-12));
  for (std::size_t i = 0; i < d1.numel(); ++i) CHECK(d1[i] == doctest::Approx(d2[i]).epsilon(1e-12));
  auto f = kiln::compile(from_labels);
  check("cross_entropy from labels", d1, numeric_gradient(zt, [&](const auto& v) { return f(z = v, labels64 = lt)[0]; }));
}

TEST_CASE("cross_entropy from labels treats infinite and NaN logits as PyTorch does") {
  constexpr auto z = kiln::param<"z", 2>();
  const auto loss = kiln::nn::cross_entropy(z, labels);
  const auto [g] = kiln::grad(loss, z);
  auto f = kiln::compile(kiln::outputs(loss, g));
  auto e = kiln::eager(kiln::outputs(loss, g));
  const float inf = std::numeric_limits<float>::infinity();
  kiln::Tensor<float> zt({1, 4}), lt({1});
  const float row[] = {0.5f, -inf, 2.0f, -1.0f};
  for (std::size_t j = 0; j < 4; ++j) zt[j] = row[j];
  // -inf in a column other than the label's: that class has probability 0; the loss is
  // logsumexp over the finite logits minus the label's logit, and finite, as is the gradient
  // (softmax - one_hot, with softmax 0 in the -inf column).
  lt[0] = 2.0f;
  const double lse = std::log(std::exp(0.5) + std::exp(2.0) + std::exp(-1.0));
  const std::tuple<kiln::Tensor<float>, kiln::Tensor<float>> runs[] = {f(z = zt, labels = lt), e(z = zt, labels = lt)};
  for (const auto& [l, d] : runs) {
    CHECK(l[0] == doctest::Approx(lse - 2.0).epsilon(1e-6));
    for (std::size_t j = 0; j < 4; ++j) CHECK(std::isfinite(d[j]));
    CHECK(d[1] == 0.0f);
    CHECK(d[2] == doctest::Approx(std::exp(2.0 - lse) - 1.0).epsilon(1e-5));
  }
  // -inf at the label: the label's probability is 0, the loss +inf.
  lt[0] = 1.0f;
  CHECK(std::get<0>(f(z = zt, labels = lt))[0] == inf);
  CHECK(std::get<0>(e(z = zt, labels = lt))[0] == inf);
  // NaN anywhere in the row: NaN, whatever the label.
  zt[3] = std::nanf("");
  lt[0] = 2.0f;
  CHECK(std::isnan(std::get<0>(f(z = zt, labels = lt))[0]));
  CHECK(std::isnan(std::get<0>(e(z = zt, labels = lt))[0]));
}

TEST_CASE("class labels are checked: out of range, negative, NaN or fractional labels raise ValueError naming the row") {
  kiln::Tensor<float> lt({4});
  const float good[] = {0, 3, 1, 2};
  for (std::size_t i = 0; i < 4; ++i) lt[i] = good[i];
  CHECK_NOTHROW(kiln::nn::check_labels(lt, 4));
  const std::pair<float, const char*> bad[] = {
      {4.0f, "cross_entropy: the label of row 2 is 4, not a class index in [0, 4)"},
      {-1.0f, "cross_entropy: the label of row 2 is -1, not a class index in [0, 4)"},
      {1.5f, "cross_entropy: the label of row 2 is 1.5, not a class index in [0, 4)"},
      {std::nanf(""), "cross_entropy: the label of row 2 is nan, not a class index in [0, 4)"},
      {std::numeric_limits<float>::infinity(), "cross_entropy: the label of row 2 is inf, not a class index in [0, 4)"},
  };
  for (const auto& [value, message] : bad) {
    lt[2] = value;
    CHECK_THROWS_WITH_AS(kiln::nn::check_labels(lt, 4), message, kiln::ValueError);
  }
  CHECK_THROWS_AS(kiln::nn::check_labels(lt, 4), std::invalid_argument);  // ValueError is an invalid_argument
  // The shapes of a call: labels [B] against logits [B, C].
  lt[2] = 1.0f;
  const kiln::Tensor<float> logits({4, 4}), wrong({5, 4});
  CHECK_NOTHROW(kiln::nn::check_labels(lt, logits));
  CHECK_THROWS_WITH_AS(kiln::nn::check_labels(lt, wrong),
                       "cross_entropy: labels [4] do not match logits [5, 4] (labels are [batch], logits [batch, classes])",
                       kiln::ShapeError);
}
