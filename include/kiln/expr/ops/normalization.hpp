// kiln: composite row ops, written as expressions of primitives. The planner fuses each into
// one row-reduction kernel: reductions along the last axis, their prologue, and the epilogue
// that broadcasts the reduced values back over the row.
#pragma once
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/pointwise.hpp"
#include "kiln/expr/ops/reduce.hpp"

namespace kiln {

// softmax(x) = e^{x - max x} / sum e^{x - max x}, over the last axis.
struct Softmax {
  static constexpr NodeKind kind = NodeKind::Pointwise;
  static constexpr bool composite = true;
  static constexpr const char* name = "softmax";
  template <class X>
  constexpr auto expand(X x) const {
    auto e = kiln::exp(x - kiln::max<-1, true>(x));
    return e / kiln::sum<-1, true>(e);
  }
  // dx = y (g - sum(g y)) along the row.
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{y * (g - kiln::sum<-1, true>(g * y))};
  }
  // dy = y (t - sum(t y)).
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    return y * (t - kiln::sum<-1, true>(t * y));
  }
};

// log_softmax(x) = (x - max x) - log sum e^{x - max x}, over the last axis.
struct LogSoftmax {
  static constexpr NodeKind kind = NodeKind::Pointwise;
  static constexpr bool composite = true;
  static constexpr const char* name = "log_softmax";
  template <class X>
  constexpr auto expand(X x) const {
    auto shifted = x - kiln::max<-1, true>(x);
    return shifted - kiln::log(kiln::sum<-1, true>(kiln::exp(shifted)));
  }
  // dx = g - e^y sum(g) along the row.
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{g - kiln::exp(y) * kiln::sum<-1, true>(g)};
  }
  // dy = t - sum(e^y t).
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    return t - kiln::sum<-1, true>(kiln::exp(y) * t);
  }
};

// layer_norm(x) = (x - mean) / sqrt(var + eps) * gamma [+ beta] over the last axis, with the
// biased variance var = mean (x - mean)^2, as PyTorch computes it; beta is optional.
struct LayerNorm {
  static constexpr NodeKind kind = NodeKind::Pointwise;
  static constexpr bool composite = true;
  static constexpr const char* name = "layer_norm";
  double eps;
  template <class X, class G, class... B>
  constexpr auto expand(X x, G gamma, B... beta) const {
    auto centred = x - kiln::mean<-1, true>(x);
    auto var = kiln::mean<-1, true>(kiln::square(centred));
    auto scaled = centred * kiln::rsqrt(var + static_cast<compute_t<typename X::dtype>>(eps)) * gamma;
    if constexpr (sizeof...(B) == 0) return scaled;
    else return (scaled + ... + beta);
  }
  // With xhat = (x - mean) rstd and d = g gamma: dx = rstd (d - mean(d) - xhat mean(d xhat)),
  // dgamma = sum of g xhat, dbeta = sum of g (summed down to their shapes).
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& x = std::get<0>(y.children);
    const auto& gamma = std::get<1>(y.children);
    const auto centred = x - kiln::mean<-1, true>(x);
    const auto rstd = kiln::rsqrt(kiln::mean<-1, true>(kiln::square(centred)) + static_cast<compute_t<typename G::dtype>>(y.op.eps));
    const auto xhat = centred * rstd;
    const auto d = g * gamma;
    auto dx = unbroadcast(rstd * (d - kiln::mean<-1, true>(d) - xhat * kiln::mean<-1, true>(d * xhat)), x);
    if constexpr (std::tuple_size_v<decltype(y.children)> == 2) return std::tuple{dx, unbroadcast(g * xhat, gamma)};
    else return std::tuple{dx, unbroadcast(g * xhat, gamma), unbroadcast(g, std::get<2>(y.children))};
  }
  // dy = rstd (tx - mean(tx) - xhat mean(tx xhat)) gamma + xhat tgamma [+ tbeta].
  template <class N, class Tx, class Tg, class... Tb>
  static constexpr auto jvp(const N& y, const Tx& tx, const Tg& tg, const Tb&... tb) {
    const auto& x = std::get<0>(y.children);
    const auto& gamma = std::get<1>(y.children);
    const auto centred = x - kiln::mean<-1, true>(x);
    const auto rstd = kiln::rsqrt(kiln::mean<-1, true>(kiln::square(centred)) + static_cast<compute_t<typename N::dtype>>(y.op.eps));
    const auto xhat = centred * rstd;
    using namespace autodiff;
    const auto dxhat = tangent_apply(
        [&](const auto& t) { return rstd * (t - kiln::mean<-1, true>(t) - xhat * kiln::mean<-1, true>(t * xhat)); }, tx);
    const auto scaled = add_cotangents(tangent_mul(dxhat, gamma), tangent_mul(tg, xhat));
    if constexpr (sizeof...(Tb) == 0) return scaled;
    else return add_cotangents(scaled, tb...);
  }
};

// rms_norm(x) = x / sqrt(mean(x^2) + eps) * weight over the last axis, as Llama's RMSNorm
// (no centring, no bias). Gemma's form, x / rms (1 + w), is rms_norm(x, 1 + w, eps).
struct RmsNorm {
  static constexpr NodeKind kind = NodeKind::Pointwise;
  static constexpr bool composite = true;
  static constexpr const char* name = "rms_norm";
  double eps;
  template <class X, class W>
  constexpr auto expand(X x, W weight) const {
    auto ms = kiln::mean<-1, true>(kiln::square(x));
    return x * kiln::rsqrt(ms + static_cast<compute_t<typename X::dtype>>(eps)) * weight;
  }
  // With r = 1 / sqrt(mean(x^2) + eps), xhat = x r and d = g weight (dr/dx = -r^3 x / n):
  // dx = r (d - xhat mean(d xhat)), dweight = sum of g xhat (summed down to its shape).
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& [x, weight] = y.children;
    const auto r =
        kiln::rsqrt(kiln::mean<-1, true>(kiln::square(x)) + static_cast<compute_t<typename G::dtype>>(y.op.eps));
    const auto xhat = x * r;
    const auto d = g * weight;
    return std::tuple{unbroadcast(r * (d - xhat * kiln::mean<-1, true>(d * xhat)), x), unbroadcast(g * xhat, weight)};
  }
  // dy = r (tx - xhat mean(tx xhat)) weight + xhat tweight.
  template <class N, class Tx, class Tw>
  static constexpr auto jvp(const N& y, const Tx& tx, const Tw& tw) {
    const auto& [x, weight] = y.children;
    const auto r =
        kiln::rsqrt(kiln::mean<-1, true>(kiln::square(x)) + static_cast<compute_t<typename N::dtype>>(y.op.eps));
    const auto xhat = x * r;
    using namespace autodiff;
    const auto dxhat =
        tangent_apply([&](const auto& t) { return r * (t - xhat * kiln::mean<-1, true>(t * xhat)); }, tx);
    return add_cotangents(tangent_mul(dxhat, weight), tangent_mul(tw, xhat));
  }
};

template <Expression X>
constexpr auto softmax(X x) {
  static_assert(X::rank >= 1, "kiln::softmax works over the last axis, so its operand needs rank >= 1");
  return Node<Softmax, X>(Softmax{}, x);
}
template <Expression X>
constexpr auto log_softmax(X x) {
  static_assert(X::rank >= 1, "kiln::log_softmax works over the last axis, so its operand needs rank >= 1");
  return Node<LogSoftmax, X>(LogSoftmax{}, x);
}
template <Expression X, Expression G, Expression B>
constexpr auto layer_norm(X x, G gamma, B beta, double eps = 1e-5) {
  static_assert(X::rank >= 1, "kiln::layer_norm works over the last axis, so its operand needs rank >= 1");
  static_assert(std::is_same_v<typename X::dtype, typename G::dtype> && std::is_same_v<typename X::dtype, typename B::dtype>,
                "kiln::layer_norm: x, gamma and beta must have one element type");
  return Node<LayerNorm, X, G, B>(LayerNorm{eps}, x, gamma, beta);
}
// layer_norm without a bias (torch.nn.LayerNorm(bias=False)).
template <Expression X, Expression G>
constexpr auto layer_norm(X x, G gamma, double eps = 1e-5) {
  static_assert(X::rank >= 1, "kiln::layer_norm works over the last axis, so its operand needs rank >= 1");
  static_assert(std::is_same_v<typename X::dtype, typename G::dtype>,
                "kiln::layer_norm: x and gamma must have one element type");
  return Node<LayerNorm, X, G>(LayerNorm{eps}, x, gamma);
}
// eps defaults to Llama's 1e-6.
template <Expression X, Expression W>
constexpr auto rms_norm(X x, W weight, double eps = 1e-6) {
  static_assert(X::rank >= 1, "kiln::rms_norm works over the last axis, so its operand needs rank >= 1");
  static_assert(std::is_same_v<typename X::dtype, typename W::dtype>,
                "kiln::rms_norm: x and weight must have one element type");
  return Node<RmsNorm, X, W>(RmsNorm{eps}, x, weight);
}

}  // namespace kiln
