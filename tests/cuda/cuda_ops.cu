// Ops on the CUDA backend, each against the float64 reference (the CPU's, from tests/
// reference.hpp) on fresh random data: every kernel kind (pointwise scalar and vector paths,
// row reductions by warp and by block, with and without the shared-memory row cache, axis and
// total reductions, GEMM with epilogues and transposed operands).
#include "../reference.hpp"

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

namespace {
template <class T>
kiln::Tensor<T> on_gpu(const kiln::Tensor<T>& t) { return t.cuda(); }
}  // namespace

TEST_CASE("W1 pointwise chain on the GPU: vector and scalar paths") {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto y = kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x);
  for (std::size_t n : {std::size_t{1} << 20, (std::size_t{1} << 16) + 3}) {  // n % 4 != 0: the scalar path
    const auto xt = kiln::randn<float>({n}, 11 + n);
    const auto want = ref::map(ref::from(xt), [](double v) { return ref::gelu(v * 1.5 + 0.5) * ref::sigmoid(v) + std::tanh(v); });
    const auto xd = on_gpu(xt);
    auto got = kiln::compile(y)(x = xd);
    CHECK(got.is_cuda());
    ref::check_close(got.cpu(), want, 5e-5, 5e-6);
    ref::check_close(kiln::eager(y)(x = xd).cpu(), want, 5e-5, 5e-6);
  }
}

TEST_CASE("broadcasts and transposed reads on the GPU") {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 1>();
  constexpr auto c = kiln::input<"c", 2>();
  const auto at = kiln::randn<float>({67, 33}, 1), bt = kiln::randn<float>({33}, 2), ct = kiln::randn<float>({33, 67}, 3);
  const auto want = ref::zip(ref::zip(ref::from(at), ref::from(bt), [](double p, double q) { return p * q; }),
                             ref::transpose(ref::from(ct)), [](double p, double q) { return p - q; });
  auto got = kiln::compile(a * b - kiln::transpose(c))(a = on_gpu(at), b = on_gpu(bt), c = on_gpu(ct));
  ref::check_close(got.cpu(), want, 1e-6, 1e-6);
}

TEST_CASE("row reductions on the GPU: softmax, log_softmax, layer_norm; short, mid and long rows") {
  constexpr auto s = kiln::input<"s", 2>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  for (std::size_t len : {10, 768, 1024, 5000}) {  // a warp per row up to 2048, then a block per row
    CAPTURE(len);
    const auto st = kiln::randn<float>({37, len}, 20 + len);
    const auto gt = kiln::randn<float>({len}, 21), bt = kiln::randn<float>({len}, 22);
    const auto sd = on_gpu(st);
    ref::check_close(kiln::compile(kiln::softmax(s * 0.125f))(s = sd).cpu(),
                     ref::softmax(ref::map(ref::from(st), [](double v) { return v * 0.125; })), 5e-5, 1e-7);
    ref::check_close(kiln::compile(kiln::log_softmax(s))(s = sd).cpu(), ref::log_softmax(ref::from(st)), 5e-5, 5e-5);
    ref::check_close(kiln::compile(kiln::layer_norm(s, g, b, 1e-5))(s = sd, g = on_gpu(gt), b = on_gpu(bt)).cpu(),
                     ref::layer_norm(ref::from(st), ref::from(gt), ref::from(bt), 1e-5), 1e-4, 1e-4);
  }
}

// Rows that are streamed without row caches (too long for registers and for 40 KiB of shared
// memory, or not whole 16-byte units): softmax's max and sum are one pass (online softmax,
// lower/online.hpp). A warp per row (1001 columns: element loads), a block per row (70001:
// element loads; 70000: 16-byte loads). Row 0 holds -inf entries, row 1 a NaN, row 2 only
// -inf, row 3 a +inf (rows 1-3 NaN throughout, as the two-pass form and PyTorch give).
TEST_CASE("softmax and log_softmax over streamed rows: max and sum in one pass") {
  constexpr auto s = kiln::input<"s", 2>();
  auto sm = kiln::compile(kiln::softmax(s * 0.5f));
  auto lsm = kiln::compile(kiln::log_softmax(s));
  for (std::size_t len : {1001, 70001, 70000}) {
    CAPTURE(len);
    auto st = kiln::randn<float>({4, len}, 30 + len);
    for (std::size_t j = 0; j < len; ++j) st[j] *= 8.0f;  // a wide range in row 0
    const float inf = std::numeric_limits<float>::infinity();
    st[3] = -inf, st[len - 1] = -inf, st[len + 7] = std::nanf("");
    for (std::size_t j = 0; j < len; ++j) st[2 * len + j] = -inf;
    st[3 * len + 5] = inf;  // row 3: a +inf entry (NaN throughout, as the two-pass form)
    const auto sd = on_gpu(st);
    ref::check_close(sm(s = sd).cpu(), ref::softmax(ref::map(ref::from(st), [](double v) { return v * 0.5; })), 5e-5, 1e-7);
    ref::check_close(lsm(s = sd).cpu(), ref::log_softmax(ref::from(st)), 5e-5, 5e-5);
  }
}

// Rows longer than a block holds in registers (1024 16-byte units) and at most 16 times that:
// split over the blocks of a thread-block cluster, whose partial maxima and sums are combined
// through distributed shared memory (2 blocks for 4100 f32 columns, 8 for 20000, 16 for 65536;
// 8 for 40000 bf16). Row 0 holds -inf entries, row 1 a NaN, row 2 only -inf, row 3 a +inf.
TEST_CASE("rows split over a thread-block cluster: softmax, log_softmax, layer_norm, row sums") {
  constexpr auto s = kiln::input<"s", 2>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  auto sm = kiln::compile(kiln::softmax(s * 0.5f));
  auto lsm = kiln::compile(kiln::log_softmax(s));
  auto ln = kiln::compile(kiln::layer_norm(s, g, b, 1e-5));
  auto rownorm = kiln::compile(s / kiln::sum<1, true>(s * s));  // a stage, then the row
  for (std::size_t len : {4100, 20000, 65536}) {
    CAPTURE(len);
    auto st = kiln::randn<float>({6, len}, 50 + len);
    const auto gt = kiln::randn<float>({len}, 51), bt = kiln::randn<float>({len}, 52);
    // layer norm and sums on finite rows
    const auto sd0 = on_gpu(st);
    ref::check_close(ln(s = sd0, g = on_gpu(gt), b = on_gpu(bt)).cpu(),
                     ref::layer_norm(ref::from(st), ref::from(gt), ref::from(bt), 1e-5), 2e-4, 2e-4);
    const auto sq = ref::reduce(ref::map(ref::from(st), [](double v) { return v * v; }), 1, ref::Red::Sum, true);
    ref::check_close(rownorm(s = sd0).cpu(), ref::zip(ref::from(st), sq, [](double p, double q) { return p / q; }), 1e-5, 1e-12);
    for (std::size_t j = 0; j < len; ++j) st[j] *= 8.0f;  // a wide range in row 0
    const float inf = std::numeric_limits<float>::infinity();
    st[3] = -inf, st[len - 1] = -inf, st[len + 7] = std::nanf("");
    for (std::size_t j = 0; j < len; ++j) st[2 * len + j] = -inf;
    st[3 * len + 5] = inf;
    const auto sd = on_gpu(st);
    ref::check_close(sm(s = sd).cpu(), ref::softmax(ref::map(ref::from(st), [](double v) { return v * 0.5; })), 5e-5, 1e-7);
    ref::check_close(lsm(s = sd).cpu(), ref::log_softmax(ref::from(st)), 5e-5, 5e-5);
  }
  constexpr auto h = kiln::input<"h", 2, kiln::bf16>();
  const auto hf = kiln::randn<float>({5, 40000}, 53);
  const auto hb = hf.as<kiln::bf16>();
  ref::check_close(kiln::compile(kiln::softmax(h))(h = hb.cuda()).cpu(), ref::softmax(ref::from(hb)), std::ldexp(1.0, -8), 1e-9);
}

// gelu_tanh stored in bf16 (the precision policy's ex2.approx inside): relative precision where
// the result is tiny, x down to -9 (gelu_tanh(-9) ~ -2e-28). Computed as x (1 + tanh u) / 2 with
// tanh.approx it lost every digit below x ~ -3 (0 at x ~ -5.06); as x sigmoid(2u) it does not.
TEST_CASE("gelu_tanh in bf16 keeps relative precision for negative x") {
  constexpr auto x = kiln::input<"x", 1, kiln::bf16>();
  const std::size_t n = 4096;
  kiln::Tensor<float> xf({n});
  for (std::size_t i = 0; i < n; ++i) xf[i] = -9.0f + 18.0f * static_cast<float>(i) / (n - 1);
  const auto xb = xf.as<kiln::bf16>();
  const auto want = ref::map(ref::from(xb), [](double v) { return ref::gelu_tanh(v); });  // x / (1 + e^(-2u))
  ref::check_close(kiln::compile(kiln::gelu_tanh(x))(x = xb.cuda()).cpu(), want, std::ldexp(1.0, -8) + std::ldexp(1.0, -10), 1e-35);
}

TEST_CASE("axis and total reductions on the GPU, NaN included") {
  constexpr auto x = kiln::input<"x", 2>();
  const auto xt = kiln::randn<float>({333, 70}, 31);
  const auto xd = on_gpu(xt);
  ref::check_close(kiln::compile(kiln::sum<0>(x * x))(x = xd).cpu(),
                   ref::reduce(ref::map(ref::from(xt), [](double v) { return v * v; }), 0, ref::Red::Sum, false), 1e-5, 1e-5);
  ref::check_close(kiln::compile(kiln::max<0>(x))(x = xd).cpu(), ref::reduce(ref::from(xt), 0, ref::Red::Max, false), 0, 0);
  ref::check_close(kiln::compile(kiln::mean(x))(x = xd).cpu(), ref::reduce_all(ref::from(xt), ref::Red::Mean), 1e-5, 1e-6);
  auto big = kiln::randn<float>({1 << 21}, 32);
  constexpr auto v = kiln::input<"v", 1>();
  ref::check_close(kiln::compile(kiln::sum(v))(v = on_gpu(big)).cpu(), ref::reduce_all(ref::from(big), ref::Red::Sum), 1e-5, 1e-3);
  big[12345] = std::numeric_limits<float>::quiet_NaN();
  const auto m = kiln::compile(kiln::max(v))(v = on_gpu(big)).cpu();
  CHECK(std::isnan(m[0]));
}

TEST_CASE("GEMM + epilogue on the GPU: bias and gelu, transposed and batched operands") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  const auto xt = kiln::randn<float>({65, 96}, 41), wt = kiln::randn<float>({96, 80}, 42), bt = kiln::randn<float>({80}, 43);
  const auto prod = ref::matmul(ref::from(xt), ref::from(wt));
  const auto want = ref::map(ref::zip(prod, ref::from(bt), [](double p, double q) { return p + q; }), ref::gelu);
  ref::check_close(kiln::compile(kiln::gelu(kiln::matmul(x, w) + b))(x = on_gpu(xt), w = on_gpu(wt), b = on_gpu(bt)).cpu(),
                   want, 1e-4, 1e-4);
  ref::check_close(kiln::compile(kiln::matmul(x, w))(x = on_gpu(xt), w = on_gpu(wt)).cpu(), prod, 1e-5, 1e-4);
  // x^T x and w w^T: transposed operands read in place
  constexpr auto u = kiln::input<"u", 2>();
  ref::check_close(kiln::compile(kiln::matmul(kiln::transpose(u), u))(u = on_gpu(xt)).cpu(),
                   ref::matmul(ref::transpose(ref::from(xt)), ref::from(xt)), 1e-5, 1e-3);
  ref::check_close(kiln::compile(kiln::matmul(u, kiln::transpose(u)))(u = on_gpu(wt)).cpu(),
                   ref::matmul(ref::from(wt), ref::transpose(ref::from(wt))), 1e-5, 1e-3);
  // batched: [3, 17, 24] x [3, 24, 9]
  constexpr auto p = kiln::input<"p", 3>();
  constexpr auto q = kiln::input<"q", 3>();
  const auto pt = kiln::randn<float>({3, 17, 24}, 44), qt = kiln::randn<float>({3, 24, 9}, 45);
  auto got = kiln::compile(kiln::matmul(p, q))(p = on_gpu(pt), q = on_gpu(qt)).cpu();
  for (std::size_t i = 0; i < 3; ++i) {
    kiln::Tensor<float> pi({17, 24}), qi({24, 9}), gi({17, 9});
    std::copy_n(pt.data() + i * 17 * 24, 17 * 24, pi.data());
    std::copy_n(qt.data() + i * 24 * 9, 24 * 9, qi.data());
    std::copy_n(got.data() + i * 17 * 9, 17 * 9, gi.data());
    ref::check_close(gi, ref::matmul(ref::from(pi), ref::from(qi)), 1e-5, 1e-4);
  }
}

TEST_CASE("sum_to (the adjoint of broadcasting) on the GPU: leading, middle, last and every axis") {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto b = kiln::input<"b", 1>();
  constexpr auto c = kiln::input<"c", 3>();
  constexpr auto d = kiln::input<"d", 3>();
  constexpr auto s = kiln::input<"s", 0>();
  auto f = kiln::compile(kiln::outputs(kiln::sum_to(x * 2.0f, b), kiln::sum_to(x, c), kiln::sum_to(x, d), kiln::sum_to(kiln::exp(x), s)));
  const auto xt = kiln::randn<float>({37, 19, 70}, 1);
  const auto bt = kiln::randn<float>({70}, 2), ct = kiln::randn<float>({37, 1, 70}, 3), dt = kiln::randn<float>({37, 19, 1}, 4);
  const auto st = kiln::randn<float>(kiln::Shape{}, 5);
  auto [sb, sc, sd, ss] = f(x = on_gpu(xt), b = on_gpu(bt), c = on_gpu(ct), d = on_gpu(dt), s = on_gpu(st));
  const auto rx = ref::from(xt);
  ref::check_close(sb.cpu(), ref::reduce(ref::reduce(ref::map(rx, [](double v) { return 2 * v; }), 0, ref::Red::Sum, false), 0, ref::Red::Sum, false), 1e-5, 1e-4);
  ref::check_close(sc.cpu(), ref::reduce(rx, 1, ref::Red::Sum, true), 1e-5, 1e-5);
  ref::check_close(sd.cpu(), ref::reduce(rx, 2, ref::Red::Sum, true), 1e-5, 1e-5);
  ref::check_close(ss.cpu(), ref::reduce_all(ref::map(rx, [](double v) { return std::exp(v); }), ref::Red::Sum), 1e-5, 1e-2);
}

namespace {
// Each function of kiln::math at the precision a kernel storing Bits significant bits asks for
// (core/math.hpp, "Precision policy"), evaluated by the device over the sweep xs.
template <int Bits>
__global__ void device_maths(const float* xs, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = xs[i];
  out[0 * n + i] = kiln::math::exp<Bits>(x * 8.0f);  // e^x over [-80, 80]
  out[1 * n + i] = kiln::math::tanh<Bits>(x);
  out[2 * n + i] = kiln::math::sigmoid<Bits>(x * 8.0f);
  out[3 * n + i] = kiln::math::erf(x * 0.6f);
  out[4 * n + i] = kiln::math::normal_cdf(x);
}

struct MathErrors {
  double exp = 0, tanh = 0, sigmoid = 0, erf = 0, cdf_abs = 0;
  double cdf_min = 1, cdf_max = 0;  // Phi's range: [0, 1] within an ulp of 1
};

// Largest relative errors (absolute for Phi, a probability) against the C library in double.
// The kernel of one precision, launched from a plain function: nvcc 13.0's host code generation
// failed ("'__T11' was not declared") on this launch inside a function template.
void launch_device_maths(int bits, const float* dx, float* dout, int n) {
  if (bits == 24) device_maths<24><<<n / 256, 256>>>(dx, dout, n);
  else if (bits == 11) device_maths<11><<<n / 256, 256>>>(dx, dout, n);
  else device_maths<8><<<n / 256, 256>>>(dx, dout, n);
}

MathErrors device_math_errors(int bits) {
  const int n = 1 << 18;
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = -10.0f + 20.0f * static_cast<float>(i) / (n - 1);
  float *dx = nullptr, *dout = nullptr;
  KILN_CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  KILN_CUDA_CHECK(cudaMalloc(&dout, 5 * n * sizeof(float)));
  KILN_CUDA_CHECK(cudaMemcpy(dx, xs.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  launch_device_maths(bits, dx, dout, n);
  std::vector<float> out(5 * n);
  KILN_CUDA_CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  KILN_CUDA_CHECK(cudaFree(dx));
  KILN_CUDA_CHECK(cudaFree(dout));
  MathErrors e;
  const auto rel = [](double got, double want) { return want == 0 ? std::abs(got) : std::abs(got - want) / std::abs(want); };
  for (int i = 0; i < n; ++i) {
    const double x = xs[i];
    // Arguments as the kernel formed them (x * 8 and x * 0.6 rounded to float).
    const double x8 = static_cast<float>(xs[i] * 8.0f), x6 = static_cast<float>(xs[i] * 0.6f);
    e.exp = std::max(e.exp, rel(out[i], std::exp(x8)));
    if (x != 0) e.tanh = std::max(e.tanh, rel(out[n + i], std::tanh(x)));
    e.sigmoid = std::max(e.sigmoid, rel(out[2 * n + i], 1 / (1 + std::exp(-x8))));
    if (x6 != 0) e.erf = std::max(e.erf, rel(out[3 * n + i], std::erf(x6)));
    e.cdf_abs = std::max(e.cdf_abs, std::abs(out[4 * n + i] - 0.5 * std::erfc(-x / std::sqrt(2.0))));
    e.cdf_min = std::min<double>(e.cdf_min, out[4 * n + i]);
    e.cdf_max = std::max<double>(e.cdf_max, out[4 * n + i]);
  }
  MESSAGE("device maths at " << bits << " bits: exp " << e.exp << ", tanh " << e.tanh << ", sigmoid " << e.sigmoid
                             << ", erf " << e.erf << ", Phi (absolute) " << e.cdf_abs);
  return e;
}
}  // namespace

TEST_CASE("device maths: float accuracy, and 16-bit results within a quarter of their rounding") {
  // float: a few ulp (2^-23 = 1.2e-7), as the host's polynomials (tests/math_functions.cpp).
  const auto f = device_math_errors(24);
  CHECK(f.exp < 3e-7);
  CHECK(f.tanh < 5e-7);
  CHECK(f.sigmoid < 5e-7);
  CHECK(f.erf < 6e-7);
  CHECK(f.cdf_abs < 3e-7);
  CHECK(f.cdf_min == 0.0);
  CHECK(f.cdf_max <= 1.0 + 0x1p-23);
  // bf16 (8 bits; rounding to it errs by 2^-9 to 2^-8 relative): tanh.approx and ex2.approx.
  const auto b = device_math_errors(8);
  CHECK(b.tanh < std::ldexp(1.0, -10));
  CHECK(b.exp < std::ldexp(1.0, -16));
  CHECK(b.sigmoid < std::ldexp(1.0, -16));
  // f16 (11 bits, 2^-12 to 2^-11): ex2.approx for exp and sigmoid, the float tanh.
  const auto h = device_math_errors(11);
  CHECK(h.exp < std::ldexp(1.0, -16));
  CHECK(h.sigmoid < std::ldexp(1.0, -16));
  CHECK(h.tanh < 5e-7);
}

TEST_SUITE_END();
