// W5, a training step: an MLP 784-1024-1024-10 with ReLU, cross-entropy against class labels
// and AdamW (lr 1e-3) on every weight and bias; batch 256, f32. The step, its host-side state
// and its flop and byte counts, shared by bench_train (CPU) and bench_gpu_train (CUDA).
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "common.hpp"

namespace w5 {

constexpr std::size_t kBatch = 256, kIn = 784, kHidden = 1024, kOut = 10;

constexpr auto x = kiln::input<"x", 2>();
constexpr auto y = kiln::input<"y", 1>();
constexpr auto t = kiln::input<"t", 0>();
constexpr auto w1 = kiln::param<"w1", 2>();
constexpr auto b1 = kiln::param<"b1", 1>();
constexpr auto w2 = kiln::param<"w2", 2>();
constexpr auto b2 = kiln::param<"b2", 1>();
constexpr auto w3 = kiln::param<"w3", 2>();
constexpr auto b3 = kiln::param<"b3", 1>();
constexpr auto m_w1 = kiln::param<"m_w1", 2>();
constexpr auto v_w1 = kiln::param<"v_w1", 2>();
constexpr auto m_b1 = kiln::param<"m_b1", 1>();
constexpr auto v_b1 = kiln::param<"v_b1", 1>();
constexpr auto m_w2 = kiln::param<"m_w2", 2>();
constexpr auto v_w2 = kiln::param<"v_w2", 2>();
constexpr auto m_b2 = kiln::param<"m_b2", 1>();
constexpr auto v_b2 = kiln::param<"v_b2", 1>();
constexpr auto m_w3 = kiln::param<"m_w3", 2>();
constexpr auto v_w3 = kiln::param<"v_w3", 2>();
constexpr auto m_b3 = kiln::param<"m_b3", 1>();
constexpr auto v_b3 = kiln::param<"v_b3", 1>();

constexpr auto hidden = kiln::relu(kiln::matmul(kiln::relu(kiln::matmul(x, w1) + b1), w2) + b2);
constexpr auto loss = kiln::nn::cross_entropy(kiln::matmul(hidden, w3) + b3, y);

auto w5_step() {
  const auto [g_w1, g_b1, g_w2, g_b2, g_w3, g_b3] = kiln::grad(loss, w1, b1, w2, b2, w3, b3);
  const auto adamw = [](auto w, auto m, auto v, auto g) { return kiln::nn::adamw(w, m, v, g, t, 1e-3); };
  return std::apply([](const auto&... a) { return kiln::outputs(loss, a...); },
                    std::tuple_cat(adamw(w1, m_w1, v_w1, g_w1), adamw(b1, m_b1, v_b1, g_b1), adamw(w2, m_w2, v_w2, g_w2),
                                   adamw(b2, m_b2, v_b2, g_b2), adamw(w3, m_w3, v_w3, g_w3), adamw(b3, m_b3, v_b3, g_b3)));
}

// Parameters (scaled like PyTorch's default init), zero moments, a batch with random labels.
struct State {
  kiln::Tensor<float> xt = kiln::randn<float>({kBatch, kIn}, 1), yt{kBatch}, tt{kiln::Shape{}};
  kiln::Tensor<float> w1t = kiln::randn<float>({kIn, kHidden}, 2), b1t{kHidden};
  kiln::Tensor<float> w2t = kiln::randn<float>({kHidden, kHidden}, 3), b2t{kHidden};
  kiln::Tensor<float> w3t = kiln::randn<float>({kHidden, kOut}, 4), b3t{kOut};
  kiln::Tensor<float> mw1{kIn, kHidden}, vw1{kIn, kHidden}, mb1{kHidden}, vb1{kHidden};
  kiln::Tensor<float> mw2{kHidden, kHidden}, vw2{kHidden, kHidden}, mb2{kHidden}, vb2{kHidden};
  kiln::Tensor<float> mw3{kHidden, kOut}, vw3{kHidden, kOut}, mb3{kOut}, vb3{kOut};
  State() {
    for (auto* z : {&b1t, &b2t, &b3t, &mw1, &vw1, &mb1, &vb1, &mw2, &vw2, &mb2, &vb2, &mw3, &vw3, &mb3, &vb3})
      z->fill(0.0f);
    for (std::size_t i = 0; i < w1t.numel(); ++i) w1t[i] /= std::sqrt(float(kIn));
    for (std::size_t i = 0; i < w2t.numel(); ++i) w2t[i] /= std::sqrt(float(kHidden));
    for (std::size_t i = 0; i < w3t.numel(); ++i) w3t[i] /= std::sqrt(float(kHidden));
    for (std::size_t i = 0; i < kBatch; ++i) yt[i] = static_cast<float>((i * 7) % kOut);  // as the PyTorch peer
    tt[0] = 0.0f;
  }
  template <class F>
  void step(F& f) {
    tt[0] += 1.0f;
    benchmark::DoNotOptimize(f(x = xt, y = yt, t = tt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t, w3 = w3t, b3 = b3t, m_w1 = mw1,
                               v_w1 = vw1, m_b1 = mb1, v_b1 = vb1, m_w2 = mw2, v_w2 = vw2, m_b2 = mb2, v_b2 = vb2, m_w3 = mw3,
                               v_w3 = vw3, m_b3 = mb3, v_b3 = vb3));
  }
};

// Forward 2 B (784 1024 + 1024 1024 + 1024 10); backward: every weight gradient, and the
// input gradients of layers 2 and 3.
constexpr double kForward = 2.0 * kBatch * (kIn * kHidden + kHidden * kHidden + kHidden * kOut);
constexpr double kFlops = 2 * kForward + 2.0 * kBatch * (kHidden * kHidden + kHidden * kOut);
// Minimum traffic: the batch, and each parameter and its two moments read and written.
constexpr double kParams = kIn * kHidden + kHidden + kHidden * kHidden + kHidden + kHidden * kOut + kOut;
constexpr double kBytes = 4.0 * (kBatch * (kIn + 1) + 6 * kParams);

// KILN_W5_PROFILE=1: after the timed loop, 20 profiled steps and the plan with each kernel's
// time (Compiled::profile), on stderr.
template <class F, class S>
void print_profile_if_asked(F& f, S& state) {
  if (!std::getenv("KILN_W5_PROFILE")) return;
  f.profile();
  for (int i = 0; i < 20; ++i) state.step(f);
  std::fprintf(stderr, "%s\n", f.explain().c_str());
}

}  // namespace w5
