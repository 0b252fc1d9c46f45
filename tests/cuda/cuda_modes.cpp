// The CUDA backend's modes and failure paths: ReduceOverhead's graphs (in place or staged,
// replayed for fresh inputs and kept outputs, re-captured for new parameters, outputs never
// overwritten), no cudaMalloc in steady state, MaxAutotune's
// tuning on the device, the errors: mixed devices, out of memory, a failed CUDA call; merged
// kernels (multiple outputs) with their broadcast fallback, and the plan suites' other cases that
// run kernels (plan_cases.hpp).
#include "../merge_cases.hpp"
#include "../plan_cases.hpp"
#include "../reference.hpp"
#include "../scoped_cache_dir.hpp"

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

namespace {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
constexpr auto ffn = kiln::softmax(kiln::gelu(kiln::matmul(x, w) + b));

ref::Array want(const kiln::Tensor<float>& xt, const kiln::Tensor<float>& wt, const kiln::Tensor<float>& bt) {
  const auto z = ref::zip(ref::matmul(ref::from(xt), ref::from(wt)), ref::from(bt), [](double p, double q) { return p + q; });
  return ref::softmax(ref::map(z, ref::gelu));
}
}  // namespace

TEST_CASE("ReduceOverhead replays a graph; new contents are read, outputs are never overwritten") {
  auto f = kiln::compile<kiln::ReduceOverhead>(ffn);
  const auto wt = kiln::randn<float>({40, 24}, 1), bt = kiln::randn<float>({24}, 2);
  const auto wd = wt.cuda(), bd = bt.cuda();
  kiln::Tensor<float> xh = kiln::randn<float>({16, 40}, 3);
  auto xd = xh.cuda();
  std::vector<kiln::Tensor<float>> outs;
  std::vector<kiln::Tensor<float>> inputs;
  for (int i = 0; i < 6; ++i) {
    xh = kiln::randn<float>({16, 40}, 10 + i);
    xd = xh.cuda();  // often the same address again, from the cache
    inputs.push_back(xh);
    outs.push_back(f(x = xd, w = wd, b = bd));  // kept: a new output address on every call
  }
  // The first call runs the kernels directly; the second captures the staged graph (the input
  // copied in, the output copied out), which every later call replays.
  CHECK(f.graph_captures() == 1);
  CHECK(f.graph_replays() == 4);
  for (int i = 0; i < 6; ++i) ref::check_close(outs[i].cpu(), want(inputs[i], wt, bt), 1e-4, 1e-6);
  // into() the caller's tensor, twice: replayed
  kiln::Tensor<float> out({16, 24}, kiln::Device::cuda());
  f.into(out, x = xd, w = wd, b = bd);
  f.into(out, x = xd, w = wd, b = bd);
  CHECK(f.graph_captures() == 1);
  ref::check_close(out.cpu(), want(inputs.back(), wt, bt), 1e-4, 1e-6);
  // a parameter moved to a new tensor: captured again, its new values used
  const auto w2 = kiln::randn<float>({40, 24}, 4);
  const auto w2d = w2.cuda();
  ref::check_close(f(x = xd, w = w2d, b = bd).cpu(), want(inputs.back(), w2, bt), 1e-4, 1e-6);
  CHECK(f.graph_captures() == 2);
}

TEST_CASE("ReduceOverhead on the same tensors every call: one in-place graph, nothing copied") {
  auto f = kiln::compile<kiln::ReduceOverhead>(ffn);
  const auto xt = kiln::randn<float>({16, 40}, 5), wt = kiln::randn<float>({40, 24}, 6), bt = kiln::randn<float>({24}, 7);
  const auto xd = xt.cuda(), wd = wt.cuda(), bd = bt.cuda();
  kiln::Tensor<float> out({16, 24}, kiln::Device::cuda());
  for (int i = 0; i < 5; ++i) f.into(out, x = xd, w = wd, b = bd);
  CHECK(f.graph_captures() == 1);
  CHECK(f.graph_replays() == 3);
  ref::check_close(out.cpu(), want(xt, wt, bt), 1e-4, 1e-6);
  // then a fresh input: the staged graph, captured once
  const auto x2 = kiln::randn<float>({16, 40}, 8);
  for (int i = 0; i < 3; ++i) ref::check_close(f(x = x2.cuda(), w = wd, b = bd).cpu(), want(x2, wt, bt), 1e-4, 1e-6);
  CHECK(f.graph_captures() == 2);
  // the first tensors again: the in-place graph replays
  f.into(out, x = xd, w = wd, b = bd);
  CHECK(f.graph_captures() == 2);
  ref::check_close(out.cpu(), want(xt, wt, bt), 1e-4, 1e-6);
}

TEST_CASE("steady-state calls never call cudaMalloc") {
  auto ro = kiln::compile<kiln::ReduceOverhead>(ffn);
  auto df = kiln::compile(ffn);
  const auto xd = kiln::randn<float>({64, 40}, 1).cuda(), wd = kiln::randn<float>({40, 24}, 2).cuda(),
             bd = kiln::randn<float>({24}, 3).cuda();
  kiln::Tensor<float> out({64, 24}, kiln::Device::cuda());
  for (int i = 0; i < 3; ++i) ro.into(out, x = xd, w = wd, b = bd), (void)df(x = xd, w = wd, b = bd);
  const auto before = kiln::cuda::memory_stats().cuda_mallocs;
  for (int i = 0; i < 20; ++i) ro.into(out, x = xd, w = wd, b = bd), (void)df(x = xd, w = wd, b = bd);
  kiln::cuda::synchronize();
  CHECK(kiln::cuda::memory_stats().cuda_mallocs == before);
}

TEST_CASE("MaxAutotune tunes on the device and gives the same result") {
  // A fresh cache: with an earlier run's, the choices are read back and the candidates (the
  // block sizes the explain() check looks for) are not described.
  const test_support::ScopedCacheDir cache("modes");
  auto f = kiln::compile<kiln::MaxAutotune>(ffn);
  const auto xt = kiln::randn<float>({128, 40}, 5), wt = kiln::randn<float>({40, 24}, 6), bt = kiln::randn<float>({24}, 7);
  const auto xd = xt.cuda(), wd = wt.cuda(), bd = bt.cuda();
  ref::check_close(f(x = xd, w = wd, b = bd).cpu(), want(xt, wt, bt), 1e-4, 1e-6);
  ref::check_close(f(x = xd, w = wd, b = bd).cpu(), want(xt, wt, bt), 1e-4, 1e-6);
  CHECK(f.autotune_stats().tuned + f.autotune_stats().from_cache == static_cast<int>(f.kernel_count()));
  CHECK(f.explain().find("threads/block") != std::string::npos);
  // A second object reads every choice back: what tuning stores is a configuration the kernels
  // offer when the cache is read (runtime/autotune.hpp, offered).
  auto g = kiln::compile<kiln::MaxAutotune>(ffn);
  ref::check_close(g(x = xd, w = wd, b = bd).cpu(), want(xt, wt, bt), 1e-4, 1e-6);
  CHECK(g.autotune_stats().tuned == 0);
  CHECK(g.autotune_stats().from_cache == f.autotune_stats().tuned + f.autotune_stats().from_cache);
}

TEST_CASE("profile() times each kernel on the device") {
  auto f = kiln::compile(ffn);
  const auto xd = kiln::randn<float>({64, 40}, 1).cuda(), wd = kiln::randn<float>({40, 24}, 2).cuda(),
             bd = kiln::randn<float>({24}, 3).cuda();
  f.profile();
  (void)f(x = xd, w = wd, b = bd);
  CHECK(f.explain().find("ms per call") != std::string::npos);
}

TEST_CASE("errors: mixed devices, out of memory, a failed CUDA call") {
  auto f = kiln::compile(ffn);
  const auto xt = kiln::randn<float>({4, 40}, 1), wt = kiln::randn<float>({40, 24}, 2), bt = kiln::randn<float>({24}, 3);
  CHECK_THROWS_WITH_AS(f(x = xt.cuda(), w = wt, b = bt), doctest::Contains("cuda:0"), kiln::DeviceError);
  kiln::Tensor<float> host_out({4, 24});
  CHECK_THROWS_AS(f.into(host_out, x = xt.cuda(), w = wt.cuda(), b = bt.cuda()), kiln::DeviceError);
  try {
    kiln::Tensor<float> huge({std::size_t{1} << 40}, kiln::Device::cuda());  // 4 TiB
    FAIL("allocated 4 TiB");
  } catch (const kiln::OutOfMemory& e) {
    CHECK(e.requested == (std::size_t{4} << 40));
    CHECK(e.free > 0);
  }
  // the process goes on: allocate and run again
  ref::check_close(f(x = xt.cuda(), w = wt.cuda(), b = bt.cuda()).cpu(), want(xt, wt, bt), 1e-4, 1e-6);
  CHECK_THROWS_WITH_AS(KILN_CUDA_CHECK(cudaSetDevice(999)), doctest::Contains("cudaSetDevice(999)"), kiln::CudaError);
}

// Scalar kernels (one value from the call's inputs: here two AdamW-like bias corrections) run
// first, as one launch (cuda::ScalarBatch); the result must be the plan-order one, in Default
// and in ReduceOverhead's graphs, as t changes between calls. Against float64.
TEST_CASE("scalar kernels run as one launch, with the plan-order result") {
  constexpr auto t = kiln::input<"t", 0>();
  constexpr auto y = x * (0.01f / (1.0f - kiln::exp(t * -0.105f))) + x * kiln::rsqrt(1.0f - kiln::exp(t * -0.5f));
  auto df = kiln::compile(y);
  auto ro = kiln::compile<kiln::ReduceOverhead>(y);
  CHECK(df.kernel_count() == 3);  // two scalar chains and the pointwise kernel
  const auto xh = kiln::randn<float>({16, 40}, 7);
  const auto xd = xh.cuda();
  kiln::Tensor<float> th(kiln::Shape{});
  for (int step = 1; step <= 4; ++step) {
    th[0] = static_cast<float>(step);
    const auto td = th.cuda();
    const double c1 = 0.01 / (1.0 - std::exp(step * -0.105)), c2 = 1.0 / std::sqrt(1.0 - std::exp(step * -0.5));
    const auto want = ref::map(ref::from(xh), [&](double v) { return v * c1 + v * c2; });
    ref::check_close(df(x = xd, t = td).cpu(), want, 1e-5, 1e-6);
    ref::check_close(ro(x = xd, t = td).cpu(), want, 1e-5, 1e-6);
  }
}

TEST_CASE_FIXTURE(cases::OnGpu, "multiple outputs: a merged kernel writes both values; the broadcast fallback runs both") {
  merge_cases::merged_outputs();
}

TEST_CASE_FIXTURE(cases::OnGpu, "multiple outputs: merged in-place updates read the old values; the fallback copies") {
  merge_cases::merged_in_place_updates();
}

TEST_CASE_FIXTURE(cases::OnGpu, "plan: a sum_to that sums nothing is not run; its readers read its input") {
  plan_cases::identity_sum_to_not_run();
}

TEST_CASE_FIXTURE(cases::OnGpu, "plan: a vjp's cotangent given whole is read in place, not copied") {
  plan_cases::whole_cotangent_not_copied();
}

TEST_CASE_FIXTURE(cases::OnGpu, "plan: an output that is a reshape of a stored value is written by its kernel") {
  plan_cases::reshaped_output_written_in_place();
}

TEST_CASE_FIXTURE(cases::OnGpu, "plan: a sum_to that sums nothing and is assigned is still run") {
  plan_cases::assigned_identity_sum_to_runs();
}

TEST_CASE_FIXTURE(cases::OnGpu, "plan: an eager chain reuses its intermediates' memory and stays correct") {
  plan_cases::eager_chain_reuses_memory();
}

TEST_CASE_FIXTURE(cases::OnGpu, "plan: a bias gradient is written by its weight gradient's GEMM (cuBLASLt's BGRADA)") {
  const bool h200 = kiln::cuda::device_is_sm90();  // where cuBLASLt was seen to offer BGRADA
  plan_cases::bias_gradient_beside_the_weight_gradient(37, 11, 24, h200);
  plan_cases::bias_gradient_beside_the_weight_gradient<float, kiln::ReduceOverhead>(256, 784, 1024, h200);  // W5's first layer
  plan_cases::bias_gradient_beside_the_weight_gradient<kiln::bf16>(300, 512, 1024, h200);
}

TEST_SUITE_END();
