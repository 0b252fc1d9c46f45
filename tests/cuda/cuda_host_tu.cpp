// A translation unit built by the host compiler (g++), with the CUDA runtime linked: it can
// hold CUDA tensors, and a compiled call on them raises a clear error (its kiln has the CPU
// backend only).
#include <doctest/doctest.h>

#include <kiln/backend/cuda/runtime.hpp>
#include <kiln/kiln.hpp>

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

TEST_CASE("a g++ translation unit given CUDA tensors raises DeviceError naming the fix") {
  constexpr auto x = kiln::input<"x", 1>();
  auto f = kiln::compile(kiln::exp(x));
  const auto xd = kiln::randn<float>({100}, 1).cuda();
  CHECK(xd.is_cuda());
  CHECK(xd.cpu()[3] == kiln::randn<float>({100}, 1)[3]);
  CHECK_THROWS_WITH_AS(f(x = xd), doctest::Contains("nvcc"), kiln::DeviceError);
}

TEST_CASE("the Tensor API on CUDA tensors: factories, copy_from between every pair of devices, item, printing") {
  const auto cuda = kiln::Device::cuda(0);
  auto z = kiln::zeros<float>({3, 4}, cuda);
  CHECK(z.is_cuda());
  CHECK(z.cpu()[11] == 0.0f);
  auto f = kiln::full<kiln::bf16>({5}, 2.5f, cuda);
  CHECK(float(f.cpu()[4]) == 2.5f);
  CHECK(kiln::arange<double>(0, 6, 1, cuda).cpu()[5] == 5.0);
  CHECK(kiln::randn<float>({7}, 3, cuda).cpu()[6] == kiln::randn<float>({7}, 3)[6]);
  CHECK(kiln::rand<float>({7}, 3, cuda).cpu()[2] == kiln::rand<float>({7}, 3)[2]);

  const auto src = kiln::randn<float>({64, 33}, 5);
  // host -> device, device -> device, device -> host, each into an existing tensor.
  kiln::Tensor<float> d1({64, 33}, cuda), d2({64, 33}, cuda), back({64, 33});
  const float* p1 = d1.data();
  d1.copy_from(src);
  CHECK(d1.data() == p1);
  d2.copy_from(d1);
  back.copy_from(d2);  // queued after the device copy on kiln's stream; complete on return
  bool same = true;
  for (std::size_t i = 0; i < src.numel(); ++i) same = same && back[i] == src[i];
  CHECK(same);
  kiln::cuda::synchronize();
  CHECK_THROWS_AS(d1.copy_from(kiln::zeros<float>({33, 64})), kiln::ShapeError);
  // Into Eigen memory, straight from the device.
  kiln::EigenRowMatrix<float> e(64, 33);
  auto view = kiln::from_eigen(e);
  view.copy_from(d2);
  CHECK(e(63, 32) == src.at({63, 32}));

  CHECK(kiln::full({1, 1}, 4.5, cuda).item() == 4.5);
  CHECK_THROWS_AS(d1.item(), kiln::ShapeError);
  CHECK_THROWS_WITH_AS(d1[0], doctest::Contains("is on cuda:0"), kiln::DeviceError);
  CHECK_THROWS_AS(d1.at({0, 0}), kiln::DeviceError);
  CHECK_THROWS_AS(d1.as_eigen_matrix(), kiln::DeviceError);
  CHECK(kiln::to_string(kiln::arange(3).cuda(), {.precision = 1}) == "tensor([0.0, 1.0, 2.0], dtype=f32, device=cuda:0)");
}

TEST_SUITE_END();
