// kiln::dropout and the Philox generator it draws from: the cases are in dropout_cases.hpp
// (DEVICE_CASE: the GPU runs them too); Philox's known answers here.
#include "dropout_cases.hpp"

using namespace dropout_cases;

// Random123's published known-answer vectors for Philox4x32-10 (its tests/kat_vectors).
TEST_CASE("Philox4x32-10 gives Random123's known answers") {
  using kiln::philox::Words;
  const auto a = kiln::philox::philox4x32_10(Words{{0, 0, 0, 0}}, 0, 0);
  const auto b = kiln::philox::philox4x32_10(Words{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  const auto c = kiln::philox::philox4x32_10(Words{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  const std::uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                    {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                    {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
  const Words got[3] = {a, b, c};
  for (int v = 0; v < 3; ++v)
    for (int k = 0; k < 4; ++k) CHECK(got[v].w[k] == want[v][k]);
}

DEVICE_CASE("dropout masks follow the Philox definition", masks_follow_the_definition())
DEVICE_CASE("dropout keeps 1 - p of the elements and the mean", kept_fraction_and_mean())
DEVICE_CASE("dropout of a strided operand and of bf16", strided_operands_and_bf16())
DEVICE_CASE("dropout's gradient and evaluation's identity", gradient_and_evaluation())
