// The 16-bit element types on the GPU: the CPU's cases (dtype_cases.hpp: every kernel kind,
// 16-byte vector loads of 8 values, cuBLASLt in bf16 and f16 with float accumulation), against
// float64; and ReduceOverhead's graphs in bf16.
#include "../dtype_cases.hpp"

TEST_CASE("bf16 on the GPU, against float64") { dtype_cases::all<kiln::bf16>(kiln::Device::cuda()); }
TEST_CASE("f16 on the GPU, against float64") { dtype_cases::all<kiln::f16>(kiln::Device::cuda()); }

TEST_CASE("bf16 in ReduceOverhead: a transformer FFN replayed as a graph") {
  using S = kiln::bf16;
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto w1 = kiln::param<"w1", 2, S>();
  constexpr auto b1 = kiln::param<"b1", 1, S>();
  constexpr auto w2 = kiln::param<"w2", 2, S>();
  constexpr auto b2 = kiln::param<"b2", 1, S>();
  constexpr auto y = kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2;
  const auto dev = kiln::Device::cuda();
  const auto w1t = dtype_cases::randn_on<S>({256, 512}, 1, dev, 1.0 / 16), w2t = dtype_cases::randn_on<S>({512, 256}, 2, dev, 1.0 / 22.6);
  const auto b1t = dtype_cases::randn_on<S>({512}, 3, dev), b2t = dtype_cases::randn_on<S>({256}, 4, dev);
  auto ro = kiln::compile<kiln::ReduceOverhead>(y);
  auto df = kiln::compile(y);
  for (int i = 0; i < 4; ++i) {
    const auto xt = dtype_cases::randn_on<S>({16, 256}, 10 + i, dev);
    const auto got = ro(x = xt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t).cpu();
    const auto want = df(x = xt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t).cpu();
    for (std::size_t k = 0; k < got.numel(); ++k) CHECK(got[k].bits == want[k].bits);  // same kernels, same bits
  }
  CHECK(ro.graph_replays() + ro.graph_captures() == 3);
}
