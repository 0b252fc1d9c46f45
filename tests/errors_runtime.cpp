// Call-time errors: ShapeError names the op and the shapes; a failed call writes nothing and
// leaves the compiled object usable.
#include "reference.hpp"

namespace {
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const kiln::ShapeError& e) {
    return e.what();
  }
  return "(no ShapeError)";
}
}  // namespace

TEST_CASE("matmul with mismatched inner dimensions") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  auto f = kiln::compile(kiln::gelu(kiln::matmul(x, w)));
  const kiln::Tensor<float> xt({64, 768}), wt({512, 3072});
  CHECK(message_of([&] { f(x = xt, w = wt); }) == "matmul: inner dimensions differ: [64, 768] x [512, 3072]");
  CHECK_THROWS_AS(f(x = xt, w = wt), std::invalid_argument);  // ShapeError is an invalid_argument
}

TEST_CASE("batched matmul with mismatched batches") {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto b = kiln::input<"b", 3>();
  auto f = kiln::compile(kiln::matmul(a, b));
  const kiln::Tensor<float> at({2, 3, 4}), bt({3, 4, 5});
  CHECK(message_of([&] { f(a = at, b = bt); }) == "matmul: batch dimensions differ: [2, 3, 4] x [3, 4, 5]");
}

TEST_CASE("broadcast failures name the op") {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  auto f = kiln::compile(kiln::exp(a) * b);
  const kiln::Tensor<float> at({4, 3}), bt({5, 3});
  CHECK(message_of([&] { f(a = at, b = bt); }) == "mul: shapes cannot be broadcast: [4, 3] and [5, 3]");
}

// The norms' weights broadcast against the row: a weight of another length than the rows is
// the broadcast error of the multiply by it, naming both shapes, before any kernel runs.
TEST_CASE("layer_norm and rms_norm with a weight of the wrong length") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  const kiln::Tensor<float> xt = kiln::randn<float>({4, 7}, 1), bad = kiln::randn<float>({5}, 2),
                            bt = kiln::randn<float>({7}, 3);
  auto ln = kiln::compile(kiln::layer_norm(x, g, b, 1e-5));
  auto ln_no_bias = kiln::compile(kiln::layer_norm(x, g));
  auto rms = kiln::compile(kiln::rms_norm(x, g));
  CHECK(message_of([&] { ln(x = xt, g = bad, b = bt); }) == "mul: shapes cannot be broadcast: [4, 7] and [5]");
  CHECK(message_of([&] { ln_no_bias(x = xt, g = bad); }) == "mul: shapes cannot be broadcast: [4, 7] and [5]");
  CHECK(message_of([&] { rms(x = xt, g = bad); }) == "mul: shapes cannot be broadcast: [4, 7] and [5]");
  CHECK(rms(x = xt, g = bt).shape() == kiln::Shape{4, 7});  // still usable
}

TEST_CASE("reshape to a different element count") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::reshape(a, {5, -1}));
  const kiln::Tensor<float> at({4, 3});
  CHECK(message_of([&] { f(a = at); }) == "reshape: cannot reshape [4, 3] into [5, -1]");
  auto g = kiln::compile(kiln::reshape(a, {5, 2}));
  CHECK(message_of([&] { g(a = at); }) == "reshape: cannot reshape [4, 3] into [5, 2]");
}

TEST_CASE("a tensor of the wrong rank for its symbol") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(a + 1);
  const kiln::Tensor<float> at({4, 3, 2});
  CHECK(message_of([&] { f(a = at); }) == "symbol 'a': expected a tensor of rank 2, got shape [4, 3, 2]");
}

TEST_CASE("after a failed call the compiled function still works, for the old and new shapes") {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(kiln::softmax(a + b));
  const auto at = kiln::randn<float>({6, 5}, 1), bt = kiln::randn<float>({5}, 2), bad = kiln::randn<float>({4}, 3);
  const auto want = ref::softmax(ref::zip(ref::from(at), ref::from(bt), [](double p, double q) { return p + q; }));
  ref::check_close(f(a = at, b = bt), want, 1e-5, 1e-7);
  CHECK_THROWS_AS(f(a = at, b = bad), kiln::ShapeError);
  ref::check_close(f(a = at, b = bt), want, 1e-5, 1e-7);
  const auto a2 = kiln::randn<float>({3, 4}, 4), b2 = kiln::randn<float>({4}, 5);
  ref::check_close(f(a = a2, b = b2),
                   ref::softmax(ref::zip(ref::from(a2), ref::from(b2), [](double p, double q) { return p + q; })), 1e-5, 1e-7);
}

TEST_CASE("bindings may come in any order") {
  constexpr auto a = kiln::input<"a", 1>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(a - b);
  const auto at = kiln::randn<float>({8}, 1), bt = kiln::randn<float>({8}, 2);
  auto p = f(a = at, b = bt), q = f(b = bt, a = at);
  for (std::size_t i = 0; i < 8; ++i) CHECK(p[i] == q[i]);
}

TEST_CASE("a result whose size overflows is a ShapeError naming the op, before any kernel runs") {
  const std::size_t big = std::size_t{1} << 40;
  // matmul [2^40, 0] x [0, 2^40]: empty operands, a [2^40, 2^40] product (2^80 elements).
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  auto mm = kiln::compile(kiln::matmul(a, b));
  const kiln::Tensor<float> at({big, 0}), bt({0, big});
  CHECK(message_of([&] { mm(a = at, b = bt); }) ==
        "matmul: the result shape [1099511627776, 1099511627776] has more elements than an index can address");
  // Broadcast [2^40, 1, 0] + [1, 2^40, 0]: no element anywhere, but the strides of the result
  // (2^80 along the first axis, zeros counted as 1) cannot be addressed.
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto y = kiln::input<"y", 3>();
  auto add = kiln::compile(x + y);
  const kiln::Tensor<float> xt({big, 1, 0}), yt({1, big, 0});
  CHECK(message_of([&] { add(x = xt, y = yt); }) ==
        "add: the result shape [1099511627776, 1099511627776, 0] has more elements than an index can address");
  // The compiled objects stay usable.
  const kiln::Tensor<float> small_a = kiln::randn<float>({2, 3}, 1), small_b = kiln::randn<float>({3, 2}, 2);
  CHECK(mm(a = small_a, b = small_b).shape() == kiln::Shape{2, 2});
}

TEST_CASE("softcap with a cap that is not positive and finite is a ValueError") {
  constexpr auto x = kiln::input<"x", 1>();
  for (double c : {0.0, -2.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    CHECK_THROWS_WITH_AS(kiln::softcap(x, c), "kiln::softcap: the cap c must be positive and finite", kiln::ValueError);
  CHECK_NOTHROW(kiln::softcap(x, 30.0));
}
