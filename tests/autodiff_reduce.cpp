// Reverse mode: reductions and row ops; the cases are in autodiff_reduce_cases.hpp
// (DEVICE_CASE: the GPU runs them too).
#include "autodiff_reduce_cases.hpp"

DEVICE_CASE("reductions", autodiff_reduce_cases::reductions())
DEVICE_CASE("row ops: softmax, log_softmax, layer_norm", autodiff_reduce_cases::row_ops())
DEVICE_CASE("row ops: rms_norm and layer_norm without a bias",
            autodiff_reduce_cases::rms_norm_and_layer_norm_without_bias())
