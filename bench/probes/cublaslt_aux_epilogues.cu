// Probe: cuBLASLt's aux epilogues against kiln's way, on kiln's layouts
// (row-major C = A B as column-major C^T = B^T A^T). For each shape: the forward product
// h = relu(x w + b) with RELU_BIAS and with RELU_AUX_BIAS (which also writes the relu bit mask),
// GELU_BIAS and GELU_AUX_BIAS (which also writes the pre-activation); the backward product
// g v^T (v read transposed where bT) plain (DEFAULT), with DRELU, DGELU and DRELU_BGRAD; and
// kiln's way for relu's backward, the plain product then one pass acc * (h > 0). Each is timed
// as a CUDA graph of 100 back-to-back calls (best of 3 replays; "first": the heuristic's first
// algorithm, "best": the best of the up to 8 it offers). It also checks DRELU's result against
// a float64 reference using kiln's rule relu'(z) = (relu(z) > 0), and counts where the two
// disagree at exact zeros (the "ints" cases make z = b exactly in row 0).
// Not built by CMake. The figures in docs/design-decisions.md ("cuBLASLt's DRELU and DGELU")
// come from it. From the repository root, on a machine with nvcc and a Hopper GPU:
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90,code=sm_90 bench/probes/cublaslt_aux_epilogues.cu \
//     -lcublasLt -o cublaslt_aux_epilogues
//   ./cublaslt_aux_epilogues
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#define CK(x) do { auto s_ = (x); if ((int)s_ != 0) { printf("FAIL %s = %d line %d\n", #x, (int)s_, __LINE__); return false; } } while (0)
template <class T> struct Ty;
template <> struct Ty<float> { static constexpr cudaDataType_t d = CUDA_R_32F; __host__ __device__ static float to(float x) { return x; } __host__ __device__ static float from(float x) { return x; } };
template <> struct Ty<__nv_bfloat16> { static constexpr cudaDataType_t d = CUDA_R_16BF; __host__ __device__ static __nv_bfloat16 to(float x) { return __float2bfloat16(x); } __host__ __device__ static float from(__nv_bfloat16 x) { return __bfloat162float(x); } };
cublasLtHandle_t lt; void* ws; const size_t wsz = 32 << 20;
// C[m,n] = epi(A[m,k] B[k,n]); b_trans: B is a transposed view of a row-major [n,k] matrix.
template <class T>
bool matmul(cublasLtEpilogue_t epi, int m, int n, int k, const T* A, const T* B, bool b_trans, T* C, const T* bias, void* aux, int64_t aux_ld, int* nalgos, float* us) {
  us[0] = us[1] = 0;
  cublasLtMatmulDesc_t op; cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (b_trans) CK(cublasLtMatrixLayoutCreate(&la, Ty<T>::d, k, n, k)); else CK(cublasLtMatrixLayoutCreate(&la, Ty<T>::d, n, k, n));
  CK(cublasLtMatrixLayoutCreate(&lb, Ty<T>::d, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&lc, Ty<T>::d, n, m, n));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (bias) CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (aux) { CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
             CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld)); }
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
  cublasLtMatmulHeuristicResult_t h[8]; int na = 0;
  auto st = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, h, &na);
  *nalgos = st == CUBLAS_STATUS_SUCCESS ? na : -(int)st;
  if (st != CUBLAS_STATUS_SUCCESS || na == 0) return true;
  float alpha = 1, beta = 0;
  CK(cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &h[0].algo, ws, wsz, 0));
  CK(cudaDeviceSynchronize());
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  us[0] = us[1] = 1e30f;
  for (int a = 0; a < na; ++a) {
    cudaGraph_t gr; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 100; ++i) cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &h[a].algo, ws, wsz, s);
    CK(cudaStreamEndCapture(s, &gr)); CK(cudaGraphInstantiate(&ge, gr, 0));
    CK(cudaGraphLaunch(ge, s)); CK(cudaStreamSynchronize(s));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    float best = 1e30f;
    for (int rep = 0; rep < 3; ++rep) {
      cudaEventRecord(e0, s); CK(cudaGraphLaunch(ge, s)); cudaEventRecord(e1, s); CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1); best = std::min(best, ms * 10);
    }
    if (a == 0) us[0] = best;
    us[1] = std::min(us[1], best);
    cudaGraphExecDestroy(ge); cudaGraphDestroy(gr);
  }
  cudaStreamDestroy(s);
  CK(cudaGetLastError());
  return true;
}
template <class T>
__global__ void relu_pass(uint4* acc, const uint4* h, int n16) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n16) return;
  uint4 a = acc[i], hv = h[i];
  T* av = reinterpret_cast<T*>(&a); const T* hh = reinterpret_cast<const T*>(&hv);
  for (int e = 0; e < int(16 / sizeof(T)); ++e) av[e] = Ty<T>::from(hh[e]) > 0.f ? av[e] : Ty<T>::to(0.f);
  acc[i] = a;
}
template <class T> T* up(const std::vector<float>& v) { std::vector<T> t(v.size()); for (size_t i = 0; i < v.size(); ++i) t[i] = Ty<T>::to(v[i]); T* d; cudaMalloc(&d, t.size() * sizeof(T)); cudaMemcpy(d, t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice); return d; }
template <class T> std::vector<float> down(const T* d, size_t n) { std::vector<T> t(n); cudaMemcpy(t.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost); std::vector<float> v(n); for (size_t i = 0; i < n; ++i) v[i] = Ty<T>::from(t[i]); return v; }
std::vector<float> rnd(size_t n, int seed, bool ints) { std::mt19937 g(seed); std::normal_distribution<float> d; std::vector<float> v(n); for (auto& x : v) x = ints ? std::round(d(g) * 2) : d(g); return v; }
// Forward h = relu(x w + b) with RELU_AUX_BIAS, backward dz = (g wt^T) * (h > 0) with DRELU.
template <class T>
void probe(const char* name, int m, int n, int k1, int k2, bool bt, bool ints) {
  auto x = rnd(size_t(m) * k1, 1, ints), w = rnd(size_t(k1) * n, 2, ints), b = rnd(n, 3, ints), g = rnd(size_t(m) * k2, 4, ints), v = rnd(size_t(n) * k2, 5, ints);
  if (ints) for (int j = 0; j < k1; ++j) x[j] = 0;  // row 0 of z is the bias: exact zeros where b is
  if (!ints) { for (auto& q : w) q /= std::sqrt(float(k1)); for (auto& q : v) q /= std::sqrt(float(k2)); }
  T *dx = up<T>(x), *dw = up<T>(w), *db = up<T>(b), *dg = up<T>(g), *dv = up<T>(v), *dh, *dz;
  cudaMalloc(&dh, sizeof(T) * m * n); cudaMalloc(&dz, sizeof(T) * m * n);
  const int64_t ld = (n + 127) / 128 * 128; void* aux; cudaMalloc(&aux, ld / 8 * m); cudaMemset(aux, 0xff, ld / 8 * m);
  // us[0]: the heuristic's first algorithm, us[1]: the best of its algorithms (graph of 100 calls, best of 3)
  int na[8] = {}; float us[8][2] = {};
  T* bg; cudaMalloc(&bg, sizeof(T) * n);
  T* pre; cudaMalloc(&pre, sizeof(T) * m * n);
  matmul<T>(CUBLASLT_EPILOGUE_RELU_BIAS, m, n, k1, dx, dw, false, dz, db, nullptr, 0, &na[0], us[0]);
  matmul<T>(CUBLASLT_EPILOGUE_RELU_AUX_BIAS, m, n, k1, dx, dw, false, dh, db, aux, ld, &na[1], us[1]);
  matmul<T>(CUBLASLT_EPILOGUE_GELU_BIAS, m, n, k1, dx, dw, false, dz, db, nullptr, 0, &na[4], us[4]);
  matmul<T>(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, m, n, k1, dx, dw, false, dz, db, pre, n, &na[5], us[5]);
  matmul<T>(CUBLASLT_EPILOGUE_DGELU, m, n, k2, dg, dv, bt, dz, nullptr, pre, n, &na[6], us[6]);
  matmul<T>(CUBLASLT_EPILOGUE_DRELU_BGRAD, m, n, k2, dg, dv, bt, dz, bg, aux, ld, &na[7], us[7]);
  matmul<T>(CUBLASLT_EPILOGUE_DEFAULT, m, n, k2, dg, dv, bt, dz, nullptr, nullptr, 0, &na[2], us[2]);
  matmul<T>(CUBLASLT_EPILOGUE_DRELU, m, n, k2, dg, dv, bt, dz, nullptr, aux, ld, &na[3], us[3]);
  cudaDeviceSynchronize();
  // kiln's way: the plain product, then a pass dz = acc * (h > 0) (one read of acc and h, one write)
  float pass_us = 0;
  {
    T* acc; cudaMalloc(&acc, sizeof(T) * m * n); cudaMemcpy(acc, dz, sizeof(T) * m * n, cudaMemcpyDeviceToDevice);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraph_t gr; cudaGraphExec_t ge;
    const int n16 = int(size_t(m) * n * sizeof(T) / 16), blocks = (n16 + 255) / 256;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < 100; ++i) relu_pass<T><<<blocks, 256, 0, s>>>(reinterpret_cast<uint4*>(acc), reinterpret_cast<const uint4*>(dh), n16);
    cudaStreamEndCapture(s, &gr); cudaGraphInstantiate(&ge, gr, 0); cudaGraphLaunch(ge, s); cudaStreamSynchronize(s);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1); pass_us = 1e30f;
    for (int rep = 0; rep < 3; ++rep) { cudaEventRecord(e0, s); cudaGraphLaunch(ge, s); cudaEventRecord(e1, s); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); pass_us = std::min(pass_us, ms * 10); }
    cudaFree(acc); cudaStreamDestroy(s);
  }
  auto h = down<T>(dh, size_t(m) * n), z = down<T>(dz, size_t(m) * n);
  double err_h = 0, err_z = 0, scale = 0; long zeros_z = 0, exact0 = 0, bad0 = 0;
  for (int i = 0; i < m; ++i) for (int j = 0; j < n; ++j) {
    double acc = b[j]; for (int q = 0; q < k1; ++q) acc += double(x[size_t(i) * k1 + q]) * w[size_t(q) * n + j];
    double hr = acc > 0 ? acc : 0; err_h = std::max(err_h, std::fabs(hr - h[size_t(i) * n + j]));
    double gz = 0; for (int q = 0; q < k2; ++q) gz += double(g[size_t(i) * k2 + q]) * (bt ? v[size_t(j) * k2 + q] : v[size_t(q) * n + j]);
    double mask_from_h = h[size_t(i) * n + j] > 0 ? 1 : 0;  // kiln's rule: from the stored output
    double zr = gz * mask_from_h; err_z = std::max(err_z, std::fabs(zr - z[size_t(i) * n + j])); scale = std::max(scale, std::fabs(gz));
    if (acc == 0) { ++exact0; if (z[size_t(i) * n + j] != 0) ++bad0; }
    zeros_z += z[size_t(i) * n + j] == 0;
  }
  printf("%-26s m=%d n=%d k1=%d k2=%d bT=%d\n", name, m, n, k1, k2, bt);
  const char* names[8] = {"fwd RELU_BIAS", "fwd RELU_AUX_BIAS", "bwd DEFAULT", "bwd DRELU", "fwd GELU_BIAS", "fwd GELU_AUX_BIAS", "bwd DGELU", "bwd DRELU_BGRAD"};
  for (int e = 0; e < 8; ++e) printf("   %-18s algos %2d  us first %7.2f best %7.2f\n", names[e], na[e], us[e][0], us[e][1]);
  printf("   kiln-like pass acc*(h>0) us %7.2f  => DEFAULT+pass first %.2f best %.2f vs DRELU first %.2f best %.2f\n", pass_us,
         us[2][0] + pass_us, us[2][1] + pass_us, us[3][0], us[3][1]);
  printf("   check: max|h-ref| %.3g max|dz(DRELU)-ref| %.3g (|g w| max %.3g); exact-zero z %ld, DRELU nonzero there %ld\n",
         err_h, err_z, scale, exact0, bad0);
  cudaFree(bg); cudaFree(pre);
  cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dg); cudaFree(dv); cudaFree(dh); cudaFree(dz); cudaFree(aux);
}
int main() {
  cublasLtCreate(&lt); cudaMalloc(&ws, wsz);
  probe<float>("f32 W5 layer2 (k2 1024, T)", 256, 1024, 1024, 1024, true, false);
  probe<float>("f32 W5 layer3 (k2 10, T)", 256, 1024, 1024, 10, true, false);
  probe<float>("f32 op N", 256, 1024, 784, 1024, false, false);
  probe<float>("f32 odd 37x24", 37, 24, 19, 13, true, false);
  probe<float>("f32 ints (exact zeros)", 64, 256, 16, 16, true, true);
  probe<__nv_bfloat16>("bf16 W5 layer2 (T)", 256, 1024, 1024, 1024, true, false);
  probe<__nv_bfloat16>("bf16 k2 10 (T)", 256, 1024, 1024, 10, true, false);
  probe<__nv_bfloat16>("bf16 4096x1024", 4096, 1024, 1024, 4096, true, false);
  probe<__nv_bfloat16>("bf16 ints (exact zeros)", 64, 256, 16, 16, true, true);
  probe<__nv_bfloat16>("bf16 odd 37x24", 37, 24, 19, 13, true, false);
  return 0;
}
