// A translation unit built by the host compiler (g++), with the CUDA runtime linked: it can
// hold CUDA tensors, and a compiled call on them raises a clear error (its kiln has the CPU
// backend only).
#include <doctest/doctest.h>

#include <kiln/backend/cuda/runtime.hpp>
#include <kiln/kiln.hpp>

TEST_CASE("a g++ translation unit given CUDA tensors raises DeviceError naming the fix") {
  constexpr auto x = kiln::input<"x", 1>();
  auto f = kiln::compile(kiln::exp(x));
  const auto xd = kiln::randn<float>({100}, 1).cuda();
  CHECK(xd.is_cuda());
  CHECK(xd.cpu()[3] == kiln::randn<float>({100}, 1)[3]);
  CHECK_THROWS_WITH_AS(f(x = xd), doctest::Contains("nvcc"), kiln::DeviceError);
}
