// kiln's tensor-core GEMM kernels (tc_gemm.cuh) launched directly on W4 B=4096's two product
// shapes, bf16, plain and with the exact gelu of acc + bias: CUDA events around single launches,
// the median of 20 after 3 warm-ups. Not built by CMake; the figures of kiln's Hopper GEMM in
// docs/performance.md and docs/design-decisions.md come from it. From the repository root:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -DKILN_CUDA_SM90A=1 \
//     -DKILN_CUDA_KERNELS=1 --expt-relaxed-constexpr -diag-suppress=20011,20012,20014 -Iinclude -I/usr/include/eigen3 \
//     -Xcompiler=-fopenmp bench/probes/tc_gemm_direct.cu -o tc_gemm_direct -lcublasLt -lcublas -lgomp
//   ./tc_gemm_direct        # every variant tc_variants() offers on this device
//   ./tc_gemm_direct tma    # the TMA kernel only (for ncu: its 24th launch is the gelu product)
#include <kiln/kiln.hpp>
#include <kiln/backend/cuda/kernels.cuh>
#include <algorithm>
#include <cstdio>
#include <vector>
using namespace kiln;
using S = bf16;
using Plain = lower::GemmKernel<S, lower::LLoad<0>, 0, 1, 0>;
using GeluBias = lower::GemmKernel<S, lower::LOp<Gelu, lower::LOp<Add, lower::LLoad<0>, lower::LLoad<1>>>, 0, 2, 0>;
template <class Desc>
void bench(const char* name, index_t m, index_t n, index_t k, int variant, S* a, S* b, S* bias, S* out) {
  cpu::GemmArgs<S, Desc::nloads, 0> g;
  g.a = {a, 0, k, 1};
  g.b = {b, 0, n, 1};
  g.acc = out;
  g.m = m, g.n = n, g.k = k;
  auto& e = g.epilogue;
  e.ptr[0] = out, e.outer[0][0] = n, e.inner[0] = 1;
  if constexpr (Desc::has_epilogue) e.ptr[1] = bias, e.outer[1][0] = 0, e.inner[1] = 1;
  e.nrow_dims = 1, e.row_dims[0] = m, e.rows = m, e.len = n, e.out = out;
  cudaStream_t st = kiln::cuda::stream();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<float> t;
  for (int r = 0; r < 23; ++r) {
    cudaEventRecord(e0, st);
    kiln::cuda::launch<kiln::cuda::TcGemm<Desc>>(g, {0, variant, kiln::cuda::kTcGemm, 0}, st, nullptr);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  std::printf("%-10s m %5ld n %5ld k %5ld variant %d: %.4f ms (%.0f TFLOP/s)\n", name, (long)m, (long)n, (long)k, variant, t[t.size() / 2],
              2.0 * m * n * k / (t[t.size() / 2] * 1e-3) / 1e12);
}
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  const index_t M = 4096, N = 3072, K = 768;
  S *a, *b, *bias, *out;
  cudaMalloc(&a, 2 * M * N * 2), cudaMalloc(&b, 2 * M * N * 2), cudaMalloc(&bias, N * 2), cudaMalloc(&out, M * N * 2);
  std::vector<S> h(2 * M * N);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = S(float((i * 2654435761u) % 1000) / 1000.f - 0.5f);
  cudaMemcpy(a, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaMemcpy(b, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(bias, h.data(), N * 2, cudaMemcpyHostToDevice);
  const bool only_tma = argc > 1;
  for (int v : kiln::cuda::tc_variants()) {
    if (only_tma && v != kiln::cuda::kTcWgmmaTma) continue;
    bench<Plain>("plain", M, N, K, v, a, b, bias, out);
    bench<GeluBias>("gelu_bias", M, N, K, v, a, b, bias, out);
    bench<Plain>("plain", M, 768, 3072, v, a, b, bias, out);
    bench<GeluBias>("gelu_bias", M, 768, 3072, v, a, b, bias, out);
  }
  std::printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
}
