// Reverse mode on the CPU: reductions and row ops; the cases are in autodiff_reduce_cases.hpp
// (the GPU runs them too).
#include "autodiff_reduce_cases.hpp"

TEST_CASE("reductions") { autodiff_reduce_cases::reductions(); }
TEST_CASE("row ops: softmax, log_softmax, layer_norm") { autodiff_reduce_cases::row_ops(); }
