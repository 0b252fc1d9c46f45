// Tensor: construction, value semantics, element access; randn and rand.
#include "reference.hpp"

TEST_CASE("Tensor is constructible from a list, a vector and another tensor's shape") {
  kiln::Tensor<float> a({2, 3});
  kiln::Tensor<float> b(std::vector<std::size_t>{2, 3});
  kiln::Tensor<float> c(a.shape());
  CHECK(a.shape() == b.shape());
  CHECK(c.shape() == a.shape());
  CHECK(a.numel() == 6);
  CHECK(a.rank() == 2);
  CHECK(a.shape().size() == 2);
  CHECK(a.shape()[1] == 3);
  CHECK(a.shape().str() == "[2, 3]");
  kiln::Tensor<double> s(kiln::Shape{});
  CHECK(s.numel() == 1);  // rank 0: one element
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);
}

TEST_CASE("Tensor copies deeply and moves cheaply") {
  auto a = kiln::randn<float>({4, 5}, 3);
  kiln::Tensor<float> b = a;
  CHECK(b.data() != a.data());
  b[0] = a[0] + 1.0f;
  CHECK(b[0] != a[0]);
  CHECK(b[7] == a[7]);
  const float* p = a.data();
  kiln::Tensor<float> c = std::move(a);
  CHECK(c.data() == p);
  c.at({3, 4}) = 2.5f;
  CHECK(c[19] == 2.5f);
  CHECK_THROWS_AS(c.at({4, 0}), std::out_of_range);
  CHECK_THROWS_AS(c.at({1}), std::out_of_range);
}

TEST_CASE("randn is reproducible per seed and standard normal") {
  auto a = kiln::randn<double>({100000}, 7), b = kiln::randn<double>({100000}, 7), c = kiln::randn<double>({100000}, 8);
  double mean = 0, var = 0;
  bool same = true, differ = false;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    same = same && a[i] == b[i];
    differ = differ || a[i] != c[i];
    mean += a[i];
  }
  mean /= a.numel();
  for (std::size_t i = 0; i < a.numel(); ++i) var += (a[i] - mean) * (a[i] - mean);
  var /= a.numel();
  CHECK(same);
  CHECK(differ);
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(var - 1.0) < 0.02);
  auto u = kiln::rand<float>({1000}, 1, -2.0f, 3.0f);
  for (std::size_t i = 0; i < u.numel(); ++i) {
    CHECK(u[i] >= -2.0f);
    CHECK(u[i] < 3.0f);
  }
}

TEST_CASE("Tensor's device: CPU by default; CUDA memory needs the CUDA runtime in the program") {
  kiln::Tensor<float> t({2, 3});
  CHECK(t.device() == kiln::Device::cpu());
  CHECK_FALSE(t.is_cuda());
  CHECK(kiln::Device::cuda(1).str() == "cuda:1");
  CHECK_FALSE(kiln::Device::cuda(0) == kiln::Device::cuda(1));
  t.fill(2.0f);
  const auto same = t.to(kiln::Device::cpu());  // already there: a copy
  CHECK(same[5] == 2.0f);
  CHECK(same.data() != t.data());
  // This test program does not include <kiln/backend/cuda/runtime.hpp>: no CUDA support.
  CHECK_THROWS_WITH_AS(t.cuda(), doctest::Contains("no CUDA support"), kiln::DeviceError);
  CHECK_THROWS_AS(kiln::Tensor<float>({4}, kiln::Device::cuda()), kiln::DeviceError);
}

TEST_CASE("a size that overflows, or a negative extent, is refused before anything is allocated") {
  const std::size_t big = std::size_t{1} << 40;
  // 2^40 * 2^40 = 2^80 elements: the product wraps around 2^64.
  CHECK_THROWS_WITH_AS(kiln::Tensor<float>({big, big}),
                       "Tensor: shape [1099511627776, 1099511627776] has more elements than an index can address",
                       kiln::ShapeError);
  // 2^32 * 2^32 wraps to exactly 0: a tensor of that shape would have no storage at all.
  CHECK_THROWS_AS(kiln::Tensor<float>({std::size_t{1} << 32, std::size_t{1} << 32}), kiln::ShapeError);
  // 2^61 doubles: the element count fits, the byte count (2^64) does not.
  CHECK_THROWS_AS(kiln::Tensor<double>({std::size_t{1} << 61}), kiln::ShapeError);
  // A negative extent, as a signed count converted to std::size_t becomes, is named as negative.
  const long rows = -3;
  CHECK_THROWS_WITH_AS(kiln::Tensor<float>(std::vector<std::size_t>{static_cast<std::size_t>(rows), 4}),
                       "Tensor: shape [-3, 4] has a negative extent", kiln::ShapeError);
  // Zero extents count as 1 in the bound (every stride must stay addressable), so a zero does
  // not hide an overflowing product of the others.
  CHECK_THROWS_AS(kiln::Tensor<float>({big, big, 0}), kiln::ShapeError);
  // Shape::numel itself is checked too.
  kiln::Shape s{big, 2};
  s[1] = big;
  CHECK_THROWS_AS((void)s.numel(), kiln::ShapeError);
  // The host cache's rounding up to whole MiB cannot wrap around either.
  CHECK_THROWS_AS((void)kiln::detail::HostCache::rounded(~std::size_t{0} - 5), std::bad_alloc);
  // Large but addressable shapes still work, and empty ones have no elements.
  const kiln::Tensor<float> empty({0, big});
  CHECK(empty.numel() == 0);
  CHECK(kiln::Shape{3, 0, 5}.numel() == 0);
}
