// Pointwise ops in float64 against the float64 reference.
#include "pointwise_cases.hpp"

TEST_CASE("unary pointwise ops, f64") { pointwise_cases::all_unary<double>(); }
TEST_CASE("binary pointwise ops, f64") { pointwise_cases::all_binary<double>(); }
