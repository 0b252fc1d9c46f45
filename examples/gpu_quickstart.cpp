// kiln on a GPU: the README's first example on CUDA tensors, in ReduceOverhead (CUDA graphs),
// checked against the same program on the CPU. Built by g++ through kiln_cuda_executable
// (examples/CMakeLists.txt), which generates and compiles with nvcc only the kernels it
// launches. Without a GPU it says so and exits.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
constexpr auto y = kiln::softmax(kiln::gelu(kiln::matmul(x, w) + b));

int main() {
  if (kiln::cuda::device_count() == 0) {
    std::puts("gpu_quickstart: no CUDA device here; nothing to run");
    return 0;
  }
  const auto xt = kiln::randn<float>({64, 768}, 1), wt = kiln::randn<float>({768, 3072}, 2), bt = kiln::randn<float>({3072}, 3);
  const auto xd = xt.cuda(), wd = wt.cuda(), bd = bt.cuda();  // host to device copies

  auto f = kiln::compile<kiln::ReduceOverhead>(y);
  kiln::Tensor<float> out({64, 3072}, kiln::Device::cuda());
  for (int i = 0; i < 3; ++i) f.into(out, x = xd, w = wd, b = bd);  // runs, captures a graph, replays it
  std::printf("%s", f.explain().c_str());
  std::printf("graphs captured %ld, replayed %ld\n", f.graph_captures(), f.graph_replays());

  const auto gpu = out.cpu();
  const auto cpu = kiln::compile(y)(x = xt, w = wt, b = bt);
  double worst = 0;
  for (std::size_t i = 0; i < cpu.numel(); ++i) worst = std::fmax(worst, std::fabs(gpu[i] - cpu[i]));
  std::printf("largest difference from the CPU: %.3g\n", worst);
  return worst < 1e-4 ? 0 : 1;
}
