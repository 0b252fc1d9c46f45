// kiln: the values stored in an expression (constants, reshape extents), gathered at
// compile() time into a table indexed by node id. The walk visits stateful nodes in the
// order graph::flatten appended them: post-order, composite ops through their expansion.
#pragma once
#include <tuple>
#include <vector>

#include "kiln/graph/graph.hpp"

namespace kiln::runtime {

struct NodeParams {
  double scalar = 0;                // Constant
  long dims[kMaxRank > 0 ? kMaxRank : 1] = {};  // Reshape
  int ndims = 0;
};

template <class Op>
struct is_reshape : std::false_type {};
template <int R>
struct is_reshape<Reshape<R>> : std::true_type {};

template <class E>
void collect_params(const E& e, std::vector<NodeParams>& out) {
  if constexpr (E::stateless) {
    return;
  } else if constexpr (!requires { typename E::op_type; }) {  // a Constant leaf
    out.push_back(NodeParams{static_cast<double>(e.value)});
  } else {
    using Op = typename E::op_type;
    std::apply([&](const auto&... c) { (collect_params(c, out), ...); }, e.children);
    if constexpr (Op::composite) {
      // The expansion over placeholders has the stateful nodes of the real expansion.
      auto expansion = std::apply(
          [&](const auto&... c) {
            return e.op.expand(Ref<0, std::remove_cvref_t<decltype(c)>::rank,
                                   typename std::remove_cvref_t<decltype(c)>::dtype>{}...);
          },
          e.children);
      collect_params(expansion, out);
    } else {
      NodeParams p;
      if constexpr (is_reshape<Op>::value) {
        for (int d = 0; d < Op::template out_rank<0>; ++d) p.dims[d] = e.op.dims[d];
        p.ndims = Op::template out_rank<0>;
      }
      out.push_back(p);
    }
  }
}

template <class Root>
void collect_root(const Root& r, std::vector<NodeParams>& out) {
  collect_params(r, out);
}
template <class... Es>
void collect_root(const Outputs<Es...>& r, std::vector<NodeParams>& out) {
  std::apply([&](const auto&... e) {
    (collect_params(output_item<std::remove_cvref_t<decltype(e)>>::value(e), out), ...);
  }, r.items);
}

// The table indexed by node id.
template <class Graph, class Root>
std::vector<NodeParams> node_params(const Root& r) {
  std::vector<NodeParams> seq;
  collect_root(r, seq);
  std::vector<NodeParams> table(static_cast<std::size_t>(Graph::size));
  std::size_t k = 0;
  for (int i = 0; i < Graph::size; ++i)
    if (!Graph::info.nodes[i].stateless) table[i] = seq.at(k++);
  return table;
}

}  // namespace kiln::runtime
