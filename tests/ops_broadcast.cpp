// Broadcasting: the cases are in broadcast_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "broadcast_cases.hpp"

using namespace broadcast_cases;

DEVICE_CASE("equal shapes", equal_shapes())
DEVICE_CASE("a row vector against a matrix", row_vector_against_matrix())
DEVICE_CASE("a column against a matrix", column_against_matrix())
DEVICE_CASE("an outer product of size-1 dims", outer_product_of_size_1_dims())
DEVICE_CASE("a rank-0 tensor on either side", rank_0_on_either_side())
DEVICE_CASE("rank mismatch with size-1 dims in the middle", rank_mismatch_with_size_1_dims())
DEVICE_CASE("rank 4 against rank 3", rank_4_against_rank_3())
DEVICE_CASE("long rows split across threads", long_rows())
DEVICE_CASE("a pointwise chain over mixed broadcasts fuses into one kernel", mixed_broadcast_chain_is_one_kernel())
