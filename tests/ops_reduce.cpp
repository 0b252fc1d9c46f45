// Reductions: the cases are in reduce_cases.hpp (DEVICE_CASE: the GPU runs them too), plus one
// that only the CPU has.
#include "reduce_cases.hpp"

using namespace reduce_cases;

DEVICE_CASE("rank 1", rank_1())
DEVICE_CASE("rank 2, each axis", rank_2_each_axis())
DEVICE_CASE("rank 3, each axis", rank_3_each_axis())
DEVICE_CASE("float64", float64())
DEVICE_CASE("size-1 and long axes", size_1_and_long_axes())
DEVICE_CASE("reductions over everything", over_everything())
DEVICE_CASE("column sums of a broadcast's gradient over many rows", column_sums_of_many_rows())

// CPU only: it varies the OpenMP thread count (the GPU's total reduction has no such knob).
TEST_CASE("the total reduction does not depend on the thread count") {
  constexpr auto x = kiln::input<"x", 1>();
  auto f = kiln::compile(kiln::sum(x));
  const auto xt = kiln::randn<float>({1 << 20}, 44);
  const float a = f(x = xt)[0];
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const float b = f(x = xt)[0];
  omp_set_num_threads(threads);
  CHECK(a == b);
#endif
  ref::check_close(f(x = xt), ref::reduce_all(ref::from(xt), ref::Red::Sum), 1e-4, 1e-3);
}

DEVICE_CASE("a reduced value broadcast back over its row is one kernel", reduced_value_broadcast_back_is_one_kernel())
DEVICE_CASE("a cached stage input whose space differs from the output's is recomputed",
            cached_stage_input_of_another_space_is_recomputed())
