// write_slice, and extract, insert and zero_window at run-time positions: the cases are in
// window_cases.hpp (DEVICE_CASE: the GPU runs them too); forward mode here.
#include "window_cases.hpp"

using namespace window_cases;

DEVICE_CASE("write_slice at run-time positions", write_slice_at_run_time_positions())
DEVICE_CASE("extract, insert and zero_window at run-time positions", extract_insert_and_zero_window())
DEVICE_CASE("decode steps write a static KV cache in place", decode_steps_write_the_cache_in_place())
DEVICE_CASE("write_slice assigned while a later kernel reads the old value", old_value_read_after_the_write())
DEVICE_CASE("write_slice positions past the axis and bad shapes", positions_past_the_axis_and_bad_shapes())
DEVICE_CASE("gradients of write_slice, extract and insert at run-time positions", gradients())

TEST_CASE("jvp of write_slice") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto s = kiln::input<"s", 2, double>();
  constexpr auto dx = kiln::input<"dx", 2, double>();
  constexpr auto ds = kiln::input<"ds", 2, double>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  constexpr auto y = kiln::write_slice<1>(kiln::square(x), pos, s);
  auto both = kiln::compile(kiln::jvp(y, kiln::tangent(x, dx), kiln::tangent(s, ds)));
  auto only_s = kiln::compile(kiln::jvp(y, kiln::tangent(s, ds)));
  auto only_x = kiln::compile(kiln::jvp(y, kiln::tangent(x, dx)));
  const auto xt = kiln::randn<double>({3, 6}, 950), st = kiln::randn<double>({3, 2}, 951);
  const auto dxt = kiln::randn<double>({3, 6}, 952), dst = kiln::randn<double>({3, 2}, 953);
  const auto pt = kiln::from_vector<kiln::i64>({3}, kiln::Shape{});
  const auto a = both(x = xt, s = st, dx = dxt, ds = dst, pos = pt);
  const auto b = only_s(x = xt, s = st, ds = dst, pos = pt);
  const auto c = only_x(x = xt, s = st, dx = dxt, pos = pt);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 6; ++j) {
      const bool in = j >= 3 && j < 5;
      const double from_s = in ? dst[i * 2 + j - 3] : 0.0, from_x = in ? 0.0 : 2 * xt[i * 6 + j] * dxt[i * 6 + j];
      CHECK(std::abs(a[i * 6 + j] - (from_s + from_x)) <= 1e-12);
      CHECK(std::abs(b[i * 6 + j] - from_s) <= 1e-12);
      CHECK(std::abs(c[i * 6 + j] - from_x) <= 1e-12);
    }
}
