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
//   attention<...>(q, k, v, kv_len)      only the first kv_len[b] keys of a static cache (a run-time
//                                        integer operand, a scalar or [B])
//   attention<...>(q, k, v, windows)     only the keys [windows[b, 0], windows[b, 1]) of batch b
//                                        (windows [B, 2]): a left-padded batch (its first key is
//                                        the first real token) in a static cache (its end)
// A query that sees no key (Sq > Skv under the causal mask, or a query before its window's first
// key) gets a row of zeros.
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
template <AttentionPart P, AttentionMask M, double Scale, bool HasLen, Expression... Cs>
constexpr auto attention_part(Cs... cs);
}

// HasLen: a last operand holds the valid cache length (kv_len, integers).
template <AttentionPart P, AttentionMask M, double Scale, bool HasLen = false>
struct AttentionOp {
  static constexpr NodeKind kind = NodeKind::Attention;
  static constexpr bool composite = false;
  static constexpr bool index_last = HasLen;
  static constexpr bool takes_indices = HasLen;
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
  // reading v for its shape only; each followed by kv_len where the op has it.
  template <AttentionPart Q, class N, class... Xs>
  static constexpr auto part(const N& y, const Xs&... xs) {
    if constexpr (HasLen) return detail::attention_part<Q, M, Scale, true>(xs..., std::get<3>(y.children));
    else return detail::attention_part<Q, M, Scale, false>(xs...);
  }
  // The three gradients read one pass of softmax statistics. kiln::grad passes a tag, one per
  // attention node of its walk, that makes the statistics one Shared value: computed once even
  // when q, k or v hold stored values (a reshape's extents), which are never merged by type.
  static constexpr bool vjp_takes_tag = true;
  template <std::uint64_t Tag, class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    static_assert(P == AttentionPart::Out,
                  "kiln::grad: attention's backward is not differentiable again (no second derivatives of attention)");
    const auto& q = std::get<0>(y.children);
    const auto& k = std::get<1>(y.children);
    const auto& v = std::get<2>(y.children);
    const auto gy = [&] {  // the cotangent with the output's shape (a loss's 1 broadcasts)
      if constexpr (G::rank < 4) return expand_as(g, y);
      else return g;
    }();
    const auto stats = share<Tag>(part<AttentionPart::Stats>(y, q, k, v, gy));
    const auto grads = std::tuple{part<AttentionPart::GradQ>(y, q, k, v, gy, stats),
                                  part<AttentionPart::GradK>(y, q, k, v, gy, stats),
                                  part<AttentionPart::GradV>(y, q, k, v, gy, stats)};
    if constexpr (HasLen) return std::tuple_cat(grads, std::tuple{autodiff::NoGrad{}});
    else return grads;
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
template <AttentionPart P, AttentionMask M, double Scale, bool HasLen, Expression... Cs>
constexpr auto attention_part(Cs... cs) {
  using Op = AttentionOp<P, M, Scale, HasLen>;
  return Node<Op, Cs...>(Op{}, cs...);
}
}  // namespace detail

namespace detail {
template <double Scale, class Q, class K, class V>
constexpr void check_attention_operands() {
  static_assert(Q::rank == 4 && K::rank == 4 && V::rank == 4,
                "kiln::attention: q, k and v must be [batch, heads, sequence, head_dim] (permute a [batch, sequence, "
                "heads, head_dim] projection with kiln::transpose<1, 2>)");
  static_assert(std::is_same_v<typename Q::dtype, typename K::dtype> && std::is_same_v<typename Q::dtype, typename V::dtype>,
                "kiln::attention: q, k and v must have one element type");
  static_assert(is_float_element_v<typename Q::dtype>, "kiln::attention: q, k and v must be a float type");
  static_assert(Scale >= 0, "kiln::attention: the scale must be positive (0 means 1 / sqrt(head_dim))");
}
}  // namespace detail

template <AttentionMask Mask = AttentionMask::None, double Scale = 0.0, Expression Q, Expression K, Expression V>
constexpr auto attention(Q q, K k, V v) {
  detail::check_attention_operands<Scale, Q, K, V>();
  return detail::attention_part<AttentionPart::Out, Mask, Scale, false>(q, k, v);
}

// With the valid length of a static cache, read when the program runs: batch b uses keys
// [0, kv_len[b]) of k and v (kv_len a scalar for every batch, or [B]), and under the causal
// mask its Sq queries are the last Sq of those positions. One compiled program serves every
// length. With a window per batch (kv_len [B, 2]: first key, end), batch b uses keys
// [kv_len[b, 0], kv_len[b, 1]) and under the causal mask query i sees those up to position
// i + end - Sq: a left-padded batch masks its padding by starting its window after it. A length
// above the cache's, or a window that is not one, is a kiln::IndexError on the CPU and is
// clamped on CUDA.
template <AttentionMask Mask = AttentionMask::None, double Scale = 0.0, Expression Q, Expression K, Expression V,
          Expression L>
constexpr auto attention(Q q, K k, V v, L kv_len) {
  detail::check_attention_operands<Scale, Q, K, V>();
  static_assert(is_index_element_v<typename L::dtype> && L::rank <= 2,
                "kiln::attention: kv_len must be integers (kiln::i32 or kiln::i64): a scalar, one length per batch [B], "
                "or one key window (first, end) per batch [B, 2]");
  static_assert(is_index_input_v<L>,
                "kiln::attention: kv_len must be an input (kiln::input<\"len\", 0, kiln::i64>()), not a computed value: it "
                "is checked against the cache before the call's first kernel");
  return detail::attention_part<AttentionPart::Out, Mask, Scale, true>(q, k, v, kv_len);
}

}  // namespace kiln
