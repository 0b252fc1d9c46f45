// kiln: matrix products. matmul(a, b): [M, K] x [K, N] -> [M, N]; with a batch axis,
// [B, M, K] x [B, K, N] -> [B, M, N], where either batch extent may be 1 or absent (broadcast).
#pragma once
#include "kiln/expr/node.hpp"
#include "kiln/expr/ops/layout.hpp"

namespace kiln {

struct Matmul {
  static constexpr NodeKind kind = NodeKind::Matmul;
  static constexpr bool composite = false;
  static constexpr const char* name = "matmul";
  template <int Ra, int Rb>
  static constexpr int out_rank = Ra > Rb ? Ra : Rb;

  // dA = G B^T, dB = A^T G; a broadcast batch axis is summed back. For activations times a
  // weight, [B, M, K] x [K, N], the batch is summed inside one product: dB = A'^T G' with A' and
  // G' the operands' [B M, K] and [B M, N] views, one GEMM of depth B M rather than B products
  // of depth M and a sum of their B results.
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& [a, b] = y.children;
    using A = std::remove_cvref_t<decltype(a)>;
    using B = std::remove_cvref_t<decltype(b)>;
    if constexpr (A::rank == 2 && B::rank == 2) return std::tuple{matmul(g, transpose(b)), matmul(transpose(a), g)};
    else if constexpr (A::rank == 3 && B::rank == 2)
      return std::tuple{matmul(g, transpose(b)), matmul(transpose(flatten<0, 1>(a)), flatten<0, 1>(g))};
    else return std::tuple{sum_to(matmul(g, transpose(b)), a), sum_to(matmul(transpose(a), g), b)};
  }
  // d(AB) = dA B + A dB.
  template <class N, class Ta, class Tb>
  static constexpr auto jvp(const N& y, const Ta& ta, const Tb& tb) {
    const auto& [a, b] = y.children;
    using autodiff::NoGrad;
    if constexpr (std::is_same_v<Ta, NoGrad>) return matmul(a, tb);
    else if constexpr (std::is_same_v<Tb, NoGrad>) return matmul(ta, b);
    else return matmul(ta, b) + matmul(a, tb);
  }
};

template <Expression A, Expression B>
constexpr auto matmul(A a, B b) {
  static_assert(A::rank == 2 || A::rank == 3, "kiln::matmul: the left operand must have rank 2 [M, K] or 3 [B, M, K]");
  static_assert(B::rank == 2 || B::rank == 3, "kiln::matmul: the right operand must have rank 2 [K, N] or 3 [B, K, N]");
  static_assert(std::is_same_v<typename A::dtype, typename B::dtype>,
                "kiln::matmul: the operands have different element types; declare them with one type");
  return Node<Matmul, A, B>(Matmul{}, a, b);
}

}  // namespace kiln
