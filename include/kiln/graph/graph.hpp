// kiln: compile-time graph analysis. An expression type is flattened into a list of unique
// nodes in topological order (children before parents): keyed subtrees (stateless ones, and
// those stateful only through kiln::shared operands, expr/node.hpp) are merged by type
// (common-subexpression elimination), composite ops are expanded into primitives over
// references to their operands, and every occurrence of one kiln::shared value (Shared<Tag, E>)
// resolves to the node of its first occurrence. GraphInfo<N> then describes the nodes as
// constexpr arrays.
//
// Cost: one pass over the tree; each new node is looked up among the nodes so far with a
// fold over is_same, which is cheap next to instantiating the nodes themselves.
#pragma once
#include <array>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/expr/node.hpp"

namespace kiln::graph {

template <class E, int... Cs>
struct Entry {
  using type = E;
  static constexpr int nchildren = sizeof...(Cs);
  static constexpr std::array<int, sizeof...(Cs)> children{Cs...};
};

// A kiln::shared value already flattened: its type and the id of its node.
template <class Key, int Id>
struct Alias {};
template <class... As>
struct Aliases {};

// The nodes so far, in topological order, and the Shared values seen.
template <class As, class... Es>
struct List {
  static constexpr int size = sizeof...(Es);
};

template <class L, class X>
struct append;
template <class As, class... Es, class X>
struct append<List<As, Es...>, X> {
  using type = List<As, Es..., X>;
};

template <class L, class A>
struct append_alias;
template <class... As, class... Es, class A>
struct append_alias<List<Aliases<As...>, Es...>, A> {
  using type = List<Aliases<As..., A>, Es...>;
};

// The node id of the Shared value Key, or -1.
template <class Key, class L>
struct find_alias;
template <class Key, class... As, class... Es>
struct find_alias<Key, List<Aliases<As...>, Es...>> {
  template <int Id>
  static constexpr int match(Alias<Key, Id>*) { return Id; }
  static constexpr int match(void*) { return -1; }
  static constexpr int value = [] {
    int id = -1;
    ((id = id >= 0 ? id : match(static_cast<As*>(nullptr))), ...);
    return id;
  }();
};

// Index of the first of Entries whose ::type is E, or -1 (also the autodiff DAG's lookup).
template <class E, class... Entries>
inline constexpr int entry_index = [] {
  constexpr bool match[] = {false, std::is_same_v<E, typename Entries::type>...};
  for (int i = 0; i < static_cast<int>(sizeof...(Entries)); ++i)
    if (match[i + 1]) return i;
  return -1;
}();

// Index of the entry whose type is E, or -1.
template <class E, class L>
struct find;
template <class E, class As, class... Es>
struct find<E, List<As, Es...>> {
  static constexpr int value = entry_index<E, Es...>;
};

template <int I, class Seq>
struct prepend;
template <int I, int... Is>
struct prepend<I, std::integer_sequence<int, Is...>> {
  using type = std::integer_sequence<int, I, Is...>;
};

template <class L, class E>
struct add;

// Adds every operand in order; ::ids are their node ids.
template <class L, class... Cs>
struct add_all {
  using list = L;
  using ids = std::integer_sequence<int>;
};
template <class L, class C, class... Cs>
struct add_all<L, C, Cs...> {
  using first = add<L, C>;
  using rest = add_all<typename first::list, Cs...>;
  using list = typename rest::list;
  using ids = typename prepend<first::id, typename rest::ids>::type;
};

template <class L, class E, class Ids>
struct append_entry;
template <class L, class E, int... Is>
struct append_entry<L, E, std::integer_sequence<int, Is...>> {
  using list = typename append<L, Entry<E, Is...>>::type;
  static constexpr int id = L::size;
};

// A leaf: a symbol (merged by type) or a constant (never merged).
template <class L, class E>
struct add {
  static constexpr int found = E::stateless ? find<E, L>::value : -1;
  using appended = append_entry<L, E, std::integer_sequence<int>>;
  using list = std::conditional_t<(found >= 0), L, typename appended::list>;
  static constexpr int id = found >= 0 ? found : L::size;
};

template <class L, int Id, int R, class T>
struct add<L, Ref<Id, R, T>> {
  using list = L;
  static constexpr int id = Id;
};

// A Shared value: flattened at its first occurrence, an alias of that node afterwards.
template <class L, std::uint64_t Tag, class E>
struct add<L, Shared<Tag, E>> {
  static constexpr int found = find_alias<Shared<Tag, E>, L>::value;
  template <bool Found, class = void>
  struct build {
    using list = L;
    static constexpr int id = found;
  };
  template <class V>
  struct build<false, V> {
    using value = add<L, E>;
    using list = typename append_alias<typename value::list, Alias<Shared<Tag, E>, value::id>>::type;
    static constexpr int id = value::id;
  };
  using list = typename build<(found >= 0)>::list;
  static constexpr int id = build<(found >= 0)>::id;
};

template <class Op, class... Cs>
struct expansion_of {
  template <int... Ids>
  static auto with(std::integer_sequence<int, Ids...>)
      -> decltype(std::declval<const Op&>().expand(Ref<Ids, Cs::rank, typename Cs::dtype>{}...));
};

template <class L, class Node, bool Composite>
struct add_node;
template <class L, class Op, class... Cs>
struct add_node<L, Node<Op, Cs...>, false> {  // a primitive op: merged by type when keyed
  using E = Node<Op, Cs...>;
  static constexpr int found = E::keyed ? find<E, L>::value : -1;
  template <bool Found, class = void>
  struct build {
    using list = L;
    static constexpr int id = found;
  };
  template <class V>
  struct build<false, V> {
    using kids = add_all<L, Cs...>;
    using entry = append_entry<typename kids::list, E, typename kids::ids>;
    using list = typename entry::list;
    static constexpr int id = entry::id;
  };
  using list = typename build<(found >= 0)>::list;
  static constexpr int id = build<(found >= 0)>::id;
};
template <class L, class Op, class... Cs>
struct add_node<L, Node<Op, Cs...>, true> {  // a composite op: its expansion over Refs
  using kids = add_all<L, Cs...>;
  using expansion = decltype(expansion_of<Op, Cs...>::with(typename kids::ids{}));
  using result = add<typename kids::list, expansion>;
  using list = typename result::list;
  static constexpr int id = result::id;
};
template <class L, class Op, class... Cs>
struct add<L, Node<Op, Cs...>> : add_node<L, Node<Op, Cs...>, Op::composite> {};

template <class Root>
struct flatten : add_all<List<Aliases<>>, Root> {};
template <class... Es>
struct flatten<Outputs<Es...>> : add_all<List<Aliases<>>, typename output_item<Es>::value_type...> {};

// The constexpr description of one node.
struct NodeInfo {
  NodeKind kind{};
  int rank = 0;
  int nchildren = 0;
  int children[kMaxOperands] = {-1, -1, -1, -1, -1, -1};
  bool stateless = true;
  const char* name = "";
  // Reductions: what is reduced and how.
  ReduceKind reduce_kind{};
  int axis = 0;
  bool keep = false;
  bool all = false;
  // Symbols: the hash of the name, and whether it is a kiln::param (else a kiln::input).
  std::uint64_t symbol_id = 0;
  bool param = false;
  // Bit k set: operand k is read for its shape only (never loaded, never forces a buffer).
  unsigned shape_only = 0;
  bool column_index = false;  // kiln::column_index: its kernel evaluates j, the last-axis index
  // Axis copies: which op (concat, slice, extract, insert, ...) and its static positions (the
  // planner reads the positions from the node's parameters, runtime/params.hpp, which start
  // from these and hold the values of an op that takes them at run time).
  std::uint8_t copy_form = 0;
  long begin = 0, end = 0;
  // Permutes: axis d of the result is axis perm[d] of the operand.
  std::int8_t perm[kMaxRank] = {};
  // Reshapes: the operand's axes [reshape_first, reshape_last] are replaced by the new extents.
  int reshape_first = 0, reshape_last = -1;
  int dtype = 0;               // dtype_code of the element type
  bool scatter = false;        // IndexRows: scatter_add_rows (else embedding, a gather)
  // Attention: which part (expr/ops/attention.hpp's AttentionPart), the mask, and the scale of
  // q k^T (0: 1/sqrt(head_dim), taken from the shapes).
  std::uint8_t attention_part = 0;
  bool causal = false;
  double scale = 0;
  // The last operand is an integer the kernel reads through its own pointer, not a load:
  // attention's kv_len, the position of a window (write_slice).
  bool index_last = false;
  // Dropout: the probability of dropping, and the site's stream (expr/ops/dropout.hpp).
  double probability = 0;
  std::uint32_t stream = 0;
  constexpr bool reads_value_of(int k) const { return !((shape_only >> k) & 1u); }
};

template <class E>
constexpr NodeInfo describe() {
  NodeInfo n;
  n.kind = E::kind;
  n.rank = E::rank;
  n.stateless = E::stateless;
  if constexpr (requires { typename E::dtype; }) n.dtype = dtype_code<typename E::dtype>();
  if constexpr (E::kind == NodeKind::Symbol) {
    n.name = E::name_type::chars;
    n.symbol_id = E::id;
    if constexpr (requires { E::symbol_kind; }) n.param = E::symbol_kind == SymbolKind::Param;
  } else if constexpr (!requires { typename E::op_type; }) {
    n.name = "constant";
  } else {
    using Op = typename E::op_type;
    n.name = Op::name;
    n.shape_only = kiln::detail::shape_only_of<Op>();
    if constexpr (requires { Op::column_index; }) n.column_index = Op::column_index;
    if constexpr (requires { Op::axis; }) n.axis = Op::axis;
    if constexpr (requires { Op::all; }) n.all = Op::all;
    if constexpr (requires { Op::scatter; }) n.scatter = Op::scatter;
    if constexpr (requires { Op::attention_part; }) {
      n.attention_part = static_cast<std::uint8_t>(Op::attention_part);
      n.causal = Op::causal;
      n.scale = Op::scale;
    }
    if constexpr (requires { Op::index_last; }) n.index_last = Op::index_last;
    if constexpr (E::kind == NodeKind::Dropout) {
      n.probability = Op::probability;
      n.stream = Op::stream;
    }
    if constexpr (E::kind == NodeKind::Reduce) {
      n.reduce_kind = Op::reduce_kind;
      n.keep = Op::keep;
    }
    if constexpr (E::kind == NodeKind::Reshape) {
      n.reshape_first = Op::first_axis;
      n.reshape_last = Op::last_axis;
    }
    if constexpr (E::kind == NodeKind::Permute)
      for (int d = 0; d < E::rank; ++d) n.perm[d] = static_cast<std::int8_t>(Op::perm[d]);
    if constexpr (E::kind == NodeKind::AxisCopy) {
      n.copy_form = static_cast<std::uint8_t>(Op::copy_form);
      n.begin = Op::begin;
      n.end = Op::end;
    }
  }
  return n;
}

template <int N, int NOut>
struct GraphInfo {
  NodeInfo nodes[N > 0 ? N : 1];
  int outputs[NOut > 0 ? NOut : 1]{};
  int use_count[N > 0 ? N : 1]{};  // uses as an operand, plus one per output it is
  bool is_output[N > 0 ? N : 1]{};

  // `user` reads the value of `node` (not only its shape).
  constexpr bool reads_value(int user, int node) const {
    for (int k = 0; k < nodes[user].nchildren; ++k)
      if (nodes[user].children[k] == node && nodes[user].reads_value_of(k)) return true;
    return false;
  }
};

template <class L, class OutIds>
struct Graph;
template <class As, class... Es, int... Outs>
struct Graph<List<As, Es...>, std::integer_sequence<int, Outs...>> {
  static constexpr int size = sizeof...(Es);
  static constexpr int noutputs = sizeof...(Outs);
  using entries = std::tuple<Es...>;
  template <int I>
  using node = typename std::tuple_element_t<I, entries>::type;

  static constexpr GraphInfo<size, noutputs> info = [] {
    GraphInfo<size, noutputs> g{};
    int i = 0;
    (
        [&] {
          g.nodes[i] = describe<typename Es::type>();
          g.nodes[i].nchildren = Es::nchildren;
          for (int k = 0; k < Es::nchildren; ++k) {
            g.nodes[i].children[k] = Es::children[k];
            ++g.use_count[Es::children[k]];
          }
          ++i;
        }(),
        ...);
    int o = 0;
    ((g.outputs[o++] = Outs, g.is_output[Outs] = true, ++g.use_count[Outs]), ...);
    return g;
  }();

  // Two symbols with one name must be one symbol.
  static constexpr bool symbols_consistent = [] {
    for (int a = 0; a < size; ++a)
      for (int b = a + 1; b < size; ++b)
        if (info.nodes[a].kind == NodeKind::Symbol && info.nodes[b].kind == NodeKind::Symbol &&
            info.nodes[a].symbol_id == info.nodes[b].symbol_id)
          return false;
    return true;
  }();
  static_assert(symbols_consistent,
                "kiln: two symbols in this expression share a name but differ in rank, element type "
                "or kind (input/param); a name must denote one symbol");
};

template <class Root>
using graph_of = Graph<typename flatten<std::remove_cvref_t<Root>>::list, typename flatten<std::remove_cvref_t<Root>>::ids>;

}  // namespace kiln::graph
