// Built by a project of its own against kiln (tests/CMakeLists.txt, install_cuda_*): one fused
// kernel on CUDA tensors, checked against the same program on the CPU. Without a GPU it checks
// the CPU result and says so.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

int main() {
  constexpr auto x = kiln::input<"x", 1>();
  auto f = kiln::compile(kiln::exp(x) * 2.0f);
  const auto xt = kiln::randn<float>({1000}, 7);
  const auto cpu = f(x = xt);
  for (std::size_t i = 0; i < cpu.numel(); ++i)
    if (std::abs(cpu[i] - 2.0f * std::exp(xt[i])) > 1e-5f * std::abs(cpu[i])) {
      std::puts("cuda_consumer: wrong CPU result");
      return 1;
    }
  if (kiln::cuda::device_count() == 0) {
    std::puts("cuda_consumer: built; no CUDA device here, CPU result checked");
    return 0;
  }
  const auto gpu = f(x = xt.cuda()).cpu();
  for (std::size_t i = 0; i < cpu.numel(); ++i)
    if (std::abs(gpu[i] - cpu[i]) > 1e-5f * std::abs(cpu[i])) {
      std::puts("cuda_consumer: GPU and CPU differ");
      return 1;
    }
  std::puts("cuda_consumer: ok");
  return 0;
}
