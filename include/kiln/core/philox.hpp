// kiln: Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), a counter-based generator: four 32-bit words are a pure function of a 128-bit
// counter and a 64-bit key, so any element's random number is computed where it is needed, in
// any order, on either device, with the same bits. kiln::dropout draws from it.
#pragma once
#include <cstdint>

#include "kiln/core/config.hpp"

namespace kiln::philox {

struct Words {
  std::uint32_t w[4];
};

KILN_HOST_DEVICE KILN_INLINE constexpr void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// Ten rounds of the Philox S-box over counter c with key (k0, k1), the key bumped by the Weyl
// constants between rounds.
KILN_HOST_DEVICE KILN_INLINE constexpr Words philox4x32_10(Words c, std::uint32_t k0, std::uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    std::uint32_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
    mulhilo(0xD2511F53u, c.w[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, c.w[2], hi1, lo1);
    c = Words{{hi1 ^ c.w[1] ^ k0, lo1, hi0 ^ c.w[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Block b of stream `stream` for (seed, offset): the four words for counter (b, offset ^ stream
// in the top word) and key seed. Element i of a tensor takes word i % 4 of block i / 4.
KILN_HOST_DEVICE KILN_INLINE constexpr Words block(std::uint64_t seed, std::uint64_t offset, std::uint32_t stream,
                                                   std::uint64_t b) {
  const Words c{{static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b >> 32), static_cast<std::uint32_t>(offset),
                 static_cast<std::uint32_t>(offset >> 32) ^ stream}};
  return philox4x32_10(c, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// A word's top 24 bits over 2^24: a uniform number in [0, 1) that a float holds exactly.
KILN_HOST_DEVICE KILN_INLINE constexpr float to_uniform(std::uint32_t w) {
  return static_cast<float>(w >> 8) * (1.0f / 16777216.0f);
}

// Element i's uniform number.
KILN_HOST_DEVICE KILN_INLINE constexpr float uniform(std::uint64_t seed, std::uint64_t offset, std::uint32_t stream,
                                                      std::uint64_t i) {
  return to_uniform(block(seed, offset, stream, i / 4).w[i % 4]);
}

}  // namespace kiln::philox
