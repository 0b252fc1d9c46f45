// Reverse mode: unary pointwise rules; the cases are in autodiff_pointwise_cases.hpp
// (DEVICE_CASE: the GPU runs them too).
#include "autodiff_pointwise_cases.hpp"

DEVICE_CASE("unary pointwise rules", autodiff_pointwise_cases::unary_rules())
