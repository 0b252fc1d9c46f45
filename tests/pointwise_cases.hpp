// Every pointwise op, compiled and eager, against the float64 reference on fresh random data.
// Registered by ops_pointwise_f32.cpp and ops_pointwise_f64.cpp with T set, with DEVICE_CASE:
// on the CPU, and on the GPU (cases::device(), on_device.hpp).
#pragma once
#include "on_device.hpp"

namespace pointwise_cases {

// The shapes every unary case runs over: odd extents (SIMD loops run their remainders), one
// element, one row and one column, rows of 64 (a multiple of every SIMD width, so no
// remainder) and rows of 67 and 17 (not a multiple of 4, 8 or 16 lanes).
inline const kiln::Shape kShapes[] = {{37, 53}, {1, 1}, {1, 67}, {67, 1}, {8, 64}, {3, 17}};

// The operand shapes of every binary case: equal shapes, and broadcasts of a row, of a column,
// and of a column against a row (an outer product's shape).
struct ShapePair {
  kiln::Shape a, b;
};
inline const ShapePair kShapePairs[] = {{{37, 53}, {37, 53}}, {{1, 1}, {1, 1}},   {{1, 67}, {1, 67}},
                                        {{3, 17}, {1, 17}},   {{8, 64}, {8, 1}},  {{5, 1}, {1, 67}},
                                        {{1, 1}, {7, 19}}};

// Where the inputs live, and so where the kernels run: the switch every shared case file uses.
using cases::device;

template <class T>
kiln::Tensor<T> uniform(const kiln::Shape& shape, double lo, double hi, std::uint64_t seed) {
  return kiln::rand<T>(shape, seed, static_cast<T>(lo), static_cast<T>(hi)).to(device());
}

template <class T, class Build, class RefFn>
void unary(const char* name, Build build, RefFn reference, double lo, double hi, double rtol = ref::Tol<T>::rtol) {
  constexpr auto x = kiln::input<"x", 2, T>();
  constexpr auto y = build(x);
  auto f = kiln::compile(y);
  auto e = kiln::eager(y);
  INFO("op: " << name);
  CHECK(f.kernel_count() == 1);
  for (const kiln::Shape& shape : kShapes) {
    INFO("shape " << shape.str());
    const auto xt = uniform<T>(shape, lo, hi, 11);
    const auto want = ref::map(ref::from(xt.cpu()), reference);
    ref::check_close(f(x = xt).cpu(), want, rtol);  // the shape too
    ref::check_close(e(x = xt).cpu(), want, rtol);
  }
}

template <class T, class Build, class RefFn>
void binary(const char* name, Build build, RefFn reference, double lo, double hi, double rtol = ref::Tol<T>::rtol) {
  constexpr auto a = kiln::input<"a", 2, T>();
  constexpr auto b = kiln::input<"b", 2, T>();
  constexpr auto y = build(a, b);
  auto f = kiln::compile(y);
  auto e = kiln::eager(y);
  INFO("op: " << name);
  for (const auto& [sa, sb] : kShapePairs) {
    INFO("shapes " << sa.str() << " and " << sb.str());
    const auto at = uniform<T>(sa, lo, hi, 21), bt = uniform<T>(sb, lo, hi, 22);
    const auto want = ref::zip(ref::from(at.cpu()), ref::from(bt.cpu()), reference);
    ref::check_close(f(a = at, b = bt).cpu(), want, rtol);  // the shape too
    ref::check_close(e(a = at, b = bt).cpu(), want, rtol);
  }
}

template <class T>
void all_unary() {
  using std::exp;
  unary<T>("neg", [](auto x) { return -x; }, [](double v) { return -v; }, -5, 5);
  unary<T>("exp", [](auto x) { return kiln::exp(x); }, [](double v) { return std::exp(v); }, -20, 20);
  unary<T>("log", [](auto x) { return kiln::log(x); }, [](double v) { return std::log(v); }, 1e-3, 1e3);
  unary<T>("sqrt", [](auto x) { return kiln::sqrt(x); }, [](double v) { return std::sqrt(v); }, 0, 100);
  unary<T>("rsqrt", [](auto x) { return kiln::rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 1e-2, 100);
  unary<T>("abs", [](auto x) { return kiln::abs(x); }, [](double v) { return std::abs(v); }, -5, 5);
  unary<T>("tanh", [](auto x) { return kiln::tanh(x); }, [](double v) { return std::tanh(v); }, -10, 10);
  unary<T>("sin", [](auto x) { return kiln::sin(x); }, [](double v) { return std::sin(v); }, -40, 40);
  unary<T>("cos", [](auto x) { return kiln::cos(x); }, [](double v) { return std::cos(v); }, -40, 40);
  unary<T>("sigmoid", [](auto x) { return kiln::sigmoid(x); }, ref::sigmoid, -30, 30);
  unary<T>("relu", [](auto x) { return kiln::relu(x); }, [](double v) { return v < 0 ? 0.0 : v; }, -5, 5);
  unary<T>("gelu", [](auto x) { return kiln::gelu(x); }, ref::gelu, -6, 6);
  unary<T>("gelu_tanh", [](auto x) { return kiln::gelu_tanh(x); }, ref::gelu_tanh, -6, 6);
  unary<T>("square", [](auto x) { return kiln::square(x); }, [](double v) { return v * v; }, -5, 5);
  unary<T>("silu", [](auto x) { return kiln::silu(x); }, ref::silu, -20, 20);
  unary<T>("softcap 30", [](auto x) { return kiln::softcap(x, 30.0); }, [](double v) { return 30 * std::tanh(v / 30); },
           -100, 100);
  unary<T>("pow 2.5", [](auto x) { return kiln::pow(x, 2.5); }, [](double v) { return std::pow(v, 2.5); }, 0, 10,
           std::is_same_v<T, float> ? 5e-6 : 1e-12);
  unary<T>("pow -1 (negative base)", [](auto x) { return kiln::pow(x, -1); }, [](double v) { return 1 / v; }, -5, -0.1);
  unary<T>("scalar on the left", [](auto x) { return 2 - x / 4; }, [](double v) { return 2 - v / 4; }, -5, 5);
  unary<T>("scalar comparison", [](auto x) { return x > 0.5; }, [](double v) { return v > 0.5 ? 1.0 : 0.0; }, -1, 1);
}

template <class T>
void all_binary() {
  binary<T>("add", [](auto a, auto b) { return a + b; }, [](double p, double q) { return p + q; }, -5, 5);
  binary<T>("sub", [](auto a, auto b) { return a - b; }, [](double p, double q) { return p - q; }, -5, 5);
  binary<T>("mul", [](auto a, auto b) { return a * b; }, [](double p, double q) { return p * q; }, -5, 5);
  binary<T>("div", [](auto a, auto b) { return a / b; }, [](double p, double q) { return p / q; }, 0.5, 5);
  binary<T>("maximum", [](auto a, auto b) { return kiln::maximum(a, b); }, [](double p, double q) { return std::max(p, q); }, -5, 5);
  binary<T>("minimum", [](auto a, auto b) { return kiln::minimum(a, b); }, [](double p, double q) { return std::min(p, q); }, -5, 5);
  binary<T>("less", [](auto a, auto b) { return a < b; }, [](double p, double q) { return p < q ? 1.0 : 0.0; }, -5, 5);
  binary<T>("greater", [](auto a, auto b) { return a > b; }, [](double p, double q) { return p > q ? 1.0 : 0.0; }, -5, 5);
  binary<T>("less_equal", [](auto a, auto b) { return a <= b; }, [](double p, double q) { return p <= q ? 1.0 : 0.0; }, -5, 5);
  binary<T>("greater_equal", [](auto a, auto b) { return a >= b; }, [](double p, double q) { return p >= q ? 1.0 : 0.0; }, -5, 5);
  binary<T>("where", [](auto a, auto b) { return kiln::where(a < b, a * 2, b); },
            [](double p, double q) { return p < q ? 2 * p : q; }, -5, 5);
  binary<T>("where with a scalar branch", [](auto a, auto b) { return kiln::where(a >= b, 0.0, a - b); },
            [](double p, double q) { return p >= q ? 0.0 : p - q; }, -5, 5);
  binary<T>("swiglu", [](auto a, auto b) { return kiln::swiglu(a, b); },
            [](double p, double q) { return ref::silu(p) * q; }, -8, 8);
  binary<T>("chain", [](auto a, auto b) { return kiln::tanh(a * b + 1) - kiln::exp(-kiln::square(b)) / (1 + kiln::abs(a)); },
            [](double p, double q) { return std::tanh(p * q + 1) - std::exp(-q * q) / (1 + std::abs(p)); }, -3, 3);
}

}  // namespace pointwise_cases
