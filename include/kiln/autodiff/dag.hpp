// kiln: the graph that differentiation walks. The expression (a tree of types) is flattened
// into the distinct nodes that depend on the variables, in topological order (operands first):
// stateless nodes are merged by type, every occurrence of one Shared value is one node, and a
// node that holds constants is one node per occurrence. Each entry records the path from the
// root to its first occurrence, so the node's object (with its constants) can be fetched.
//
// Both modes then visit each node once: reverse mode sums the cotangents of all users of a node
// before applying its rule, forward mode computes each tangent once, and each result is a Shared
// value, so a node used k times costs one rule application and one node in the derivative.
#pragma once
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/expr/zero.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/graph/graph.hpp"

namespace kiln::autodiff {

// Whether an expression contains a symbol with one of the ids.
template <class E, std::uint64_t... Ids>
struct depends_on : std::false_type {};
template <std::uint64_t Id, int R, class T, SymbolKind K, class N, std::uint64_t... Ids>
struct depends_on<Symbol<Id, R, T, K, N>, Ids...> : std::bool_constant<((Id == Ids) || ...)> {};
template <class Op, class... Cs, std::uint64_t... Ids>
struct depends_on<Node<Op, Cs...>, Ids...> : std::bool_constant<(depends_on<Cs, Ids...>::value || ...)> {};
template <std::uint64_t Tag, class E, std::uint64_t... Ids>
struct depends_on<Shared<Tag, E>, Ids...> : depends_on<E, Ids...> {};

template <std::uint64_t... Ids>
struct Vars {
  template <class E>
  static constexpr bool depends = depends_on<E, Ids...>::value;
};

// One node: its type, the child positions leading to it from the root, and the entry ids of its
// operands (-1 for an operand that depends on no variable).
template <class E, class Path, int... Kids>
struct DagEntry {
  using type = E;
  using path = Path;
  static constexpr int nkids = sizeof...(Kids);
  static constexpr std::array<int, sizeof...(Kids)> kids{Kids...};
};

template <class... Es>
struct Dag {
  static constexpr int size = sizeof...(Es);
  using entries = std::tuple<Es...>;
  template <int I>
  using entry = std::tuple_element_t<I, entries>;
};

template <class E, class D>
struct dag_find;
template <class E, class... Es>
struct dag_find<E, Dag<Es...>> {
  static constexpr int value = graph::entry_index<E, Es...>;
};

template <class D, class X>
struct dag_append;
template <class... Es, class X>
struct dag_append<Dag<Es...>, X> {
  using type = Dag<Es..., X>;
};

template <class P, int K>
struct path_push;
template <int... P, int K>
struct path_push<std::integer_sequence<int, P...>, K> {
  using type = std::integer_sequence<int, P..., K>;
};

template <class V, class D, class E, class Path>
struct dag_add;

// Operands K, K+1, ... of a node at Path; ::ids are their entry ids.
template <class V, class D, class Path, int K, class... Cs>
struct dag_kids {
  using dag = D;
  using ids = std::integer_sequence<int>;
};
template <class V, class D, class Path, int K, class C, class... Cs>
struct dag_kids<V, D, Path, K, C, Cs...> {
  using first = dag_add<V, D, C, typename path_push<Path, K>::type>;
  using rest = dag_kids<V, typename first::dag, Path, K + 1, Cs...>;
  using dag = typename rest::dag;
  template <int... Is>
  static auto cons(std::integer_sequence<int, Is...>) -> std::integer_sequence<int, first::id, Is...>;
  using ids = decltype(cons(typename rest::ids{}));
};

template <class D, class E, class Path, class Ids>
struct dag_entry;
template <class D, class E, class Path, int... Is>
struct dag_entry<D, E, Path, std::integer_sequence<int, Is...>> {
  using dag = typename dag_append<D, DagEntry<E, Path, Is...>>::type;
  static constexpr int id = D::size;
};

template <class V, class D, class E, class Path>
struct dag_add_new;  // E is not in D yet
template <class V, class D, class E, class Path>
  requires(E::kind == NodeKind::Symbol)
struct dag_add_new<V, D, E, Path> : dag_entry<D, E, Path, std::integer_sequence<int>> {};
template <class V, class D, std::uint64_t Tag, class E, class Path>
struct dag_add_new<V, D, Shared<Tag, E>, Path> {
  using kids = dag_kids<V, D, Path, 0, E>;
  using entry = dag_entry<typename kids::dag, Shared<Tag, E>, Path, typename kids::ids>;
  using dag = typename entry::dag;
  static constexpr int id = entry::id;
};
template <class V, class D, class Op, class... Cs, class Path>
struct dag_add_new<V, D, Node<Op, Cs...>, Path> {
  using kids = dag_kids<V, D, Path, 0, Cs...>;
  using entry = dag_entry<typename kids::dag, Node<Op, Cs...>, Path, typename kids::ids>;
  using dag = typename entry::dag;
  static constexpr int id = entry::id;
};

template <class V, class D, class E, class Path>
struct dag_add {
  static constexpr bool relevant = V::template depends<E>;
  // Stateless nodes and Shared values are one node however often they occur.
  static constexpr int found = !relevant ? -1 : (E::stateless || E::kind == NodeKind::Shared) ? dag_find<E, D>::value : -1;
  template <int Case, class = void>  // 0: irrelevant, 1: found, 2: new
  struct pick {
    using dag = D;
    static constexpr int id = Case == 1 ? found : -1;
  };
  template <class X>
  struct pick<2, X> : dag_add_new<V, D, E, Path> {};
  using result = pick<!relevant ? 0 : found >= 0 ? 1 : 2>;
  using dag = typename result::dag;
  static constexpr int id = result::id;
};

template <class V, class Root>
using dag_of = typename dag_add<V, Dag<>, Root, std::integer_sequence<int>>::dag;

// The object at a path: children of nodes by position, the value of a Shared (position 0).
template <class E>
constexpr const auto& child_at(const E& e, std::integral_constant<int, 0>)
  requires(E::kind == NodeKind::Shared)
{
  return e.value;
}
template <class E, int K>
constexpr const auto& child_at(const E& e, std::integral_constant<int, K>)
  requires(E::kind != NodeKind::Shared)
{
  return std::get<K>(e.children);
}
template <class E>
constexpr const E& at_path(const E& e, std::integer_sequence<int>) {
  return e;
}
template <class E, int P, int... Ps>
constexpr const auto& at_path(const E& e, std::integer_sequence<int, P, Ps...>) {
  return at_path(child_at(e, std::integral_constant<int, P>{}), std::integer_sequence<int, Ps...>{});
}

// A tag per (derivative, salt, entry), for the Shared values the walks make.
template <class D>
constexpr std::uint64_t dag_hash(std::uint64_t salt) {
  return hash_mix(salt, static_cast<std::uint64_t>(D::size));
}

}  // namespace kiln::autodiff
