// A compiled training step (MLP, ReLU, cross-entropy on class labels, AdamW, every update an
// in-place kiln::assign) on the GPU in ReduceOverhead (CUDA graphs) and Default, against the
// same step in float64 on the CPU over 5 and 100 steps: losses and every parameter and moment,
// and in ReduceOverhead one graph captured for a loop of fresh batches and kept losses.
#include "../reference.hpp"

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

namespace {

template <class T>
struct Mlp {
  static constexpr auto x = kiln::input<"x", 2, T>();
  static constexpr auto y = kiln::input<"y", 1, T>();
  static constexpr auto t = kiln::input<"t", 0, T>();
  static constexpr auto w1 = kiln::param<"w1", 2, T>();
  static constexpr auto b1 = kiln::param<"b1", 1, T>();
  static constexpr auto w2 = kiln::param<"w2", 2, T>();
  static constexpr auto b2 = kiln::param<"b2", 1, T>();
  static constexpr auto mw1 = kiln::param<"mw1", 2, T>();
  static constexpr auto vw1 = kiln::param<"vw1", 2, T>();
  static constexpr auto mb1 = kiln::param<"mb1", 1, T>();
  static constexpr auto vb1 = kiln::param<"vb1", 1, T>();
  static constexpr auto mw2 = kiln::param<"mw2", 2, T>();
  static constexpr auto vw2 = kiln::param<"vw2", 2, T>();
  static constexpr auto mb2 = kiln::param<"mb2", 1, T>();
  static constexpr auto vb2 = kiln::param<"vb2", 1, T>();
  static auto step() {
    constexpr auto logits = kiln::matmul(kiln::relu(kiln::matmul(x, w1) + b1), w2) + b2;
    constexpr auto loss = kiln::nn::cross_entropy(logits, y);
    const auto [g1, gb1, g2, gb2] = kiln::grad(loss, w1, b1, w2, b2);
    const auto opt = [](auto w, auto m, auto v, auto g) { return kiln::nn::adamw(w, m, v, g, t, 1e-2, 0.9, 0.999, 1e-8, 1e-2); };
    return std::apply([&](const auto&... a) { return kiln::outputs(loss, a...); },
                      std::tuple_cat(opt(w1, mw1, vw1, g1), opt(b1, mb1, vb1, gb1), opt(w2, mw2, vw2, g2), opt(b2, mb2, vb2, gb2)));
  }
  // w1, b1, w2, b2 and their moments, in that order.
  std::vector<kiln::Tensor<T>> state;
  template <class F>
  T run(F& f, const kiln::Tensor<T>& xt, const kiln::Tensor<T>& yt, const kiln::Tensor<T>& tt) {
    auto& s = state;
    auto [l] = f(x = xt, y = yt, t = tt, w1 = s[0], b1 = s[1], w2 = s[2], b2 = s[3], mw1 = s[4], vw1 = s[5], mb1 = s[6],
                 vb1 = s[7], mw2 = s[8], vw2 = s[9], mb2 = s[10], vb2 = s[11]);
    return l.to(kiln::Device::cpu())[0];
  }
  // The step, its loss left on the device.
  template <class F>
  kiln::Tensor<T> keep_loss(F& f, const kiln::Tensor<T>& xt, const kiln::Tensor<T>& yt, const kiln::Tensor<T>& tt) {
    auto& s = state;
    auto [l] = f(x = xt, y = yt, t = tt, w1 = s[0], b1 = s[1], w2 = s[2], b2 = s[3], mw1 = s[4], vw1 = s[5], mb1 = s[6],
                 vb1 = s[7], mw2 = s[8], vw2 = s[9], mb2 = s[10], vb2 = s[11]);
    return std::move(l);
  }
};

template <class T>
kiln::Tensor<T> cast(const kiln::Tensor<float>& a) {
  kiln::Tensor<T> t(a.shape());
  for (std::size_t i = 0; i < a.numel(); ++i) t[i] = static_cast<T>(a[i]);
  return t;
}

// steps training steps on fresh random batches; the GPU's losses are kept on the device (as a
// logger keeps them), and its batches uploaded at each step.
template <class Policy>
void check_against_float64(int steps) {
  constexpr std::size_t B = 32, In = 20, H = 48, C = 7;
  const std::vector<kiln::Tensor<float>> init = {
      kiln::randn<float>({In, H}, 1), kiln::randn<float>({H}, 2), kiln::randn<float>({H, C}, 3), kiln::randn<float>({C}, 4)};
  Mlp<double> cpu;
  Mlp<float> gpu;
  for (int k = 0; k < 3; ++k)
    for (const auto& p : init) {
      kiln::Tensor<float> z(p.shape());
      z.fill(0.f);
      const auto& v = k == 0 ? p : z;
      for (std::size_t i = 0; i < v.numel(); ++i) z[i] = k == 0 ? v[i] * 0.2f : 0.f;
      cpu.state.push_back(cast<double>(z));
      gpu.state.push_back(z.cuda());
    }
  // reorder to w, b, ... then moments m, v per parameter as Mlp::run binds them
  auto reorder = [](auto& s) {
    auto t = std::move(s);
    s.clear();
    for (int i = 0; i < 4; ++i) s.push_back(std::move(t[i]));
    for (int i = 0; i < 4; ++i) {
      s.push_back(std::move(t[4 + i]));
      s.push_back(std::move(t[8 + i]));
    }
  };
  reorder(cpu.state);
  reorder(gpu.state);
  auto fc = kiln::compile<kiln::ReduceOverhead>(Mlp<double>::step());
  auto fg = kiln::compile<Policy>(Mlp<float>::step());
  std::vector<double> cpu_losses;
  std::vector<kiln::Tensor<float>> gpu_losses, batches;
  for (int step = 1; step <= steps; ++step) {
    const auto xf = kiln::randn<float>({B, In}, 100 + step);
    kiln::Tensor<float> yf({B});
    for (std::size_t i = 0; i < B; ++i) yf[i] = static_cast<float>((i * 7 + step) % C);
    kiln::Tensor<float> tf({});
    tf[0] = static_cast<float>(step);
    cpu_losses.push_back(cpu.run(fc, cast<double>(xf), cast<double>(yf), cast<double>(tf)));
    for (const kiln::Tensor<float>* t : {&xf, static_cast<const kiln::Tensor<float>*>(&yf), static_cast<const kiln::Tensor<float>*>(&tf)})
      batches.push_back(t->cuda());  // kept: new addresses every step
    gpu_losses.push_back(gpu.keep_loss(fg, batches[batches.size() - 3], batches[batches.size() - 2], batches.back()));
  }
  for (int step = 1; step <= steps; ++step) {
    const double lc = cpu_losses[static_cast<std::size_t>(step - 1)];
    const double lg = gpu_losses[static_cast<std::size_t>(step - 1)].cpu()[0];
    CAPTURE(step);
    CHECK(std::abs(lg - lc) <= 1e-4 * std::abs(lc) + 1e-5);
  }
  if constexpr (kiln::runtime::Policy<Policy>::persistent) {
    // Fresh batches and kept losses on every step: the second step captures the staged graph,
    // every later one replays it.
    CHECK(fg.graph_captures() == 1);
    CHECK(fg.graph_replays() == steps - 2);
  }
  for (std::size_t p = 0; p < cpu.state.size(); ++p) {
    CAPTURE(p);
    ref::check_close(gpu.state[p].cpu(), ref::from(cpu.state[p]), 2e-3, 2e-4);
  }
}

}  // namespace

TEST_CASE("training step on the GPU, ReduceOverhead (CUDA graphs), against float64 on the CPU") {
  check_against_float64<kiln::ReduceOverhead>(5);
}
TEST_CASE("100 training steps on the GPU in ReduceOverhead, fresh batches, kept losses: one capture") {
  check_against_float64<kiln::ReduceOverhead>(100);
}
TEST_CASE("training step on the GPU, Default, against float64 on the CPU") { check_against_float64<kiln::Default>(5); }

// The gradients of a layer norm's weight and bias over 2048 rows: column sums of a long fused
// expression (the normalised input recomputed from its statistics). The shape asks for blocks of
// 1024 threads, more than that kernel's registers allow: launched with as many as fit.
TEST_CASE("layer norm's weight and bias gradients over 2048 rows on the GPU, against float64") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto dy = kiln::input<"dy", 2>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  const auto [dg, db] = kiln::grad(kiln::sum(kiln::layer_norm(x, g, b) * dy), g, b);
  auto f = kiln::compile(kiln::outputs(dg, db));
  constexpr std::size_t R = 2048, C = 128;
  const auto xt = kiln::randn<float>({R, C}, 1), dyt = kiln::randn<float>({R, C}, 2);
  const auto gt = kiln::randn<float>({C}, 3), bt = kiln::randn<float>({C}, 4);
  auto [dgd, dbd] = f(x = xt.cuda(), dy = dyt.cuda(), g = gt.cuda(), b = bt.cuda());
  const auto dgh = dgd.cpu(), dbh = dbd.cpu();
  for (std::size_t c = 0; c < C; ++c) {
    double want_g = 0, want_b = 0;
    for (std::size_t r = 0; r < R; ++r) {
      double mean = 0, var = 0;
      for (std::size_t k = 0; k < C; ++k) mean += xt[r * C + k];
      mean /= C;
      for (std::size_t k = 0; k < C; ++k) var += (xt[r * C + k] - mean) * (xt[r * C + k] - mean);
      var /= C;
      want_g += (xt[r * C + c] - mean) / std::sqrt(var + 1e-5) * dyt[r * C + c];
      want_b += dyt[r * C + c];
    }
    CAPTURE(c);
    CHECK(dgh[c] == doctest::Approx(want_g).epsilon(1e-4).scale(1e-2));
    CHECK(dbh[c] == doctest::Approx(want_b).epsilon(1e-4).scale(1e-2));
  }
}

TEST_SUITE_END();
