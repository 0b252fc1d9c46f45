// embedding and scatter_add_rows: the cases are in index_cases.hpp (DEVICE_CASE: the GPU runs
// them too); integer tensors and forward mode here.
#include "index_cases.hpp"

using namespace index_cases;

DEVICE_CASE("embedding gathers rows by i32 and i64 ids", embedding_gathers_rows())
DEVICE_CASE("embedding reads a strided table", embedding_reads_a_strided_table())
DEVICE_CASE("scatter_add_rows sums repeated ids", scatter_add_rows_sums_repeated_ids())
DEVICE_CASE("scatter_add_rows is deterministic", scatter_add_rows_is_deterministic())
DEVICE_CASE("embedding and scatter_add_rows of a bf16 table", a_16_bit_table())
DEVICE_CASE("ids outside the table", ids_outside_the_table())
DEVICE_CASE("gradients of embedding and scatter_add_rows", gradients())

TEST_CASE("jvp of embedding") {
  constexpr auto x = kiln::input<"ids", 1, kiln::i32>();
  constexpr auto t = kiln::input<"t", 2, double>();
  constexpr auto dt = kiln::input<"dt", 2, double>();
  auto f = kiln::compile(kiln::jvp(kiln::square(kiln::embedding(x, t)), kiln::tangent(t, dt)));
  const auto a = kiln::randint<kiln::i32>(0, 5, {7}, 430);
  const auto tt = kiln::randn<double>({5, 3}, 431), dtt = kiln::randn<double>({5, 3}, 432);
  const auto got = f(x = a, t = tt, dt = dtt);
  REQUIRE(got.shape() == kiln::Shape{7, 3});
  for (std::size_t p = 0; p < 7; ++p)
    for (std::size_t j = 0; j < 3; ++j) {
      const auto k = static_cast<std::size_t>(a[p]) * 3 + j;
      CHECK(std::abs(got[p * 3 + j] - 2 * tt[k] * dtt[k]) <= 1e-12);
    }
}

TEST_CASE("integer tensors: factories, printing, devices") {
  const auto a = kiln::randint<kiln::i32>(-3, 4, {2, 50}, 433);
  bool in_range = true, both_ends = false;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    in_range = in_range && a[i] >= -3 && a[i] < 4;
    both_ends = both_ends || a[i] == -3 || a[i] == 3;
  }
  CHECK(in_range);
  CHECK(both_ends);
  CHECK(a.dtype() == std::string("i32"));
  CHECK_THROWS_AS(kiln::randint(5, 5, {3}), kiln::ValueError);
  CHECK(kiln::to_string(kiln::arange<kiln::i64>(0, 4)) == "tensor([0, 1, 2, 3], dtype=i64)");
  CHECK(kiln::full<kiln::i64>({2}, 7)[1] == 7);
  const auto v = kiln::from_vector<kiln::i64>({5, -2, 9}, kiln::Shape{3});
  CHECK(v[1] == -2);
}
