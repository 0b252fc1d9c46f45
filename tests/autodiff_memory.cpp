// What a training step keeps between its forward and backward kernels (saved_bytes), its
// intermediate memory, and recomputation: a pointwise value whose operands are stored anyway is
// evaluated again by each kernel that reads it rather than stored.
#include "gradcheck.hpp"

TEST_CASE("an MLP's joint forward and backward program: what it keeps for the backward kernels, and its memory") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto y = kiln::input<"y", 1>();
  constexpr auto w1 = kiln::param<"w1", 2>();
  constexpr auto b1 = kiln::param<"b1", 1>();
  constexpr auto w2 = kiln::param<"w2", 2>();
  constexpr auto b2 = kiln::param<"b2", 1>();
  constexpr auto w3 = kiln::param<"w3", 2>();
  constexpr auto h1 = kiln::relu(kiln::matmul(x, w1) + b1);
  constexpr auto h2 = kiln::relu(kiln::matmul(h1, w2) + b2);
  constexpr auto loss = kiln::nn::cross_entropy(kiln::matmul(h2, w3), y);
  const auto [g1, gb1, g2, gb2, g3] = kiln::grad(loss, w1, b1, w2, b2, w3);
  const auto joint = kiln::outputs(loss, g1, gb1, g2, gb2, g3);
  auto compiled = kiln::compile(joint);
  auto eager = kiln::eager(joint);
  const std::size_t B = 32, D = 24, H = 48, C = 10;
  const auto xt = kiln::randn<float>({B, D}, 1), w1t = kiln::randn<float>({D, H}, 2), w2t = kiln::randn<float>({H, H}, 3);
  const auto w3t = kiln::randn<float>({H, C}, 4), b1t = kiln::randn<float>({H}, 5), b2t = kiln::randn<float>({H}, 6);
  kiln::Tensor<float> yt({B});
  for (std::size_t i = 0; i < B; ++i) yt[i] = static_cast<float>(i % C);
  const auto a = compiled(x = xt, y = yt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t, w3 = w3t);
  const auto e = eager(x = xt, y = yt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t, w3 = w3t);
  CHECK(std::get<0>(a)[0] == doctest::Approx(std::get<0>(e)[0]).epsilon(1e-5));
  MESSAGE(compiled.explain());
  // Kept for the backward kernels: the two relu outputs (operands of the weight-gradient GEMMs;
  // the relu masks are read from them, so the pre-activations are not kept), the log-softmax
  // rows, and |class index - label| (the one-hot targets): (2 H + 2 C) B floats. The rules
  // already read the least, so eager keeps the same values.
  const std::size_t BH = B * H * sizeof(float), BC = B * C * sizeof(float);  // both multiples of 64
  CHECK(compiled.saved_bytes() == 2 * BH + 2 * BC);
  CHECK(eager.saved_bytes() == 2 * BH + 2 * BC);
  // The arena (buffers of 64-byte multiples, placed by liveness) is its peak: in the fused
  // plan, while the second layer's input gradient is formed, h1, h2, the gradient at h2's
  // pre-activation and its product with w2^T ([B, H] each) and the softmax gradient [B, C]
  // (read again by dW3's GEMM) are alive together: 4 BH + BC. Eager stores every intermediate
  // value, and its peak holds six [B, H] values and that [B, C] one: 6 BH + BC.
  CHECK(compiled.intermediate_bytes() == 4 * BH + BC);
  CHECK(eager.intermediate_bytes() == 6 * BH + BC);
  MESSAGE("saved bytes: compiled " << compiled.saved_bytes() << ", eager " << eager.saved_bytes()
                                   << "; intermediate bytes: compiled " << compiled.intermediate_bytes() << ", eager "
                                   << eager.intermediate_bytes());
}

TEST_CASE("recomputation: the step keeps z, not both z and sigmoid(z), for a SiLU written by hand") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto y = kiln::input<"y", 1>();
  constexpr auto w1 = kiln::param<"w1", 2>();
  constexpr auto w2 = kiln::param<"w2", 2>();
  constexpr auto z = kiln::matmul(x, w1);
  constexpr auto h = z * kiln::sigmoid(z);  // SiLU: the backward reads z and sigmoid(z)
  constexpr auto loss = kiln::nn::cross_entropy(kiln::matmul(h, w2), y);
  const auto [g1, g2] = kiln::grad(loss, w1, w2);
  const auto joint = kiln::outputs(loss, g1, g2);
  auto compiled = kiln::compile(joint);
  auto eager = kiln::eager(joint);
  const std::size_t B = 16, D = 12, H = 40, C = 5;
  const auto xt = kiln::randn<float>({B, D}, 1), w1t = kiln::randn<float>({D, H}, 2), w2t = kiln::randn<float>({H, C}, 3);
  kiln::Tensor<float> yt({B});
  for (std::size_t i = 0; i < B; ++i) yt[i] = static_cast<float>(i % C);
  const auto a = compiled(x = xt, y = yt, w1 = w1t, w2 = w2t);
  const auto e = eager(x = xt, y = yt, w1 = w1t, w2 = w2t);
  for (std::size_t i = 0; i < std::get<1>(a).numel(); ++i)
    CHECK(std::get<1>(a)[i] == doctest::Approx(std::get<1>(e)[i]).epsilon(1e-4).scale(1e-3));
  const std::string plan = compiled.explain();
  MESSAGE(plan);
  CHECK(plan.find("sigmoid") != std::string::npos);
  CHECK(plan.find("recomputes") != std::string::npos);
  // The fused step keeps z and h = z sigmoid(z) ([B, H] each: z for the rule of sigmoid, which
  // it recomputes, h for dW2's GEMM), |class index - label| and the log-softmax rows ([B, C]
  // each): (2 H + 2 C) B floats. Eager keeps sigmoid(z) too: B H floats more.
  const std::size_t BH = B * H * sizeof(float), BC = B * C * sizeof(float);
  CHECK(compiled.saved_bytes() == 2 * BH + 2 * BC);
  CHECK(eager.saved_bytes() == 3 * BH + 2 * BC);
  MESSAGE("saved bytes: compiled " << compiled.saved_bytes() << ", eager " << eager.saved_bytes());
}
