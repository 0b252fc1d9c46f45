// kiln tests: an independent float64 reference. Naive loops over explicit multi-indices with
// numpy broadcasting, and the C library's maths; nothing here shares code with kiln's kernels.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>

namespace ref {

struct Array {
  std::vector<std::size_t> shape;
  std::vector<double> data;
  std::size_t numel() const { return data.size(); }
};

inline std::size_t count(const std::vector<std::size_t>& s) {
  std::size_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
inline Array zeros(std::vector<std::size_t> s) { return {s, std::vector<double>(count(s), 0.0)}; }

template <class T>
Array from(const kiln::Tensor<T>& t) {
  Array a{std::vector<std::size_t>(t.shape().begin(), t.shape().end()), {}};
  a.data.resize(t.numel());
  for (std::size_t i = 0; i < t.numel(); ++i) a.data[i] = static_cast<double>(kiln::widen(t[i]));
  return a;
}

// Multi-index of linear position i in shape s.
inline std::vector<std::size_t> unravel(std::size_t i, const std::vector<std::size_t>& s) {
  std::vector<std::size_t> idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
// The row-major offset of multi-index idx in shape s (unravel's inverse).
inline std::size_t ravel(const std::vector<std::size_t>& idx, const std::vector<std::size_t>& s) {
  std::size_t off = 0;
  for (std::size_t d = 0; d < s.size(); ++d) off = off * s[d] + idx[d];
  return off;
}
// Value of a at the (right-aligned, broadcast) multi-index idx of a larger shape.
inline double at_broadcast(const Array& a, const std::vector<std::size_t>& idx) {
  std::size_t off = 0;
  const std::size_t shift = idx.size() - a.shape.size();
  for (std::size_t d = 0; d < a.shape.size(); ++d) off = off * a.shape[d] + (a.shape[d] == 1 ? 0 : idx[d + shift]);
  return a.data[off];
}
inline std::vector<std::size_t> broadcast_shape(const std::vector<std::size_t>& a, const std::vector<std::size_t>& b) {
  const std::size_t r = std::max(a.size(), b.size());
  std::vector<std::size_t> out(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::size_t x = d + a.size() >= r ? a[d + a.size() - r] : 1;
    const std::size_t y = d + b.size() >= r ? b[d + b.size() - r] : 1;
    out[d] = x == 1 ? y : x;
  }
  return out;
}

inline Array map(const Array& a, const std::function<double(double)>& f) {
  Array o = a;
  for (auto& v : o.data) v = f(v);
  return o;
}
inline Array zip(const Array& a, const Array& b, const std::function<double(double, double)>& f) {
  Array o = zeros(broadcast_shape(a.shape, b.shape));
  for (std::size_t i = 0; i < o.numel(); ++i) {
    const auto idx = unravel(i, o.shape);
    o.data[i] = f(at_broadcast(a, idx), at_broadcast(b, idx));
  }
  return o;
}
inline Array zip3(const Array& a, const Array& b, const Array& c, const std::function<double(double, double, double)>& f) {
  Array o = zeros(broadcast_shape(broadcast_shape(a.shape, b.shape), c.shape));
  for (std::size_t i = 0; i < o.numel(); ++i) {
    const auto idx = unravel(i, o.shape);
    o.data[i] = f(at_broadcast(a, idx), at_broadcast(b, idx), at_broadcast(c, idx));
  }
  return o;
}

enum class Red { Sum, Mean, Max, Min };
inline double identity(Red r) {
  return r == Red::Max ? -INFINITY : r == Red::Min ? INFINITY : 0.0;
}
inline double combine(Red r, double a, double b) {
  return r == Red::Max ? std::max(a, b) : r == Red::Min ? std::min(a, b) : a + b;
}
// Reduce axis `axis` (>= 0); keep: leave it with extent 1.
inline Array reduce(const Array& a, int axis, Red r, bool keep) {
  std::vector<std::size_t> s = a.shape;
  s[axis] = 1;
  Array o = zeros(s);
  for (auto& v : o.data) v = identity(r);
  for (std::size_t i = 0; i < a.numel(); ++i) {
    auto idx = unravel(i, a.shape);
    idx[axis] = 0;
    std::size_t off = 0;
    for (std::size_t d = 0; d < s.size(); ++d) off = off * s[d] + idx[d];
    o.data[off] = combine(r, o.data[off], a.data[i]);
  }
  if (r == Red::Mean)
    for (auto& v : o.data) v /= static_cast<double>(a.shape[axis]);
  if (!keep) o.shape.erase(o.shape.begin() + axis);
  return o;
}
inline Array reduce_all(const Array& a, Red r) {
  double acc = identity(r);
  for (double v : a.data) acc = combine(r, acc, v);
  if (r == Red::Mean) acc /= static_cast<double>(a.numel());
  return {{}, {acc}};
}

// [.., M, K] x [.., K, N] with a broadcast batch axis.
inline Array matmul(const Array& a, const Array& b) {
  const std::size_t ra = a.shape.size(), rb = b.shape.size();
  const std::size_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  const std::size_t Ba = ra == 3 ? a.shape[0] : 1, Bb = rb == 3 ? b.shape[0] : 1, B = std::max(Ba, Bb);
  Array o = zeros(ra == 3 || rb == 3 ? std::vector<std::size_t>{B, M, N} : std::vector<std::size_t>{M, N});
  for (std::size_t bt = 0; bt < B; ++bt)
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        double acc = 0;
        for (std::size_t k = 0; k < K; ++k)
          acc += a.data[(Ba == 1 ? 0 : bt) * M * K + i * K + k] * b.data[(Bb == 1 ? 0 : bt) * K * N + k * N + j];
        o.data[bt * M * N + i * N + j] = acc;
      }
  return o;
}

inline Array transpose(const Array& a) {
  const std::size_t r = a.shape.size();
  std::vector<std::size_t> s = a.shape;
  std::swap(s[r - 1], s[r - 2]);
  Array o = zeros(s);
  for (std::size_t i = 0; i < o.numel(); ++i) {
    auto idx = unravel(i, s);
    std::swap(idx[r - 1], idx[r - 2]);
    std::size_t off = 0;
    for (std::size_t d = 0; d < r; ++d) off = off * a.shape[d] + idx[d];
    o.data[i] = a.data[off];
  }
  return o;
}

inline Array softmax(const Array& a) {
  const int last = static_cast<int>(a.shape.size()) - 1;
  const Array m = reduce(a, last, Red::Max, true);
  const Array e = zip(a, m, [](double x, double y) { return std::exp(x - y); });
  return zip(e, reduce(e, last, Red::Sum, true), [](double x, double y) { return x / y; });
}
inline Array log_softmax(const Array& a) {
  const int last = static_cast<int>(a.shape.size()) - 1;
  const Array m = reduce(a, last, Red::Max, true);
  const Array sh = zip(a, m, [](double x, double y) { return x - y; });
  const Array lse = map(reduce(map(sh, [](double x) { return std::exp(x); }), last, Red::Sum, true),
                        [](double x) { return std::log(x); });
  return zip(sh, lse, [](double x, double y) { return x - y; });
}
inline Array layer_norm(const Array& x, const Array& g, const Array& b, double eps) {
  const int last = static_cast<int>(x.shape.size()) - 1;
  const Array mu = reduce(x, last, Red::Mean, true);
  const Array c = zip(x, mu, [](double p, double q) { return p - q; });
  const Array var = reduce(map(c, [](double v) { return v * v; }), last, Red::Mean, true);
  const Array n = zip(c, var, [eps](double p, double v) { return p / std::sqrt(v + eps); });
  return zip(zip(n, g, [](double p, double q) { return p * q; }), b, [](double p, double q) { return p + q; });
}

inline Array rms_norm(const Array& x, const Array& w, double eps) {
  const int last = static_cast<int>(x.shape.size()) - 1;
  const Array ms = reduce(map(x, [](double v) { return v * v; }), last, Red::Mean, true);
  const Array n = zip(x, ms, [eps](double p, double m) { return p / std::sqrt(m + eps); });
  return zip(n, w, [](double p, double q) { return p * q; });
}

inline double gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
// x/2 (1 + tanh u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): the second form,
// because 1 + tanh u cancels in double too (0 for u below about -19).
inline double gelu_tanh(double x) {
  return x / (1 + std::exp(-2 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// Element type tolerances: |got - want| <= atol + rtol |want|.
template <class T>
struct Tol;
template <>
struct Tol<float> {
  static constexpr double rtol = 2e-5, atol = 2e-6;
};
template <>
struct Tol<double> {
  static constexpr double rtol = 1e-12, atol = 1e-13;
};
// 16-bit types: the result is rounded once to 8 (bf16) or 11 (f16) significant bits, so half
// an ulp is 2^-8 or 2^-11 relative; inputs are already 16-bit, so a reference computed from
// them in float64 differs by the one rounding plus float-accumulation noise.
template <>
struct Tol<kiln::bf16> {
  static constexpr double rtol = 8e-3, atol = 1e-3;
};
template <>
struct Tol<kiln::f16> {
  static constexpr double rtol = 1e-3, atol = 1e-4;
};

template <class T>
void check_close(const kiln::Tensor<T>& got, const Array& want, double rtol = Tol<T>::rtol, double atol = Tol<T>::atol) {
  const std::vector<std::size_t> gs(got.shape().begin(), got.shape().end());
  REQUIRE(gs == want.shape);
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < want.numel(); ++i) {
    const double g = static_cast<double>(kiln::widen(got[i])), w = want.data[i];
    const bool ok = (std::isnan(w) && std::isnan(g)) || (std::isinf(w) && g == w) ||
                    std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok && bad++ == 0) first = i;
    if (std::isfinite(w)) worst = std::max(worst, std::abs(g - w) / (atol + rtol * std::abs(w)));
  }
  INFO("elements out of tolerance: " << bad << " of " << want.numel() << "; first at " << first
                                     << (bad ? " got " + std::to_string(static_cast<double>(kiln::widen(got[first]))) + " want " + std::to_string(want.data[first]) : "")
                                     << "; worst error / tolerance " << worst);
  CHECK(bad == 0);
}

}  // namespace ref
