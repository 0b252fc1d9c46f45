// permute, transpose and reshape on the CPU: the cases are in layout_cases.hpp (the GPU runs them too).
#include "layout_cases.hpp"

using namespace layout_cases;

TEST_CASE("transpose feeds a pointwise kernel through strides") { transpose_feeds_pointwise_through_strides(); }
TEST_CASE("transpose of a computed value") { transpose_of_computed_value(); }
TEST_CASE("reshape, with an inferred extent") { reshape_with_inferred_extent(); }
TEST_CASE("a reshape of a transpose copies it first") { reshape_of_transpose_copies_first(); }
TEST_CASE("outputs that are views or inputs are copied") { outputs_that_are_views_or_inputs_are_copied(); }
TEST_CASE("permute, and transpose of any two axes") { permute_and_transpose_of_any_two_axes(); }
TEST_CASE("permuted GEMM operands") { permuted_gemm_operands(); }
TEST_CASE("a reshape of a permute, and a permuted output, are copies") { reshape_of_permute_and_permuted_output_copy(); }
TEST_CASE("gradients of permute and transpose") { permute_gradients(); }
TEST_CASE("unflatten and flatten the heads of an attention layer") { unflatten_and_flatten_heads(); }
TEST_CASE("patch_embed is a strided convolution") { patch_embed_is_a_strided_convolution(); }
