// The fusion contract, checked through kernel_count(), and the plan text of explain(). The
// cases that run kernels are in merge_cases.hpp and plan_cases.hpp (the GPU runs them too).
#include <bit>
#include <cstdint>
#include <type_traits>

#include "merge_cases.hpp"
#include "plan_cases.hpp"
#include "reference.hpp"
#include "kiln/lower/hoist.hpp"
#include "kiln/lower/online.hpp"

namespace {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto r = kiln::input<"r", 2>();
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
constexpr auto g = kiln::param<"g", 1>();
constexpr auto w2 = kiln::param<"w2", 2>();
constexpr auto b2 = kiln::param<"b2", 1>();
constexpr auto v = kiln::input<"v", 1>();
}  // namespace

TEST_CASE("W1, a pointwise chain, is one kernel; eager runs one per op") {
  constexpr auto y = kiln::gelu(v * 1.5f + 0.5f) * kiln::sigmoid(v) + kiln::tanh(v);
  CHECK(kiln::compile(y).kernel_count() == 1);
  CHECK(kiln::eager(y).kernel_count() == 7);  // mul, add, gelu, sigmoid, mul, tanh, add
  CHECK(kiln::compile<kiln::Eager>(y).kernel_count() == 7);
}

TEST_CASE("add + layer_norm is one kernel") {
  CHECK(kiln::compile(kiln::layer_norm(x + r, g, b, 1e-5)).kernel_count() == 1);
}

TEST_CASE("softmax and log_softmax are one kernel each") {
  CHECK(kiln::compile(kiln::softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::log_softmax(x)).kernel_count() == 1);
}

TEST_CASE("gelu(matmul(x, w) + b) is one GEMM with bias and GELU in its epilogue") {
  auto f = kiln::compile(kiln::gelu(kiln::matmul(x, w) + b));
  CHECK(f.kernel_count() == 1);
  const std::string plan = f.explain();
  CHECK(plan.find("gemm + epilogue") != std::string::npos);
  CHECK(plan.find("[matmul, add, gelu]") != std::string::npos);
  CHECK(kiln::explain(kiln::gelu(kiln::matmul(x, w) + b)) == plan);
}

TEST_CASE("W4, the FFN, is two kernels") {
  constexpr auto y = kiln::matmul(kiln::gelu(kiln::matmul(x, w) + b), w2) + b2;
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 2);
  const std::string plan = f.explain();
  CHECK(plan.find("kiln plan (fused, Default, Fused): 2 kernels") != std::string::npos);
  CHECK(plan.find("kernel 1: gemm + epilogue -> %9 (output 0) = [matmul, add]") != std::string::npos);
  CHECK(kiln::eager(y).kernel_count() == 5);
}

TEST_CASE("a value used by two kernels is recomputed by each when its operands are stored anyway") {
  constexpr auto h = kiln::exp(x);
  auto f = kiln::compile(kiln::outputs(kiln::sum<0>(h), kiln::sum<1>(h)));
  // exp(x) reads only x, a symbol: each sum's kernel evaluates it, nothing is stored.
  CHECK(f.kernel_count() == 2);
  CHECK(f.explain().find("recomputes %1 exp") != std::string::npos);
  const auto xt = kiln::randn<float>({6, 9}, 4);
  auto [s0, s1] = f(x = xt);
  for (std::size_t j = 0; j < 9; ++j) {
    double want = 0;
    for (std::size_t i = 0; i < 6; ++i) want += std::exp(double(xt.at({i, j})));
    CHECK(s0[j] == doctest::Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("a value used by two kernels is materialised once when recomputing it would store more") {
  // exp(x + x): its operand x + x is read by exp alone, so it is not stored anyway; the exp
  // gets a kernel of its own (with the add fused in) and each sum reads it.
  constexpr auto h = kiln::exp(x + x);
  auto f = kiln::compile(kiln::outputs(kiln::sum<0>(h), kiln::sum<1>(h)));
  CHECK(f.kernel_count() == 3);
  CHECK(f.explain().find("= [add, exp]") != std::string::npos);
  CHECK(f.explain().find("recomputes") == std::string::npos);
}

TEST_CASE("a matmul used outside its epilogue is materialised") {
  constexpr auto m = kiln::matmul(x, w);
  auto f = kiln::compile(kiln::outputs(kiln::relu(m), m));
  CHECK(f.kernel_count() == 2);
}

TEST_CASE("the plan names reductions and what each kernel reads") {
  auto f = kiln::compile(kiln::softmax(x));
  const std::string plan = f.explain();
  CHECK(plan.find("row reduction") != std::string::npos);
  CHECK(plan.find("[max, sub, exp, sum, div]") != std::string::npos);
  CHECK(plan.find("reads x") != std::string::npos);
}

TEST_CASE("a scalar chain gets a kernel of its own; a single scalar op stays inline") {
  constexpr auto t = kiln::input<"t", 0>();
  // lr / (1 - 0.9^t), AdamW's step size: four scalar ops, computed once, not per element.
  auto f = kiln::compile(x * (0.01f / (1.0f - kiln::exp(t * -0.105f))));
  CHECK(f.kernel_count() == 2);
  CHECK(f.explain().find("= [mul, exp, sub, div]; reads t") != std::string::npos);
  auto g = kiln::compile(x * (t * 0.5f));
  CHECK(g.kernel_count() == 1);
  const auto xt = kiln::randn<float>({3, 5}, 1);
  kiln::Tensor<float> tt(kiln::Shape{});
  tt[0] = 3.0f;
  const auto y = f(x = xt, t = tt);
  for (std::size_t i = 0; i < y.numel(); ++i)
    CHECK(y[i] == doctest::Approx(xt[i] * (0.01 / (1 - std::exp(3 * -0.105)))).epsilon(1e-5));
}

TEST_CASE("a row kernel's slots of one node alias; row-invariant subtrees hoist out of the output tree") {
  // layer_norm(x + r): the stages read x and r in their own iteration spaces (slots of their
  // own), the output tree reads them again with g and b.
  using E = std::remove_cvref_t<decltype(kiln::layer_norm(x + r, g, b, 1e-5))>;
  using K = kiln::lower::Program<E, true>::kernel<0>;
  static_assert(K::nstages == 2);
  using A = typename K::alias;
  static_assert(A::size == K::nloads && K::nloads > 4, "x and r have slots in more than one space");
  int aliased = 0;
  for (int k = 0; k < K::nloads; ++k) {
    CHECK(A::of(k) <= k);
    CHECK(A::of(A::of(k)) == A::of(k));  // an alias is a slot's first
    aliased += A::of(k) != k;
  }
  CHECK(aliased == K::nloads - 4);  // four nodes: x, r, g, b
  // Remapped, every tree reads only first slots: four loads in all.
  using Stages = typename kiln::lower::remap_slots<typename K::stages, A>::type;
  using Out = typename kiln::lower::remap_slots<typename K::out_tree, A>::type;
  constexpr auto stage_mask = []<class... S>(kiln::lower::TypeList<S...>) {
    return (std::uint64_t{0} | ... | kiln::lower::tree_loads<typename S::tree, false>::value);
  }(Stages{});
  CHECK(std::popcount(stage_mask | kiln::lower::tree_loads<Out, false>::value) == 4);
  CHECK(std::popcount(stage_mask) == 2);  // x and r
  // The output tree's rsqrt(var + eps) is one value per row: hoisted to stage 2.
  using H = kiln::lower::hoist_invariants<Out, 2>;
  static_assert(H::list::size == 1);
  CHECK(kiln::lower::tree_ops<typename H::type>::value < kiln::lower::tree_ops<Out>::value);
  // softmax: the division by the row's sum becomes a product with its reciprocal, per row.
  using SE = std::remove_cvref_t<decltype(kiln::softmax(x))>;
  using SK = kiln::lower::Program<SE, true>::kernel<0>;
  using SH = kiln::lower::hoist_invariants<typename SK::out_tree, SK::nstages>;
  static_assert(SH::list::size == 1);
  static_assert(std::is_same_v<typename SH::list, kiln::lower::TypeList<kiln::lower::LOp<kiln::lower::Reciprocal, kiln::lower::LStage<1>>>>);
  // Online softmax (lower/online.hpp): softmax's and log_softmax's max and sum stages read the
  // same values (through SlotAlias), so a streamed row computes both in one pass; layer norm's
  // mean and variance are no such pair.
  static_assert(kiln::lower::online_first<typename SK::stages, typename SK::alias>::value == 0);
  using LSK = kiln::lower::Program<std::remove_cvref_t<decltype(kiln::log_softmax(x))>, true>::kernel<0>;
  static_assert(kiln::lower::online_first<typename LSK::stages, typename LSK::alias>::value == 0);
  static_assert(kiln::lower::online_first<typename K::stages, typename K::alias>::value == -1);
  // Without the aliases the sum reads other slots than the max: not a pair.
  static_assert(kiln::lower::online_first<typename SK::stages, kiln::lower::SlotAlias<>>::value == -1);
  // A tree without stages or constants hoists nothing.
  using P = kiln::lower::hoist_invariants<kiln::lower::LOp<kiln::Add, kiln::lower::LLoad<0>, kiln::lower::LLoad<1>>, 0>;
  static_assert(P::list::size == 0 && std::is_same_v<typename P::type, kiln::lower::LOp<kiln::Add, kiln::lower::LLoad<0>, kiln::lower::LLoad<1>>>);
}

TEST_CASE("a pointwise kernel read first by a later pointwise kernel runs inside it, where the shapes agree") {
  merge_cases::merged_outputs();
}

TEST_CASE("merged in-place updates read every old value (AdamW's pattern), and the broadcast fallback copies") {
  merge_cases::merged_in_place_updates();
}

TEST_CASE("a sum_to that sums nothing is not run: its readers read its input") {
  plan_cases::identity_sum_to_not_run();
}

TEST_CASE("a vjp's cotangent given whole is read in place, not copied by a sum_to of its own") {
  plan_cases::whole_cotangent_not_copied();
}

TEST_CASE("an output that is a reshape of a stored value is written by that value's kernel") {
  plan_cases::reshaped_output_written_in_place();
}

TEST_CASE("a sum_to that sums nothing and is an output (here assigned) is still run") {
  plan_cases::assigned_identity_sum_to_runs();
}

TEST_CASE("a bias gradient's sum_to is planned beside its weight gradient's GEMM (run on its own on the CPU)") {
  plan_cases::bias_gradient_beside_the_weight_gradient(37, 11, 24);
}

