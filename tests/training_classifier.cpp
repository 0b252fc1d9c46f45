// A compiled training step end to end: an MLP classifier (cross-entropy, AdamW) learns three
// separable classes; forward, backward and update run as one program.
#include "reference.hpp"

TEST_CASE("a small classifier learns with the compiled step") {
  // Two Gaussian blobs per class in 4-D, 3 classes, an MLP 4-16-3 with AdamW.
  constexpr auto xs = kiln::input<"xs", 2>();
  constexpr auto ys = kiln::input<"ys", 2>();
  constexpr auto w1 = kiln::param<"w1", 2>();
  constexpr auto b1 = kiln::param<"b1", 1>();
  constexpr auto w2 = kiln::param<"w2", 2>();
  constexpr auto step_t = kiln::input<"t", 0>();
  constexpr auto logits = kiln::matmul(kiln::relu(kiln::matmul(xs, w1) + b1), w2);
  constexpr auto loss = kiln::nn::cross_entropy(logits, ys);
  auto [g1, gb, g2] = kiln::grad(loss, w1, b1, w2);
  constexpr auto m1 = kiln::param<"m1", 2>();
  constexpr auto v1 = kiln::param<"v1", 2>();
  constexpr auto mb = kiln::param<"mb", 1>();
  constexpr auto vb = kiln::param<"vb", 1>();
  constexpr auto m2 = kiln::param<"m2", 2>();
  constexpr auto v2 = kiln::param<"v2", 2>();
  auto [a1, a2, a3] = kiln::nn::adamw(w1, m1, v1, g1, step_t, 0.05, 0.9, 0.999, 1e-8, 0.0);
  auto [a4, a5, a6] = kiln::nn::adamw(b1, mb, vb, gb, step_t, 0.05, 0.9, 0.999, 1e-8, 0.0);
  auto [a7, a8, a9] = kiln::nn::adamw(w2, m2, v2, g2, step_t, 0.05, 0.9, 0.999, 1e-8, 0.0);
  auto step = kiln::compile<kiln::ReduceOverhead>(kiln::outputs(loss, a1, a2, a3, a4, a5, a6, a7, a8, a9));
  const std::size_t B = 96;
  kiln::Tensor<float> xt = kiln::randn<float>({B, 4}, 7), yt({B, 3});
  yt.fill(0.0f);
  for (std::size_t i = 0; i < B; ++i) {
    const std::size_t c = i % 3;
    yt.at({i, c}) = 1.0f;
    xt.at({i, c}) += 3.0f;  // the class shifts one coordinate
  }
  auto w1t = kiln::randn<float>({4, 16}, 8), w2t = kiln::randn<float>({16, 3}, 9);
  for (std::size_t i = 0; i < w1t.numel(); ++i) w1t[i] *= 0.5f;
  for (std::size_t i = 0; i < w2t.numel(); ++i) w2t[i] *= 0.25f;
  kiln::Tensor<float> b1t({16}), m1t({4, 16}), v1t({4, 16}), mbt({16}), vbt({16}), m2t({16, 3}), v2t({16, 3}), tt(kiln::Shape{});
  for (auto* z : {&b1t, &m1t, &v1t, &mbt, &vbt, &m2t, &v2t}) z->fill(0.0f);
  float first = 0, last = 0;
  for (int s = 1; s <= 60; ++s) {
    tt[0] = static_cast<float>(s);
    auto [l] = step(xs = xt, ys = yt, w1 = w1t, b1 = b1t, w2 = w2t, m1 = m1t, v1 = v1t, mb = mbt, vb = vbt, m2 = m2t,
                    v2 = v2t, step_t = tt);
    (s == 1 ? first : last) = l[0];
  }
  CHECK(first > 0.5f);
  CHECK(last < 0.1f * first);
  // Accuracy on the training set.
  auto predict = kiln::compile(logits);
  const auto out = predict(xs = xt, w1 = w1t, b1 = b1t, w2 = w2t);
  int correct = 0;
  for (std::size_t i = 0; i < B; ++i) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < 3; ++c)
      if (out.at({i, c}) > out.at({i, best})) best = c;
    correct += best == i % 3;
  }
  CHECK(correct >= 90);
}
