// kiln: layout ops. They are views: no kernel runs for them, the consumer reads the source
// through other strides. transpose swaps the last two axes; reshape reinterprets a contiguous
// value with new extents (one of which may be -1, inferred from the element count).
#pragma once
#include <cstddef>

#include "kiln/expr/node.hpp"

namespace kiln {

struct Transpose {
  static constexpr NodeKind kind = NodeKind::Transpose;
  static constexpr bool composite = false;
  static constexpr const char* name = "transpose";
  template <int R>
  static constexpr int out_rank = R;
  template <class N, class G>
  static constexpr auto vjp(const N&, const G& g) {
    return std::tuple{transpose(g)};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N&, const Tx& t) {
    return transpose(t);
  }
};

template <int R>
struct Reshape {
  static constexpr NodeKind kind = NodeKind::Reshape;
  static constexpr bool composite = false;
  static constexpr const char* name = "reshape";
  template <int>
  static constexpr int out_rank = R;
  long dims[R > 0 ? R : 1];
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{reshape_as(g, std::get<0>(y.children))};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    return reshape_as(t, y);
  }
};

template <Expression X>
constexpr auto transpose(X x) {
  static_assert(X::rank >= 2, "kiln::transpose swaps the last two axes, so its operand needs rank >= 2");
  return Node<Transpose, X>(Transpose{}, x);
}

// reshape(x, {a, b, c}); -1 stands for the extent that makes the element counts agree.
template <Expression X, std::size_t R>
constexpr auto reshape(X x, const long (&dims)[R]) {
  static_assert(R <= kMaxRank, "kiln::reshape: the new rank exceeds kiln::kMaxRank (6)");
  Reshape<static_cast<int>(R)> op{};
  for (std::size_t i = 0; i < R; ++i) op.dims[i] = dims[i];
  return Node<Reshape<static_cast<int>(R)>, X>(op, x);
}

}  // namespace kiln
