// kiln: the values stored in an expression (constants, reshape extents), gathered at
// compile() time into a table indexed by node id. The walk visits stateful nodes in the
// order graph::flatten appended them: post-order, composite ops through their expansion.
#pragma once
#include <algorithm>
#include <tuple>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/expr/ops/layout.hpp"
#include "kiln/graph/graph.hpp"

namespace kiln::runtime {

struct NodeParams {
  double scalar = 0;                // Constant
  long dims[kMaxRank > 0 ? kMaxRank : 1] = {};  // Reshape
  int ndims = 0;
  // Axis copies: Slice's range [begin, end); Extract's and Insert's offset (begin); Chunk's and
  // ChunkInsert's part begin of end parts. From the op's type, or from its values where the
  // op takes them at run time (slice<A>(x, begin, end)).
  long begin = 0, end = 0;
};

template <class Op>
struct is_reshape : std::false_type {};
template <int N, int First, int Last>
struct is_reshape<Reshape<N, First, Last>> : std::true_type {};

// The walk's output, the Shared values met so far with all the parameters of their first
// occurrence (nested Shared values included), and the keyed nodes met so far (the graph keeps
// the first occurrence of a keyed node: later ones add nothing). A full walk (`full`) visits
// every occurrence.
struct ParamsWalk {
  std::vector<NodeParams> out;
  struct Seen {
    const void* key;
    std::vector<NodeParams> all;
  };
  std::vector<Seen> shared;
  std::vector<const void*> keyed;
  bool full = false;
};
template <class K>
inline constexpr char type_key = 0;  // &type_key<K> identifies the type K

inline bool same_params(const NodeParams& a, const NodeParams& b) {
  if (a.scalar != b.scalar && !(a.scalar != a.scalar && b.scalar != b.scalar)) return false;  // NaN equals NaN here
  if (a.ndims != b.ndims || a.begin != b.begin || a.end != b.end) return false;
  for (int d = 0; d < a.ndims; ++d)
    if (a.dims[d] != b.dims[d]) return false;
  return true;
}

template <class E>
void collect_params(const E& e, ParamsWalk& w);

// A Shared value is flattened once: its first occurrence gives the parameters. A later
// occurrence must hold the same values (one Shared type, one value), nested Shared values
// included: every parameter is compared, else the program would silently use the first.
template <std::uint64_t Tag, class E>
void collect_shared(const Shared<Tag, E>& s, ParamsWalk& w) {
  if (w.full) {  // inside a full walk: every occurrence counts
    collect_params(s.value, w);
    return;
  }
  const void* key = &type_key<Shared<Tag, E>>;
  ParamsWalk all;
  all.full = true;
  collect_params(s.value, all);
  for (const auto& seen : w.shared) {
    if (seen.key != key) continue;
    bool same = all.out.size() == seen.all.size();
    for (std::size_t i = 0; same && i < all.out.size(); ++i) same = same_params(all.out[i], seen.all[i]);
    if (!same)
      throw BindingError(
          "kiln::shared: two different values share one name in this program (or two kiln::grad calls of "
          "equal structure collide: give one kiln::grad<1>(...)); name each shared value once");
    return;
  }
  w.shared.push_back({key, std::move(all.out)});
  collect_params(s.value, w);
}

template <class E>
void collect_params(const E& e, ParamsWalk& w) {
  auto& out = w.out;
  if constexpr (E::stateless) {
    return;
  } else if constexpr (E::kind == NodeKind::Shared) {
    collect_shared(e, w);
  } else if constexpr (!requires { typename E::op_type; }) {  // a Constant leaf
    out.push_back(NodeParams{static_cast<double>(e.value)});
  } else {
    using Op = typename E::op_type;
    if constexpr (E::keyed && !Op::composite) {  // stateful only through Shared operands
      if (!w.full) {
        const void* key = &type_key<E>;
        if (std::find(w.keyed.begin(), w.keyed.end(), key) != w.keyed.end()) {
          // A later occurrence is one node in the graph and adds no parameters; its Shared
          // operands are still checked against their first occurrence.
          ParamsWalk check;
          check.shared = std::move(w.shared);
          check.keyed = std::move(w.keyed);
          std::apply([&](const auto&... c) { (collect_params(c, check), ...); }, e.children);
          w.shared = std::move(check.shared);
          w.keyed = std::move(check.keyed);
          return;
        }
        w.keyed.push_back(key);
      }
    }
    std::apply([&](const auto&... c) { (collect_params(c, w), ...); }, e.children);
    if constexpr (Op::composite) {
      // The expansion over placeholders has the stateful nodes of the real expansion.
      auto expansion = std::apply(
          [&](const auto&... c) {
            return e.op.expand(Ref<0, std::remove_cvref_t<decltype(c)>::rank,
                                   typename std::remove_cvref_t<decltype(c)>::dtype>{}...);
          },
          e.children);
      collect_params(expansion, w);
    } else {
      NodeParams p;
      if constexpr (is_reshape<Op>::value) {
        for (int d = 0; d < Op::ndims; ++d) p.dims[d] = e.op.dims[d];
        p.ndims = Op::ndims;
      }
      if constexpr (Op::kind == NodeKind::AxisCopy) {
        if constexpr (requires { e.op.runtime_begin; }) {
          p.begin = e.op.runtime_begin;
          p.end = e.op.runtime_end;
        } else {
          p.begin = Op::begin;
          p.end = Op::end;
        }
      }
      out.push_back(p);
    }
  }
}

template <class Root>
void collect_root(const Root& r, ParamsWalk& w) {
  collect_params(r, w);
}
template <class... Es>
void collect_root(const Outputs<Es...>& r, ParamsWalk& w) {
  std::apply([&](const auto&... e) {
    (collect_params(output_item<std::remove_cvref_t<decltype(e)>>::value(e), w), ...);
  }, r.items);
}

// The table indexed by node id.
template <class Graph, class Root>
std::vector<NodeParams> node_params(const Root& r) {
  ParamsWalk walk;
  collect_root(r, walk);
  const auto& seq = walk.out;
  std::vector<NodeParams> table(static_cast<std::size_t>(Graph::size));
  std::size_t k = 0;
  for (int i = 0; i < Graph::size; ++i) {
    const auto& n = Graph::info.nodes[i];
    if (!n.stateless) table[i] = seq.at(k++);
    else if (n.kind == NodeKind::AxisCopy) table[i].begin = n.begin, table[i].end = n.end;  // static positions
  }
  return table;
}

}  // namespace kiln::runtime
