// Broadcasting, layout (transpose, reshape), axis copies (concat, slice) and rope on the GPU: the
// CPU suites' cases (broadcast_cases.hpp, layout_cases.hpp, axis_copy_cases.hpp,
// rotary_cases.hpp) with the inputs on the device, against the float64 reference with the CPU's
// tolerances. Part of test_cuda_ops_suites.
#include "../axis_copy_cases.hpp"
#include "../broadcast_cases.hpp"
#include "../layout_cases.hpp"
#include "../rotary_cases.hpp"

using cases::OnGpu;

TEST_SUITE("broadcast on the GPU") {
  using namespace broadcast_cases;
  TEST_CASE_FIXTURE(OnGpu, "equal shapes") { equal_shapes(); }
  TEST_CASE_FIXTURE(OnGpu, "a row vector against a matrix") { row_vector_against_matrix(); }
  TEST_CASE_FIXTURE(OnGpu, "a column against a matrix") { column_against_matrix(); }
  TEST_CASE_FIXTURE(OnGpu, "an outer product of size-1 dims") { outer_product_of_size_1_dims(); }
  TEST_CASE_FIXTURE(OnGpu, "a rank-0 tensor on either side") { rank_0_on_either_side(); }
  TEST_CASE_FIXTURE(OnGpu, "rank mismatch with size-1 dims in the middle") { rank_mismatch_with_size_1_dims(); }
  TEST_CASE_FIXTURE(OnGpu, "rank 4 against rank 3") { rank_4_against_rank_3(); }
  TEST_CASE_FIXTURE(OnGpu, "long rows (300001 elements)") { long_rows(); }
  TEST_CASE_FIXTURE(OnGpu, "a pointwise chain over mixed broadcasts fuses into one kernel") {
    mixed_broadcast_chain_is_one_kernel();
  }
}

TEST_SUITE("layout on the GPU") {
  using namespace layout_cases;
  TEST_CASE_FIXTURE(OnGpu, "transpose feeds a pointwise kernel through strides") { transpose_feeds_pointwise_through_strides(); }
  TEST_CASE_FIXTURE(OnGpu, "transpose of a computed value") { transpose_of_computed_value(); }
  TEST_CASE_FIXTURE(OnGpu, "reshape, with an inferred extent") { reshape_with_inferred_extent(); }
  TEST_CASE_FIXTURE(OnGpu, "a reshape of a transpose copies it first") { reshape_of_transpose_copies_first(); }
  TEST_CASE_FIXTURE(OnGpu, "outputs that are views or inputs are copied") { outputs_that_are_views_or_inputs_are_copied(); }
  TEST_CASE_FIXTURE(OnGpu, "permute, and transpose of any two axes") { permute_and_transpose_of_any_two_axes(); }
  TEST_CASE_FIXTURE(OnGpu, "permuted GEMM operands") { permuted_gemm_operands(); }
  TEST_CASE_FIXTURE(OnGpu, "a reshape of a permute, and a permuted output, are copies") {
    reshape_of_permute_and_permuted_output_copy();
  }
  TEST_CASE_FIXTURE(OnGpu, "gradients of permute and transpose") { permute_gradients(); }
  TEST_CASE_FIXTURE(OnGpu, "unflatten and flatten the heads of an attention layer") { unflatten_and_flatten_heads(); }
  TEST_CASE_FIXTURE(OnGpu, "patch_embed is a strided convolution") { patch_embed_is_a_strided_convolution(); }
}

TEST_SUITE("axis copies on the GPU") {
  using namespace axis_copy_cases;
  TEST_CASE_FIXTURE(OnGpu, "concat along each axis") { concat_along_each_axis(); }
  TEST_CASE_FIXTURE(OnGpu, "concat reads views and computed values") { concat_reads_views_and_computed_values(); }
  TEST_CASE_FIXTURE(OnGpu, "slice along a middle and the last axis") { slice_along_a_middle_and_the_last_axis(); }
  TEST_CASE_FIXTURE(OnGpu, "bad shapes are errors naming the op and the shapes") { bad_shapes_are_errors(); }
  TEST_CASE_FIXTURE(OnGpu, "a bf16 concat") { a_16_bit_concat(); }
  TEST_CASE_FIXTURE(OnGpu, "gradients of concat, slice, extract and insert") { gradients(); }
  TEST_CASE_FIXTURE(OnGpu, "chunk and split") { chunk_and_split(); }
  TEST_CASE_FIXTURE(OnGpu, "slice, extract and insert at run-time positions") { slice_extract_insert_at_run_time_positions(); }
  TEST_CASE_FIXTURE(OnGpu, "gradients of chunk and split") { chunk_gradients(); }
}

TEST_SUITE("rotary position embedding on the GPU") {
  using namespace rotary_cases;
  TEST_CASE_FIXTURE(OnGpu, "swap_halves along the last and a middle axis") { swap_halves_along_the_last_and_a_middle_axis(); }
  TEST_CASE_FIXTURE(OnGpu, "rope matches the rotation, f32") { rope_matches_the_rotation<float>(); }
  TEST_CASE_FIXTURE(OnGpu, "rope matches the rotation, bf16") { rope_matches_the_rotation<kiln::bf16>(); }
  TEST_CASE_FIXTURE(OnGpu, "rope with tables of the wrong shape") { bad_tables_are_shape_errors(); }
  TEST_CASE_FIXTURE(OnGpu, "gradients of swap_halves and rope") { gradients(); }
}
