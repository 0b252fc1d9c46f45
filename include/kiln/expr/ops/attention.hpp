// kiln: scaled dot-product attention, fused: the [query, key] score matrix is never stored.
// For q [B, H, Sq, D], k [B, Hkv, Skv, D] and v [B, Hkv, Skv, Dv], with H a multiple of Hkv
// (grouped-query attention: query head h reads key/value head h / (H / Hkv)):
//   s[b, h, i, j]   = scale * q[b, h, i, :] . k[b, h / (H / Hkv), j, :]
//   out[b, h, i, :] = sum_j softmax_j(s[b, h, i, :])[j] v[b, h / (H / Hkv), j, :]     [B, H, Sq, Dv]
//   attention(q, k, v)                   every key visible; scale = 1 / sqrt(D)
//   attention<kiln::causal>(q, k, v)     query i sees the keys j <= i + (Skv - Sq): the usual
//                                        causal mask when Sq = Skv, and, for Sq new queries
//                                        after Skv - Sq cached positions, each query sees the
//                                        cache and itself (bottom-right aligned, as FlashAttention
//                                        and Hugging Face's cached decoding do)
//   attention<kiln::causal, 0.0625>(...) a scale other than 1 / sqrt(D) (Gemma's
//                                        query_pre_attn_scalar ** -0.5)
// A query that sees no key (Sq > Skv under the causal mask) gets a row of zeros.
//
// The options are template arguments, so an attention node holds no value and one call is one
// node however often the program reads it (kiln merges stateless nodes by type).
//
// Derivatives (reverse mode), flash-attention style: the backward recomputes the probabilities
// p = exp(s - lse) from the row statistics instead of storing them. Each part below is one
// kernel of the attention kind (lower/args.hpp's AttentionArgs), over the same operands:
//   stats  [B, H, Sq, 2]: lse_i = log sum_j exp(s_ij) and delta_i = sum_j p_ij (g_i . v_j)
//          (= g_i . out_i, computed without out, so the backward never needs the forward's value)
//   dq_i  = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij g_i
//          with ds_ij = p_ij (g_i . v_j - delta_i); dk and dv sum over the query heads of a group.
// Forward mode is not defined yet (kiln::jvp through attention is a compile error).
#pragma once
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "kiln/expr/node.hpp"
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/zero.hpp"

namespace kiln {

inline constexpr AttentionMask causal = AttentionMask::Causal;

namespace detail {
template <AttentionPart P, AttentionMask M, double Scale, Expression... Cs>
constexpr auto attention_part(Cs... cs);
}

template <AttentionPart P, AttentionMask M, double Scale>
struct AttentionOp {
  static constexpr NodeKind kind = NodeKind::Attention;
  static constexpr bool composite = false;
  static constexpr AttentionPart attention_part = P;
  static constexpr bool causal = M == AttentionMask::Causal;
  static constexpr double scale = Scale;
  static constexpr const char* name = P == AttentionPart::Out     ? "attention"
                                      : P == AttentionPart::Stats ? "attention_stats"
                                      : P == AttentionPart::GradQ ? "attention_grad_q"
                                      : P == AttentionPart::GradK ? "attention_grad_k"
                                                                  : "attention_grad_v";
  static constexpr unsigned shape_only = P == AttentionPart::GradV ? 0b100u : 0u;  // dv reads v's shape alone
  template <int... R>
  static constexpr int out_rank = 4;
  // q's type; the statistics in its compute type (float for bf16 and f16: an lse rounded to 8
  // bits would scale the backward's probabilities by a few percent).
  template <class T, class...>
  using dtype = std::conditional_t<P == AttentionPart::Stats, compute_t<T>, T>;

  // Operands: Out (q, k, v); Stats (q, k, v, g); the gradients (q, k, v, g, stats), GradV
  // reading v for its shape only.
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    static_assert(P == AttentionPart::Out,
                  "kiln::grad: attention's backward is not differentiable again (no second derivatives of attention)");
    const auto& [q, k, v] = y.children;
    const auto gy = [&] {  // the cotangent with the output's shape (a loss's 1 broadcasts)
      if constexpr (G::rank < 4) return expand_as(g, y);
      else return g;
    }();
    const auto stats = detail::attention_part<AttentionPart::Stats, M, Scale>(q, k, v, gy);
    return std::tuple{detail::attention_part<AttentionPart::GradQ, M, Scale>(q, k, v, gy, stats),
                      detail::attention_part<AttentionPart::GradK, M, Scale>(q, k, v, gy, stats),
                      detail::attention_part<AttentionPart::GradV, M, Scale>(q, k, v, gy, stats)};
  }
  template <class N, class... Ts>
  static constexpr auto jvp(const N&, const Ts&...) {
    static_assert(sizeof...(Ts) == 0,
                  "kiln::jvp: attention has no forward-mode rule yet; differentiate it in reverse mode (kiln::grad, "
                  "kiln::vjp)");
    return autodiff::NoGrad{};
  }
};

namespace detail {
template <AttentionPart P, AttentionMask M, double Scale, Expression... Cs>
constexpr auto attention_part(Cs... cs) {
  using Op = AttentionOp<P, M, Scale>;
  return Node<Op, Cs...>(Op{}, cs...);
}
}  // namespace detail

template <AttentionMask Mask = AttentionMask::None, double Scale = 0.0, Expression Q, Expression K, Expression V>
constexpr auto attention(Q q, K k, V v) {
  static_assert(Q::rank == 4 && K::rank == 4 && V::rank == 4,
                "kiln::attention: q, k and v must be [batch, heads, sequence, head_dim] (permute a [batch, sequence, "
                "heads, head_dim] projection with kiln::transpose<1, 2>)");
  static_assert(std::is_same_v<typename Q::dtype, typename K::dtype> && std::is_same_v<typename Q::dtype, typename V::dtype>,
                "kiln::attention: q, k and v must have one element type");
  static_assert(is_float_element_v<typename Q::dtype>, "kiln::attention: q, k and v must be a float type");
  static_assert(Scale >= 0, "kiln::attention: the scale must be positive (0 means 1 / sqrt(head_dim))");
  return detail::attention_part<AttentionPart::Out, Mask, Scale>(q, k, v);
}

}  // namespace kiln
