// kiln: graph breaks. An expression with kiln::host nodes runs as compiled segments joined by
// host calls. The first host node in post-order (one whose operand has no host node) splits
// the program: segment one computes its operand; the host function runs on that value; the
// rest of the program, with the host node replaced by a new input symbol, is compiled the
// same way (recursively, for further breaks). Values the rest shares with segment one are
// recomputed there from the inputs rather than kept: simple, and always correct.
#pragma once
#include <string>
#include <tuple>

#include "kiln/expr/ops/host.hpp"
#include "kiln/runtime/compiled.hpp"

namespace kiln::runtime {
inline namespace KILN_BACKEND_NS {

// The symbol that stands for the value of the K-th graph break.
template <int K, int Rank, class T>
using HostSymbol = Symbol<0x686f7374'00000000ull + K, Rank, T, SymbolKind::Input, Name<'h', 'o', 's', 't', char('0' + K % 10)>>;

// Split an expression at its first host node: ::first is the host node's operand type,
// ::rest the expression with the host node replaced, with split(e) doing the same to objects.
template <class E, int K>
struct split_host;

template <class Op, class... Cs, int K>
struct split_host<Node<Op, Cs...>, K> {
  using E = Node<Op, Cs...>;
  static constexpr int which = [] {
    constexpr bool h[] = {has_host<Cs>::value...};
    for (int i = 0; i < static_cast<int>(sizeof...(Cs)); ++i)
      if (h[i]) return i;
    return -1;
  }();
  using child = std::tuple_element_t<which, std::tuple<Cs...>>;
  using inner = split_host<child, K>;
  using first = typename inner::first;
  using fn_type = typename inner::fn_type;
  template <std::size_t... I>
  static auto rebuild(const E& e, typename inner::rest r, std::index_sequence<I...>) {
    return Node<Op, std::conditional_t<I == which, typename inner::rest, Cs>...>(e.op, [&] {
      if constexpr (I == which) return r;
      else return std::get<I>(e.children);
    }()...);
  }
  using rest = decltype(rebuild(std::declval<const E&>(), std::declval<typename inner::rest>(), std::index_sequence_for<Cs...>{}));
  static const first& operand(const E& e) { return inner::operand(std::get<which>(e.children)); }
  static const fn_type& fn(const E& e) { return inner::fn(std::get<which>(e.children)); }
  static rest remainder(const E& e) {
    return rebuild(e, inner::remainder(std::get<which>(e.children)), std::index_sequence_for<Cs...>{});
  }
};

template <class F, class C, int K>
  requires(!has_host<C>::value)
struct split_host<Node<HostOp<F>, C>, K> {
  using E = Node<HostOp<F>, C>;
  using first = C;
  using fn_type = F;
  using rest = HostSymbol<K, C::rank, typename C::dtype>;
  static const first& operand(const E& e) { return std::get<0>(e.children); }
  static const fn_type& fn(const E& e) { return e.op.fn; }
  static rest remainder(const E&) { return {}; }
};

template <class... Es, int K>
struct split_host<Outputs<Es...>, K> {
  using E = Outputs<Es...>;
  static constexpr int which = [] {
    constexpr bool h[] = {has_host<Es>::value...};
    for (int i = 0; i < static_cast<int>(sizeof...(Es)); ++i)
      if (h[i]) return i;
    return -1;
  }();
  using inner = split_host<std::tuple_element_t<which, std::tuple<Es...>>, K>;
  using first = typename inner::first;
  using fn_type = typename inner::fn_type;
  template <std::size_t... I>
  static auto rebuild(const E& e, typename inner::rest r, std::index_sequence<I...>) {
    return Outputs<std::conditional_t<I == which, typename inner::rest, Es>...>{{[&] {
      if constexpr (I == which) return r;
      else return std::get<I>(e.items);
    }()...}};
  }
  using rest = decltype(rebuild(std::declval<const E&>(), std::declval<typename inner::rest>(), std::index_sequence_for<Es...>{}));
  static const first& operand(const E& e) { return inner::operand(std::get<which>(e.items)); }
  static const fn_type& fn(const E& e) { return inner::fn(std::get<which>(e.items)); }
  static rest remainder(const E& e) { return rebuild(e, inner::remainder(std::get<which>(e.items)), std::index_sequence_for<Es...>{}); }
};

template <class Root, class Policy, int K = 0>
class Segmented;

template <class Root, class Policy, int K>
using program_t = std::conditional_t<has_host<Root>::value, Segmented<Root, Policy, K>, Compiled<Root, Policy>>;

// Segment one, the host call, then the rest.
template <class Root, class Policy, int K>
class Segmented {
  using split = split_host<Root, K>;
  using First = typename split::first;
  using T = typename First::dtype;
  static constexpr std::uint64_t kHostId = HostSymbol<K, First::rank, T>::id;

 public:
  explicit Segmented(const Root& root)
      : first_(split::operand(root)), fn_(split::fn(root)), rest_(split::remainder(root)) {}

  template <class... Bs>
  auto operator()(const Bs&... bs) {
    if constexpr (!all_bindings<Bs...>) {
      static_assert(positional_call<Bs...>, KILN_POSITIONAL_CALL_MESSAGE);
      return Tensor<float>{};  // only so that the caller's use of the result adds no error
    } else {
      (check_known<Bs>(), ...);
      (check_bound_once<Bs, binding_count<Bs::id, Bs...>>(), ...);
      return call_subset(bs...);
    }
  }

  // Like operator(), ignoring bindings of symbols this program does not use.
  template <class... Bs>
  auto call_subset(const Bs&... bs) {
    const Tensor<T> operand = first_.call_subset(bs...);
    const Tensor<T> value = fn_(operand);
    if (value.rank() != First::rank)
      throw ShapeError("host: the function returned shape " + value.shape().str() + ", of rank " +
                       std::to_string(value.rank()) + "; it must return rank " + std::to_string(First::rank));
    return rest_.call_subset(bs..., Binding<kHostId, T>{&value});
  }

  std::size_t kernel_count() const { return first_.kernel_count() + rest_.kernel_count(); }

  std::string explain() const {
    std::string s = first_.explain();
    s += "graph break " + std::to_string(K) + ": kiln::host calls a host function on the value above (host" +
         std::to_string(K % 10) + " below)\n";
    return s + rest_.explain();
  }

 private:
  // The checks Compiled makes, against the symbols of the whole program.
  using whole = graph::graph_of<Root>;
  static constexpr bool known(std::uint64_t id) {
    for (int i = 0; i < whole::size; ++i)
      if (whole::info.nodes[i].kind == NodeKind::Symbol && whole::info.nodes[i].symbol_id == id) return true;
    return false;
  }
  template <class B>
  static constexpr void check_known() {
    if constexpr (!known(B::id)) (void)symbol_not_in_expression<B>::value;
  }

  Compiled<First, Policy> first_;
  typename split::fn_type fn_;
  program_t<typename split::rest, Policy, K + 1> rest_;
};

}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln::runtime
