// The 16-bit element types on the GPU alone (dtypes.cpp runs the shared cases of dtype_cases.hpp
// on both devices; part of test_dtypes): ReduceOverhead's graphs in bf16, the flat pointwise
// path's pipelined loop, the small-product kernel, cuBLASLt's epilogues and kiln's tensor-core
// GEMM kernel, against float64.
#include <algorithm>

#include "../dtype_cases.hpp"
#include "../scoped_cache_dir.hpp"

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

TEST_CASE("bf16 in ReduceOverhead: a transformer FFN replayed as a graph") {
  using S = kiln::bf16;
  const auto dev = kiln::Device::cuda();
  const dtype_cases::Ffn<S> ffn(dev, 1);
  auto ro = kiln::compile<kiln::ReduceOverhead>(dtype_cases::Ffn<S>::y);
  auto df = kiln::compile(dtype_cases::Ffn<S>::y);
  for (int i = 0; i < 4; ++i) {
    const auto xt = dtype_cases::randn_on<S>({16, 256}, 10 + i, dev);
    const auto got = ffn.run(ro, xt).cpu();
    const auto want = ffn.run(df, xt).cpu();
    for (std::size_t k = 0; k < got.numel(); ++k) CHECK(got[k].bits == want[k].bits);  // same kernels, same bits
  }
  CHECK(ro.graph_replays() + ro.graph_captures() == 3);
}

// Pointwise kernels over more spans than the GPU holds blocks at once: the flat path (one row,
// unit strides, 16-byte units) launches the resident blocks, which loop, issuing each next
// span's loads before this span's maths (row_kernel.cuh); a length that is not a multiple of
// the vector takes the general kernel with element loads. One input and two, f32 and bf16; the
// last span partial in each. Against float64.
template <class S>
void flat_pointwise(std::size_t n) {
  const auto dev = kiln::Device::cuda();
  constexpr auto x = kiln::input<"x", 1, S>();
  constexpr auto r = kiln::input<"r", 1, S>();
  const auto xt = dtype_cases::randn_on<S>({n}, 71 + n, dev), rt = dtype_cases::randn_on<S>({n}, 72 + n, dev);
  const auto xr = ref::from(xt.cpu()), rr = ref::from(rt.cpu());
  const auto w1 = ref::map(xr, [](double v) { return ref::gelu(v * 1.5 + 0.5) * ref::sigmoid(v) + std::tanh(v); });
  dtype_cases::check(kiln::compile(kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x))(x = xt), w1);
  dtype_cases::check(kiln::compile(x * r + kiln::exp(r))(x = xt, r = rt),
                     ref::zip(xr, rr, [](double p, double q) { return p * q + std::exp(q); }));
}
TEST_CASE("pointwise kernels over many spans: the resident grid's pipelined loop") {
  flat_pointwise<float>(4 * 1300001);  // 16-byte units: 1270 spans of 4096 elements
  flat_pointwise<float>(1300001);      // elements (the general kernel): 1270 blocks of 1024
  flat_pointwise<kiln::bf16>(8 * 1300001);
}

// The small-product kernel (small_gemm.cuh): a few rows; k shorter than the splits, in one round
// and in several; narrow (32-column) and wide (128-column) tiles, n not a multiple of either;
// splits of k added across a cluster (6 and 8 blocks) or none; with and without an epilogue,
// replayed in a graph, against float64.
TEST_CASE("small products: one kernel for GEMM and epilogue, m <= 4") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  auto plain = kiln::compile(kiln::matmul(x, w));
  auto fused = kiln::compile<kiln::ReduceOverhead>(kiln::relu(kiln::matmul(x, w) + b) * 2.0f);
  auto tuned = kiln::compile<kiln::MaxAutotune>(kiln::relu(kiln::matmul(x, w) + b) * 2.0f);
  const auto dev = kiln::Device::cuda();
  for (std::size_t k : {5, 40, 3000}) {
    for (std::size_t n : {200, 4100}) {
      const auto wt = dtype_cases::randn_on<float>({k, n}, k + n, dev, 0.05), bt = dtype_cases::randn_on<float>({n}, 7, dev);
      for (std::size_t m = 1; m <= 4; ++m) {
        const auto xt = dtype_cases::randn_on<float>({m, k}, m, dev);
        const auto prod = ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu()));
        const auto want = ref::map(dtype_cases::add(prod, ref::from(bt.cpu())), [](double v) { return v > 0 ? 2 * v : 0.0; });
        ref::check_close(plain(x = xt, w = wt).cpu(), prod, 1e-5, 1e-5);
        for (int rep = 0; rep < 3; ++rep) ref::check_close(fused(x = xt, w = wt, b = bt).cpu(), want, 1e-5, 1e-5);
        ref::check_close(tuned(x = xt, w = wt, b = bt).cpu(), want, 1e-5, 1e-5);
      }
    }
  }
  CHECK(fused.graph_replays() > 0);
}

// Two small products in a row, a transformer FFN at batch 1: the second is launched to start
// while the first runs (it streams w2, which the first does not write, then waits for h).
// Then a small product whose B is the output of the kernel right before it (a large product):
// that one must wait before it reads B. Default and ReduceOverhead (the overlap inside a graph),
// against float64.
TEST_CASE("chained small products: the second overlaps the first only where that is safe") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w1 = kiln::param<"w1", 2>();
  constexpr auto b1 = kiln::param<"b1", 1>();
  constexpr auto w2 = kiln::param<"w2", 2>();
  constexpr auto ffn = kiln::matmul(kiln::relu(kiln::matmul(x, w1) + b1), w2);
  auto df = kiln::compile(ffn);
  auto ro = kiln::compile<kiln::ReduceOverhead>(ffn);
  const auto dev = kiln::Device::cuda();
  const auto w1t = dtype_cases::randn_on<float>({768, 3072}, 1, dev, 0.05), b1t = dtype_cases::randn_on<float>({3072}, 2, dev);
  const auto w2t = dtype_cases::randn_on<float>({3072, 768}, 3, dev, 0.05);
  for (std::size_t m : {1, 3}) {
    const auto xt = dtype_cases::randn_on<float>({m, 768}, 4 + m, dev);
    const auto h = ref::map(dtype_cases::add(ref::matmul(ref::from(xt.cpu()), ref::from(w1t.cpu())), ref::from(b1t.cpu())),
                            [](double v) { return v > 0 ? v : 0.0; });
    const auto want = ref::matmul(h, ref::from(w2t.cpu()));
    ref::check_close(df(x = xt, w1 = w1t, b1 = b1t, w2 = w2t).cpu(), want, 1e-4, 1e-4);
    for (int rep = 0; rep < 3; ++rep) ref::check_close(ro(x = xt, w1 = w1t, b1 = b1t, w2 = w2t).cpu(), want, 1e-4, 1e-4);
  }
  CHECK(ro.graph_replays() > 0);

  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto p = kiln::input<"p", 2>();
  constexpr auto q = kiln::param<"q", 2>();
  auto chained = kiln::compile(kiln::matmul(a, kiln::matmul(p, q)));  // B of the small product: p q
  CHECK(chained.kernel_count() == 2);
  const auto pt = dtype_cases::randn_on<float>({1024, 64}, 5, dev), qt = dtype_cases::randn_on<float>({64, 512}, 6, dev, 0.1);
  const auto at = dtype_cases::randn_on<float>({2, 1024}, 7, dev);
  const auto want = ref::matmul(ref::from(at.cpu()), ref::matmul(ref::from(pt.cpu()), ref::from(qt.cpu())));
  for (int rep = 0; rep < 3; ++rep) ref::check_close(chained(a = at, p = pt, q = qt).cpu(), want, 1e-4, 1e-4);
}

// Which epilogue trees cuBLASLt takes: the device-neutral recipe (lower/epilogue.hpp) mapped to
// cuBLASLt's epilogues (checked where the tests are compiled, CI included).
namespace lt_patterns {
using kiln::lower::LLoad;
using kiln::lower::LOp;
template <class Tree, int Acc>
constexpr cublasLtEpilogue_t kind = kiln::cuda::lt_epilogue(kiln::lower::epilogue_recipe<Tree, Acc>::kind);
static_assert(kind<LOp<kiln::Add, LLoad<0>, LLoad<1>>, 0> == CUBLASLT_EPILOGUE_BIAS);
static_assert(kind<LOp<kiln::Add, LLoad<1>, LLoad<0>>, 0> == CUBLASLT_EPILOGUE_BIAS);
static_assert(kiln::lower::epilogue_recipe<LOp<kiln::Add, LLoad<1>, LLoad<0>>, 0>::operand == 1);
static_assert(kind<LOp<kiln::Relu, LOp<kiln::Add, LLoad<0>, LLoad<2>>>, 0> == CUBLASLT_EPILOGUE_RELU_BIAS);
static_assert(kind<LOp<kiln::Add, LLoad<0>, LLoad<0>>, 0> == CUBLASLT_EPILOGUE_DEFAULT);  // acc + acc
static_assert(kind<LOp<kiln::Mul, LLoad<0>, LLoad<1>>, 0> == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(kind<LOp<kiln::Gelu, LOp<kiln::Add, LLoad<0>, LLoad<1>>>, 0> == CUBLASLT_EPILOGUE_DEFAULT);  // exact gelu
static_assert(kind<LOp<kiln::Relu, LLoad<0>>, 0> == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(kind<LOp<kiln::GeluTanh, LOp<kiln::Add, LLoad<1>, LLoad<0>>>, 0> == CUBLASLT_EPILOGUE_GELU_BIAS);
static_assert(kiln::lower::epilogue_recipe<LOp<kiln::GeluTanh, LOp<kiln::Add, LLoad<1>, LLoad<0>>>, 0>::operand == 1);
static_assert(kind<LOp<kiln::Sigmoid, LOp<kiln::Add, LLoad<0>, LLoad<1>>>, 0> == CUBLASLT_EPILOGUE_DEFAULT);
}  // namespace lt_patterns

// cuBLASLt's own epilogues: x w + b, b + x w, relu(x w + b) and gelu_tanh(x w + b) with b
// broadcast over the rows run as one cuBLASLt call (BIAS, RELU_BIAS, GELU_BIAS); against
// float64, f32 and bf16.
template <class S>
void lt_epilogues() {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto w = kiln::param<"w", 2, S>();
  constexpr auto b = kiln::param<"b", 1, S>();
  auto bias = kiln::compile(kiln::matmul(x, w) + b);
  auto bias_first = kiln::compile(b + kiln::matmul(x, w));
  auto relu_bias = kiln::compile<kiln::ReduceOverhead>(kiln::relu(kiln::matmul(x, w) + b));
  const auto dev = kiln::Device::cuda();
  const auto xt = dtype_cases::randn_on<S>({96, 200}, 1, dev), wt = dtype_cases::randn_on<S>({200, 136}, 2, dev, 0.07);
  const auto bt = dtype_cases::randn_on<S>({136}, 3, dev);
  const auto want = dtype_cases::add(ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu())), ref::from(bt.cpu()));
  // f32: 200 products of order 0.1 summed in float, so an absolute 1e-5 besides the relative bound
  const double atol = std::is_same_v<S, float> ? 1e-5 : ref::Tol<S>::atol;
  dtype_cases::check(bias(x = xt, w = wt, b = bt), want, 1.0, atol);
  dtype_cases::check(bias_first(x = xt, w = wt, b = bt), want, 1.0, atol);
  const auto want_relu = ref::map(want, [](double v) { return v > 0 ? v : 0.0; });
  for (int rep = 0; rep < 3; ++rep) dtype_cases::check(relu_bias(x = xt, w = wt, b = bt), want_relu, 1.0, atol);
  auto gelu_bias = kiln::compile<kiln::ReduceOverhead>(kiln::gelu_tanh(kiln::matmul(x, w) + b));
  CHECK(gelu_bias.kernel_count() == 1);
  const auto want_gelu = ref::map(want, [](double v) {
    return 0.5 * v * (1 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
  });
  for (int rep = 0; rep < 3; ++rep) dtype_cases::check(gelu_bias(x = xt, w = wt, b = bt), want_gelu, 1.0, atol);
}
// An epilogue cuBLASLt cannot apply, over a product cuBLASLt computes (512 or 509 rows): with a
// bias broadcast over the rows it runs as the flat kernel that reads the bias at each unit's
// column (pointwise kernel 2: gelu, a bias first, an odd row count whose columns wrap at
// different places per thread), and where another load is neither the product's shape nor a
// bias (a same-shaped r, a column c) as the general kernel. The reference rounds the product to
// S where cuBLASLt stores it, then applies the epilogue in float64.
template <class S>
void epilogue_rows() {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto r = kiln::input<"r", 2, S>();
  constexpr auto w = kiln::param<"w", 2, S>();
  constexpr auto b = kiln::param<"b", 1, S>();
  const auto dev = kiln::Device::cuda();
  auto gelu_bias = kiln::compile(kiln::gelu(kiln::matmul(x, w) + b));
  auto bias_first = kiln::compile<kiln::ReduceOverhead>(kiln::sigmoid(b + kiln::matmul(x, w)) * 2.0f);
  auto with_r = kiln::compile(kiln::gelu(kiln::matmul(x, w) + b) * r);
  const double atol = std::is_same_v<S, float> ? 1e-5 : ref::Tol<S>::atol;
  for (std::size_t rows : {512, 509}) {
    const auto xt = dtype_cases::randn_on<S>({rows, 256}, 71 + rows, dev), wt = dtype_cases::randn_on<S>({256, 384}, 72, dev, 0.0625);
    const auto bt = dtype_cases::randn_on<S>({384}, 73, dev), rt = dtype_cases::randn_on<S>({rows, 384}, 74, dev);
    const auto ct = dtype_cases::randn_on<S>({rows, 1}, 75, dev);
    const auto z = dtype_cases::add(ref::map(ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu())), dtype_cases::round_to<S>),
                                    ref::from(bt.cpu()));
    for (int rep = 0; rep < 2; ++rep) {
      dtype_cases::check(gelu_bias(x = xt, w = wt, b = bt), ref::map(z, ref::gelu), 1.0, atol);
      dtype_cases::check(bias_first(x = xt, w = wt, b = bt), ref::map(z, [](double v) { return 2 * ref::sigmoid(v); }), 1.0, atol);
      for (const auto* q : {&rt, &ct})
        dtype_cases::check(with_r(x = xt, w = wt, b = bt, r = *q),
                           ref::zip(z, ref::from(q->cpu()), [](double v, double p) { return ref::gelu(v) * p; }), 1.0, atol);
    }
  }
}
TEST_CASE("GEMM epilogues with a bias over the product's rows: the flat kernel, and the general one") {
  epilogue_rows<float>();
  epilogue_rows<kiln::bf16>();
}

TEST_CASE("cuBLASLt bias, relu and gelu_tanh epilogues") {
  lt_epilogues<float>();
  lt_epilogues<kiln::bf16>();
}

// kiln's tensor-core GEMM kernels (tc_gemm.cuh), launched directly, each variant (mma.sync;
// on Hopper where built for sm_90a, wgmma fed by TMA): m, n and k not multiples of
// the tiles (zero-filled edges), one k step and many (the TMA kernel's ring of stages wrapping
// three times), more tiles than SMs (the persistent TMA kernel's blocks taking several tiles,
// both consumers busy), with the exact gelu of acc + bias as its epilogue (what cuBLASLt cannot
// express) and without; bf16 and f16, against float64 on the 16-bit inputs. The reference rounds the product to S where the
// cuBLASLt path stores it; the fused kernel rounds once, after the epilogue (within the bound).
template <class S, class Desc>
void tc_gemm_case(std::size_t m, std::size_t n, std::size_t k, int shape) {
  const auto dev = kiln::Device::cuda();
  const auto xt = dtype_cases::randn_on<S>({m, k}, m + k, dev), wt = dtype_cases::randn_on<S>({k, n}, n + k, dev, 0.1);
  const auto bt = dtype_cases::randn_on<S>({n}, n, dev);
  kiln::Tensor<S> out({m, n}, dev);
  kiln::lower::GemmArgs<S, Desc::nloads, 0> g;
  g.a = {xt.data(), 0, static_cast<kiln::index_t>(k), 1};
  g.b = {wt.data(), 0, static_cast<kiln::index_t>(n), 1};
  g.acc = out.data();
  g.m = static_cast<kiln::index_t>(m), g.n = static_cast<kiln::index_t>(n), g.k = static_cast<kiln::index_t>(k);
  auto& e = g.epilogue;
  e.ptr[0] = out.data(), e.outer[0][0] = g.n, e.inner[0] = 1;
  if constexpr (Desc::has_epilogue) e.ptr[1] = bt.data(), e.outer[1][0] = 0, e.inner[1] = 1;
  e.nrow_dims = 1, e.row_dims[0] = g.m, e.rows = g.m, e.len = g.n, e.out = out.data();
  REQUIRE(kiln::cuda::tc_gemm_applies(g, Desc::has_epilogue));
  kiln::cuda::launch<kiln::cuda::TcGemm<Desc>>(g, {0, shape, kiln::cuda::kTcGemm, 0}, kiln::cuda::stream(), nullptr);
  const auto prod = ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu()));
  if constexpr (Desc::has_epilogue)
    dtype_cases::check(out, ref::map(dtype_cases::add(prod, ref::from(bt.cpu())), [](double v) { return ref::gelu(v); }));
  else
    dtype_cases::check(out, prod);
}
template <class S>
void tc_gemm_cases() {
  using kiln::lower::LLoad;
  using kiln::lower::LOp;
  using Plain = kiln::lower::GemmKernel<S, LLoad<0>, 0, 1, 0>;
  using GeluBias = kiln::lower::GemmKernel<S, LOp<kiln::Gelu, LOp<kiln::Add, LLoad<0>, LLoad<1>>>, 0, 2, 0>;
  for (int shape : kiln::cuda::tc_variants()) {
    for (const auto& mnk : std::array<std::array<std::size_t, 3>, 7>{
             {{1, 8, 8}, {37, 136, 40}, {300, 264, 776}, {128, 256, 32}, {513, 520, 1000}, {260, 8, 1288}, {1100, 4104, 24}}}) {
      CAPTURE(shape);
      CAPTURE(mnk);
      tc_gemm_case<S, Plain>(mnk[0], mnk[1], mnk[2], shape);
      tc_gemm_case<S, GeluBias>(mnk[0], mnk[1], mnk[2], shape);
    }
  }
  // The persistent TMA kernel with over twice as many tiles as an H200 has SMs and four k steps
  // a tile: a block's consumers take turns on two or three tiles, and its ring of six stages
  // wraps, so each consumer waits for stages the other one used last.
  const auto variants = kiln::cuda::tc_variants();
  if (std::find(variants.begin(), variants.end(), kiln::cuda::kTcWgmmaTma) != variants.end()) {
    tc_gemm_case<S, Plain>(1100, 4104, 200, kiln::cuda::kTcWgmmaTma);
    tc_gemm_case<S, GeluBias>(1100, 4104, 200, kiln::cuda::kTcWgmmaTma);
  }
}
TEST_CASE("kiln's tensor-core GEMM kernel: tile shapes, edges, the exact-gelu epilogue") {
  tc_gemm_cases<kiln::bf16>();
  tc_gemm_cases<kiln::f16>();
}

// MaxAutotune times the tensor-core kernel against cuBLASLt for a 16-bit GEMM whose epilogue
// cuBLASLt cannot express (the exact gelu); whichever it picks, the result holds.
TEST_CASE("MaxAutotune: the tensor-core kernel is a candidate for bf16 GEMMs") {
  using S = kiln::bf16;
  const auto dev = kiln::Device::cuda();
  const test_support::ScopedCacheDir cache("tc");  // this call tunes: the candidates are described
  const dtype_cases::Ffn<S> ffn(dev, 61);
  auto tuned = kiln::compile<kiln::MaxAutotune>(dtype_cases::Ffn<S>::y);
  const auto xt = dtype_cases::randn_on<S>({384, 256}, 62, dev);
  const auto z = ref::matmul(ref::from(xt.cpu()), ref::from(ffn.w1t.cpu()));
  const auto h = ref::map(dtype_cases::add(z, ref::from(ffn.b1t.cpu())), [](double v) { return dtype_cases::round_to<S>(ref::gelu(v)); });
  const auto want = dtype_cases::add(ref::matmul(h, ref::from(ffn.w2t.cpu())), ref::from(ffn.b2t.cpu()));
  for (int rep = 0; rep < 2; ++rep) dtype_cases::check(ffn.run(tuned, xt), want, 3.0, ref::Tol<S>::rtol);
  const std::string plan = tuned.explain();
  CHECK(plan.find("kiln's mma.sync kernel") != std::string::npos);
  const auto variants = kiln::cuda::tc_variants();
  if (std::find(variants.begin(), variants.end(), kiln::cuda::kTcWgmmaTma) != variants.end())
    CHECK(plan.find("kiln's wgmma kernel fed by TMA") != std::string::npos);
  CHECK(tuned.autotune_stats().tuned > 0);
}

TEST_SUITE_END();
