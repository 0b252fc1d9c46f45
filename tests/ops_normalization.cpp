// softmax, log_softmax and layer_norm against the float64 reference; each is one row kernel.
#include "reference.hpp"

namespace {

template <int Rank, class T>
void check_softmax(const kiln::Shape& shape, double scale) {
  constexpr auto x = kiln::input<"x", Rank, T>();
  auto f = kiln::compile(kiln::outputs(kiln::softmax(x * 1.0), kiln::log_softmax(x)));
  auto e = kiln::eager(kiln::outputs(kiln::softmax(x * 1.0), kiln::log_softmax(x)));
  const auto xt0 = kiln::randn<T>(shape, 81);
  kiln::Tensor<T> xt = xt0;
  for (std::size_t i = 0; i < xt.numel(); ++i) xt[i] *= static_cast<T>(scale);
  const auto rx = ref::from(xt);
  INFO("shape " << shape.str() << " scale " << scale);
  const double rtol = std::is_same_v<T, float> ? 5e-5 : 1e-11;
  for (int pass = 0; pass < 2; ++pass) {
    auto [s, l] = pass ? e(x = xt) : f(x = xt);
    ref::check_close(s, ref::softmax(rx), rtol, 1e-7);
    ref::check_close(l, ref::log_softmax(rx), rtol, 1e-5);
  }
}

}  // namespace

TEST_CASE("softmax and log_softmax, f32 and f64, with large logits") {
  check_softmax<2, float>({33, 1000}, 1.0);
  check_softmax<2, float>({8, 65}, 100.0);  // needs the max subtraction to stay finite
  check_softmax<1, float>({129}, 3.0);
  check_softmax<3, float>({2, 3, 17}, 1.0);
  check_softmax<2, double>({9, 50}, 10.0);
}

TEST_CASE("softmax and log_softmax are one kernel each") {
  constexpr auto x = kiln::input<"x", 2>();
  CHECK(kiln::compile(kiln::softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::log_softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::softmax(x * 0.125f)).kernel_count() == 1);
}

TEST_CASE("add + layer_norm, one kernel, f32 and f64") {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto r = kiln::input<"r", 3>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  auto f = kiln::compile(kiln::layer_norm(x + r, g, b, 1e-5));
  auto e = kiln::eager(kiln::layer_norm(x + r, g, b, 1e-5));
  CHECK(f.kernel_count() == 1);
  const auto xt = kiln::randn<float>({3, 17, 768}, 82), rt = kiln::randn<float>({3, 17, 768}, 83);
  const auto gt = kiln::randn<float>({768}, 84), bt = kiln::randn<float>({768}, 85);
  const auto want = ref::layer_norm(ref::zip(ref::from(xt), ref::from(rt), [](double p, double q) { return p + q; }),
                                    ref::from(gt), ref::from(bt), 1e-5);
  ref::check_close(f(x = xt, r = rt, g = gt, b = bt), want, 1e-4, 1e-5);
  ref::check_close(e(x = xt, r = rt, g = gt, b = bt), want, 1e-4, 1e-5);

  constexpr auto xd = kiln::input<"xd", 2, double>();
  constexpr auto gd = kiln::param<"gd", 1, double>();
  constexpr auto bd = kiln::param<"bd", 1, double>();
  auto fd = kiln::compile(kiln::layer_norm(xd, gd, bd, 1e-12));
  const auto xdt = kiln::randn<double>({5, 40}, 86), gdt = kiln::randn<double>({40}, 87), bdt = kiln::randn<double>({40}, 88);
  ref::check_close(fd(xd = xdt, gd = gdt, bd = bdt), ref::layer_norm(ref::from(xdt), ref::from(gdt), ref::from(bdt), 1e-12), 1e-11, 1e-12);
}
