// Reductions on the GPU: the CPU suite's cases (reduce_cases.hpp) with the inputs on the
// device, against the float64 reference with the CPU's tolerances: row kernels (the last axis),
// axis reductions (any other axis) and total reductions (partials per block). "the total reduction does not
// depend on the thread count" stays in the CPU suite: it varies OpenMP's thread count.
#include "../reduce_cases.hpp"

using cases::OnGpu;

TEST_SUITE("reductions on the GPU") {
  using namespace reduce_cases;
  TEST_CASE_FIXTURE(OnGpu, "rank 1") { rank_1(); }
  TEST_CASE_FIXTURE(OnGpu, "rank 2, each axis") { rank_2_each_axis(); }
  TEST_CASE_FIXTURE(OnGpu, "rank 3, each axis") { rank_3_each_axis(); }
  TEST_CASE_FIXTURE(OnGpu, "float64") { float64(); }
  TEST_CASE_FIXTURE(OnGpu, "size-1 and long axes") { size_1_and_long_axes(); }
  TEST_CASE_FIXTURE(OnGpu, "reductions over everything") { over_everything(); }
  TEST_CASE_FIXTURE(OnGpu, "a reduced value broadcast back over its row is one kernel") {
    reduced_value_broadcast_back_is_one_kernel();
  }
  TEST_CASE_FIXTURE(OnGpu, "a cached stage input whose space differs from the output's is recomputed") {
    cached_stage_input_of_another_space_is_recomputed();
  }
}
