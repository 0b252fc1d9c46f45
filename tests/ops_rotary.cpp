// swap_halves and rope (rotary position embedding): the cases are in rotary_cases.hpp
// (DEVICE_CASE: the GPU runs them too).
#include "rotary_cases.hpp"

DEVICE_CASE("swap_halves along the last and a middle axis", rotary_cases::swap_halves_along_the_last_and_a_middle_axis())
TEST_CASE("rope tables hold the angles of each position") { rotary_cases::tables_hold_the_angles_of_each_position(); }
DEVICE_CASE("rope matches the rotation, f32", rotary_cases::rope_matches_the_rotation<float>())
TEST_CASE("rope matches the rotation, f64") { rotary_cases::rope_matches_the_rotation<double>(); }
DEVICE_CASE("rope matches the rotation, bf16", rotary_cases::rope_matches_the_rotation<kiln::bf16>())
DEVICE_CASE("rope with tables of the wrong shape", rotary_cases::bad_tables_are_shape_errors())
DEVICE_CASE("gradients of swap_halves and rope", rotary_cases::gradients())
