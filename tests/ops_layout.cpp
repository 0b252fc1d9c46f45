// permute, transpose and reshape: the cases are in layout_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "layout_cases.hpp"

using namespace layout_cases;

DEVICE_CASE("transpose feeds a pointwise kernel through strides", transpose_feeds_pointwise_through_strides())
DEVICE_CASE("transpose of a computed value", transpose_of_computed_value())
DEVICE_CASE("reshape, with an inferred extent", reshape_with_inferred_extent())
DEVICE_CASE("a reshape of a transpose copies it first", reshape_of_transpose_copies_first())
DEVICE_CASE("outputs that are views or inputs are copied", outputs_that_are_views_or_inputs_are_copied())
DEVICE_CASE("permute, and transpose of any two axes", permute_and_transpose_of_any_two_axes())
DEVICE_CASE("permuted GEMM operands", permuted_gemm_operands())
DEVICE_CASE("a reshape of a permute, and a permuted output, are copies", reshape_of_permute_and_permuted_output_copy())
DEVICE_CASE("gradients of permute and transpose", permute_gradients())
DEVICE_CASE("unflatten and flatten the heads of an attention layer", unflatten_and_flatten_heads())
DEVICE_CASE("patch_embed is a strided convolution", patch_embed_is_a_strided_convolution())
