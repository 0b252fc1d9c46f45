// Compile-time graph analysis: CSE of stateless subtrees, constants kept apart, composite ops
// expanded over their operands once, use counts, topological order.
#include "reference.hpp"

namespace {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();
template <class E>
using G = kiln::graph::graph_of<E>;
}  // namespace

TEST_CASE("identical stateless subtrees are one node") {
  constexpr auto y = kiln::exp(x) + kiln::exp(x);
  using g = G<decltype(y)>;
  static_assert(g::size == 3);  // x, exp, add
  CHECK(g::info.use_count[1] == 2);  // exp used twice by add
  CHECK(g::info.nodes[2].children[0] == 1);
  CHECK(g::info.nodes[2].children[1] == 1);
  CHECK(g::info.is_output[2]);
}

TEST_CASE("constants are stored by value and never merged") {
  constexpr auto y = x * 1.5f + x * 2.5f;
  using g = G<decltype(y)>;
  static_assert(g::size == 6);  // x, 1.5, mul, 2.5, mul, add
  auto f = kiln::compile(y);
  auto xt = kiln::randn<float>({3, 4}, 1);
  auto out = f(x = xt);
  for (std::size_t i = 0; i < xt.numel(); ++i) CHECK(out[i] == doctest::Approx(4.0f * xt[i]));
}

TEST_CASE("a composite op computes its operand once, constants included") {
  constexpr auto y = kiln::softmax(x * 0.125f);
  using g = G<decltype(y)>;
  int muls = 0;
  for (int i = 0; i < g::size; ++i) muls += std::string(g::info.nodes[i].name) == "mul";
  CHECK(muls == 1);
}

TEST_CASE("nodes are in topological order and symbols appear once") {
  constexpr auto y = kiln::matmul(x, w) + kiln::matmul(x, w) * 2.0f;
  using g = G<decltype(y)>;
  int symbols = 0;
  for (int i = 0; i < g::size; ++i) {
    const auto& n = g::info.nodes[i];
    symbols += n.kind == kiln::NodeKind::Symbol;
    for (int c = 0; c < n.nchildren; ++c) CHECK(n.children[c] < i);
  }
  CHECK(symbols == 2);
  CHECK(kiln::compile(y).kernel_count() == 1);  // one GEMM, its two uses in the epilogue
}

TEST_CASE("outputs share nodes") {
  constexpr auto y = kiln::exp(x);
  constexpr auto both = kiln::outputs(y, kiln::sum(y), y);
  using g = G<decltype(both)>;
  static_assert(g::size == 3);
  static_assert(g::noutputs == 3);
  CHECK(g::info.outputs[0] == g::info.outputs[2]);
  auto f = kiln::compile(both);
  auto xt = kiln::randn<float>({5, 6}, 2);
  auto [a, s, b] = f(x = xt);
  ref::check_close(a, ref::map(ref::from(xt), [](double v) { return std::exp(v); }));
  ref::check_close(b, ref::map(ref::from(xt), [](double v) { return std::exp(v); }));
  ref::check_close(s, ref::reduce_all(ref::map(ref::from(xt), [](double v) { return std::exp(v); }), ref::Red::Sum), 1e-5);
  CHECK(a.data() != b.data());
}
