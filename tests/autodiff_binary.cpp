// Reverse mode on the CPU: binary pointwise rules, with broadcasting; the cases are in
// autodiff_pointwise_cases.hpp (the GPU runs them too).
#include "autodiff_pointwise_cases.hpp"

TEST_CASE("binary pointwise rules, with broadcasting") { autodiff_pointwise_cases::binary_rules(); }
