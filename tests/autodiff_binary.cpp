// Reverse mode: binary pointwise rules, with broadcasting; the cases are in
// autodiff_pointwise_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "autodiff_pointwise_cases.hpp"

DEVICE_CASE("binary pointwise rules, with broadcasting", autodiff_pointwise_cases::binary_rules())
