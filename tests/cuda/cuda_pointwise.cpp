// Every pointwise op on the GPU, compiled and eager, f32 and f64, against the float64 reference:
// the CPU suite's cases (pointwise_cases.hpp) with the inputs on the device, over the shapes
// listed there (odd extents, single elements, rows and columns, broadcasts); cuda_dtypes
// covers the 16-byte vector path.
#include "../pointwise_cases.hpp"

using cases::OnGpu;

TEST_CASE("unary pointwise ops on the GPU, f32") {
  OnGpu gpu;
  pointwise_cases::all_unary<float>();
}
TEST_CASE("binary pointwise ops on the GPU, f32") {
  OnGpu gpu;
  pointwise_cases::all_binary<float>();
}
TEST_CASE("unary pointwise ops on the GPU, f64") {
  OnGpu gpu;
  pointwise_cases::all_unary<double>();
}
TEST_CASE("binary pointwise ops on the GPU, f64") {
  OnGpu gpu;
  pointwise_cases::all_binary<double>();
}
