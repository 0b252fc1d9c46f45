// Reverse mode on the CPU: unary pointwise rules; the cases are in autodiff_pointwise_cases.hpp
// (the GPU runs them too).
#include "autodiff_pointwise_cases.hpp"

TEST_CASE("unary pointwise rules") { autodiff_pointwise_cases::unary_rules(); }
