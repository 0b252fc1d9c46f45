// Pointwise ops in float64 against the float64 reference, on the CPU and the GPU (DEVICE_CASE).
#include "pointwise_cases.hpp"

DEVICE_CASE("unary pointwise ops, f64", pointwise_cases::all_unary<double>())
DEVICE_CASE("binary pointwise ops, f64", pointwise_cases::all_binary<double>())
