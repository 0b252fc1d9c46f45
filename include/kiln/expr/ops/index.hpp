// kiln: ops that read rows of a table by integer ids, run by the index-rows kernel kind.
//   embedding(ids, table)            out[p..., :] = table[ids[p...], :], a gather of rows: ids
//                                    of any rank (kiln::i32 or kiln::i64), table [V, D]; the
//                                    result has ids' shape followed by D
//   scatter_add_rows(ids, src, like) like's shape [V, D]: out[v, :] = the sum of src[p..., :]
//                                    over the positions p where ids[p] = v, 0 for rows no id
//                                    names; src has ids' shape followed by D
// Each is linear in its float operand and the other's adjoint: embedding's gradient for the
// table is scatter_add_rows(ids, g, table), and the gradient of scatter_add_rows is embedding.
// Neither is differentiable in ids.
//
// Determinism: scatter_add_rows adds the rows of each output row in the order of their
// positions p, on both devices (each output row has one owner; no float atomics), so two runs
// give the same bits.
//
// An id outside [0, V) is an IndexError on the CPU, raised before the call's first kernel. On
// CUDA the ids are not read on the host: embedding writes a row of NaN for such an id and
// scatter_add_rows leaves it out.
#pragma once
#include <tuple>

#include "kiln/expr/node.hpp"
#include "kiln/expr/zero.hpp"

namespace kiln {

template <Expression Ids, Expression Table>
constexpr auto embedding(Ids ids, Table table);
template <Expression Ids, Expression Src, Expression Like>
constexpr auto scatter_add_rows(Ids ids, Src src, Like like);

namespace detail {
// The fields both ops have. Operand 0 is the ids; the result has the float operand's type.
template <bool Scatter>
struct IndexRowsOp {
  static constexpr NodeKind kind = NodeKind::IndexRows;
  static constexpr bool composite = false;
  static constexpr bool takes_indices = true;
  static constexpr bool scatter = Scatter;
  template <class I, class T, class...>
  using dtype = T;
};

template <class Ids, class Table>
constexpr void check_index_operands() {
  static_assert(is_index_element_v<typename Ids::dtype>,
                "kiln::embedding / kiln::scatter_add_rows: ids must be integers: declare them "
                "kiln::input<\"ids\", R, kiln::i64>() (or kiln::i32)");
  static_assert(is_index_input_v<Ids>,
                "kiln::embedding / kiln::scatter_add_rows: ids must be an input (kiln::input<\"ids\", R, kiln::i64>()), not "
                "a computed value: ids are checked against the table before the call's first kernel");
  static_assert(is_float_element_v<typename Table::dtype>,
                "kiln::embedding / kiln::scatter_add_rows: the table (or src) must be a float type");
}
}  // namespace detail

struct Embedding : detail::IndexRowsOp<false> {
  static constexpr const char* name = "embedding";
  template <int RI, int RT>
  static constexpr int out_rank = RI + 1;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& [ids, table] = y.children;
    return std::tuple{autodiff::NoGrad{}, scatter_add_rows(ids, g, table)};
  }
  template <class N, class Ti, class Tt>
  static constexpr auto jvp(const N& y, const Ti&, const Tt& t) {
    return autodiff::tangent_apply([&](const auto& v) { return embedding(std::get<0>(y.children), v); }, t);
  }
};

struct ScatterAddRows : detail::IndexRowsOp<true> {
  static constexpr const char* name = "scatter_add_rows";
  static constexpr unsigned shape_only = 4u;  // like, read for its shape
  template <int RI, int RS, int RL>
  static constexpr int out_rank = RL;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{autodiff::NoGrad{}, embedding(std::get<0>(y.children), g), autodiff::NoGrad{}};
  }
  template <class N, class Ti, class Ts, class Tl>
  static constexpr auto jvp(const N& y, const Ti&, const Ts& t, const Tl&) {
    const auto& [ids, src, like] = y.children;
    return autodiff::tangent_apply([&](const auto& v) { return scatter_add_rows(ids, v, like); }, t);
  }
};

template <Expression Ids, Expression Table>
constexpr auto embedding(Ids ids, Table table) {
  detail::check_index_operands<Ids, Table>();
  static_assert(Table::rank == 2, "kiln::embedding: the table must have rank 2, [vocabulary, dim]");
  static_assert(Ids::rank + 1 <= kMaxRank, "kiln::embedding: the result (ids' rank + 1) must not pass kiln::kMaxRank (6)");
  return Node<Embedding, Ids, Table>(Embedding{}, ids, table);
}

template <Expression Ids, Expression Src, Expression Like>
constexpr auto scatter_add_rows(Ids ids, Src src, Like like) {
  detail::check_index_operands<Ids, Src>();
  static_assert(Like::rank == 2, "kiln::scatter_add_rows: like (the table's shape) must have rank 2, [vocabulary, dim]");
  static_assert(Src::rank == Ids::rank + 1, "kiln::scatter_add_rows: src must have ids' rank + 1 (ids' shape, then dim)");
  return Node<ScatterAddRows, Ids, Src, Like>(ScatterAddRows{}, ids, src, like);
}

}  // namespace kiln
