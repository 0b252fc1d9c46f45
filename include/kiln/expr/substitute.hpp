// kiln: rewriting an expression's symbols, so that one block's expression builds a stack of
// blocks (torch.fx's graph surgery, done on types at compile time):
//
//   kiln::substitute(e, x, r)          e with every occurrence of symbol x replaced by the
//                                      expression r (of x's rank and element type)
//   kiln::prefix_params<"h.3.">(e)     e with every kiln::param renamed "h.3.<name>", so that
//                                      the copies of a layer have their own weights, by the
//                                      names Hugging Face's checkpoints give them
//   kiln::map_symbols(e, f)            the general form: each symbol s replaced by f(s)
//   kiln::shared_values(e)             e's kiln::shared values, each once (a tuple)
//   kiln::replace_shared<Vs>(e, xs)    e with each shared value of the tuple type Vs replaced
//                                      by the matching expression of the tuple xs (a value
//                                      computed once, read back as an input elsewhere)
//
// A stack of L layers of one layer expression `layer(h)` over the residual input h:
//   auto x = embed;  x = substitute(prefix_params<"h.0.">(layer), h, x);  ... (layer 1, 2, ...)
//
// A renamed symbol is the symbol kiln::param<"h.3.name"> declares (its id is the hash of its
// full name), so it binds as that one does. Nodes keep their stored values (a layer_norm's eps,
// a reshape's extents); a kiln::shared value stays one value per copy (its type now differs).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/expr/node.hpp"

namespace kiln {

namespace detail {
template <class F, std::uint64_t Id, int R, class T, SymbolKind K, class N>
constexpr auto map_symbols_of(const Symbol<Id, R, T, K, N>& s, const F& f);
template <class F, class T>
constexpr auto map_symbols_of(const Constant<T>& c, const F& f);
template <class F, std::uint64_t Tag, class E>
constexpr auto map_symbols_of(const Shared<Tag, E>& s, const F& f);
template <class F, class Op, class... Cs>
constexpr auto map_symbols_of(const Node<Op, Cs...>& n, const F& f);

template <class F, std::uint64_t Id, int R, class T, SymbolKind K, class N>
constexpr auto map_symbols_of(const Symbol<Id, R, T, K, N>& s, const F& f) {
  return f(s);
}
template <class F, class T>
constexpr auto map_symbols_of(const Constant<T>& c, const F&) {
  return c;
}
template <class F, std::uint64_t Tag, class E>
constexpr auto map_symbols_of(const Shared<Tag, E>& s, const F& f) {
  using R = decltype(map_symbols_of(s.value, f));
  return Shared<Tag, R>{{}, map_symbols_of(s.value, f)};
}
template <class F, class Op, class... Cs>
constexpr auto map_symbols_of(const Node<Op, Cs...>& n, const F& f) {
  return std::apply(
      [&](const Cs&... c) { return Node<Op, decltype(map_symbols_of(c, f))...>(n.op, map_symbols_of(c, f)...); },
      n.children);
}
}  // namespace detail

// e with each symbol s replaced by f(s), an expression.
template <Expression E, class F>
constexpr auto map_symbols(const E& e, const F& f) {
  return detail::map_symbols_of(e, f);
}

namespace detail {
template <std::uint64_t Tag, class Vs>
inline constexpr bool has_shared_tag = false;
template <std::uint64_t Tag, class... Vs>
inline constexpr bool has_shared_tag<Tag, std::tuple<Vs...>> = ((Vs::tag == Tag) || ...);
template <std::uint64_t Tag, class... Vs>
constexpr std::size_t shared_index(std::tuple<Vs...>*) {
  std::size_t i = 0;
  ((Vs::tag == Tag ? false : (++i, true)) && ...);
  return i;
}

template <class Acc, std::uint64_t Id, int R, class T, SymbolKind K, class N>
constexpr auto shared_values_of(const Acc& acc, const Symbol<Id, R, T, K, N>&) {
  return acc;
}
template <class Acc, class T>
constexpr auto shared_values_of(const Acc& acc, const Constant<T>&) {
  return acc;
}
template <class Acc, std::uint64_t Tag, class E>
constexpr auto shared_values_of(const Acc& acc, const Shared<Tag, E>& s);
template <class Acc, class Op, class... Cs>
constexpr auto shared_values_of(const Acc& acc, const Node<Op, Cs...>& n);
template <class Acc>
constexpr auto shared_values_fold(const Acc& acc) {
  return acc;
}
template <class Acc, class C, class... Cs>
constexpr auto shared_values_fold(const Acc& acc, const C& c, const Cs&... cs) {
  return shared_values_fold(shared_values_of(acc, c), cs...);
}
template <class Acc, std::uint64_t Tag, class E>
constexpr auto shared_values_of(const Acc& acc, const Shared<Tag, E>& s) {
  if constexpr (has_shared_tag<Tag, Acc>) return acc;
  else return std::tuple_cat(shared_values_of(acc, s.value), std::tuple<Shared<Tag, E>>{s});
}
template <class Acc, class Op, class... Cs>
constexpr auto shared_values_of(const Acc& acc, const Node<Op, Cs...>& n) {
  return std::apply([&](const Cs&... c) { return shared_values_fold(acc, c...); }, n.children);
}

template <class Vs, class Xs, std::uint64_t Id, int R, class T, SymbolKind K, class N>
constexpr auto replace_shared_of(const Symbol<Id, R, T, K, N>& s, const Xs&) {
  return s;
}
template <class Vs, class Xs, class T>
constexpr auto replace_shared_of(const Constant<T>& c, const Xs&) {
  return c;
}
template <class Vs, class Xs, std::uint64_t Tag, class E>
constexpr auto replace_shared_of(const Shared<Tag, E>& s, const Xs& xs);
template <class Vs, class Xs, class Op, class... Cs>
constexpr auto replace_shared_of(const Node<Op, Cs...>& n, const Xs& xs);
template <class Vs, class Xs, std::uint64_t Tag, class E>
constexpr auto replace_shared_of(const Shared<Tag, E>& s, const Xs& xs) {
  if constexpr (has_shared_tag<Tag, Vs>) {
    using X = std::remove_cvref_t<decltype(std::get<shared_index<Tag>(static_cast<Vs*>(nullptr))>(xs))>;
    static_assert(X::rank == E::rank && std::is_same_v<typename X::dtype, typename E::dtype>,
                  "kiln::replace_shared: the expression read in place of a shared value must have its rank and element type");
    return std::get<shared_index<Tag>(static_cast<Vs*>(nullptr))>(xs);
  }
  else {
    using R = decltype(replace_shared_of<Vs>(s.value, xs));
    return Shared<Tag, R>{{}, replace_shared_of<Vs>(s.value, xs)};
  }
}
template <class Vs, class Xs, class Op, class... Cs>
constexpr auto replace_shared_of(const Node<Op, Cs...>& n, const Xs& xs) {
  return std::apply(
      [&](const Cs&... c) {
        return Node<Op, decltype(replace_shared_of<Vs>(c, xs))...>(n.op, replace_shared_of<Vs>(c, xs)...);
      },
      n.children);
}
}  // namespace detail

// e's kiln::shared values, each once, a value after the shared values it reads: a tuple.
template <Expression E>
constexpr auto shared_values(const E& e) {
  return detail::shared_values_of(std::tuple<>{}, e);
}

// e with each kiln::shared value whose tag is one of the tuple type Vs's replaced by the
// expression at the same place in xs (of the value's rank and element type).
template <class Vs, Expression E, class Xs>
constexpr auto replace_shared(const E& e, const Xs& xs) {
  static_assert(std::tuple_size_v<Vs> == std::tuple_size_v<Xs>, "kiln::replace_shared: give one expression per shared value");
  return detail::replace_shared_of<Vs>(e, xs);
}

// e with every occurrence of the symbol `from` replaced by the expression `to`.
template <Expression E, Expression S, Expression R>
constexpr auto substitute(const E& e, [[maybe_unused]] S from, const R& to) {
  static_assert(S::kind == NodeKind::Symbol, "kiln::substitute: what is replaced must be a symbol (kiln::input or kiln::param)");
  static_assert(S::rank == R::rank && std::is_same_v<typename S::dtype, typename R::dtype>,
                "kiln::substitute: the replacement must have the symbol's rank and element type");
  return map_symbols(e, [&](const auto& s) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(s)>, S>) return to;
    else return s;
  });
}

namespace detail {
// The characters of "<P><Cs...>".
template <fixed_string P, char... Cs>
inline constexpr auto prefixed_name = [] {
  std::array<char, P.size() + sizeof...(Cs)> a{};
  const char name[] = {Cs..., '\0'};
  for (std::size_t i = 0; i < P.size(); ++i) a[i] = P.data[i];
  for (std::size_t i = 0; i < sizeof...(Cs); ++i) a[P.size() + i] = name[i];
  return a;
}();
}  // namespace detail

// The symbol s renamed "<P><its name>": the symbol kiln::input/param<"<P><name>"> declares.
template <fixed_string P, std::uint64_t Id, int R, class T, SymbolKind K, char... Cs>
constexpr auto prefixed(Symbol<Id, R, T, K, Name<Cs...>>) {
  constexpr const auto& chars = detail::prefixed_name<P, Cs...>;
  return []<std::size_t... I>(std::index_sequence<I...>) {
    constexpr const auto& c = detail::prefixed_name<P, Cs...>;
    return Symbol<fnv1a(std::string_view(c.data(), c.size())), R, T, K, Name<c[I]...>>{};
  }(std::make_index_sequence<chars.size()>{});
}

// "<P><i>.": the prefix of layer i's weights in Hugging Face's checkpoints, e.g.
// numbered<"h.", 3>() is "h.3." and numbered<"model.layers.", 3>() "model.layers.3.".
template <fixed_string P, std::size_t I>
constexpr auto numbered() {
  constexpr std::size_t digits = [] {
    std::size_t d = 1;
    for (std::size_t v = I; v >= 10; v /= 10) ++d;
    return d;
  }();
  char s[P.size() + digits + 2] = {};
  for (std::size_t i = 0; i < P.size(); ++i) s[i] = P.data[i];
  for (std::size_t v = I, i = 0; i < digits; ++i, v /= 10) s[P.size() + digits - 1 - i] = static_cast<char>('0' + v % 10);
  s[P.size() + digits] = '.';
  return fixed_string<P.size() + digits + 2>(s);
}

// e with every kiln::param renamed "<P><name>" (inputs keep their names).
template <fixed_string P, Expression E>
constexpr auto prefix_params(const E& e) {
  return map_symbols(e, [](auto s) {
    if constexpr (decltype(s)::symbol_kind == SymbolKind::Param) return prefixed<P>(s);
    else return s;
  });
}

}  // namespace kiln
