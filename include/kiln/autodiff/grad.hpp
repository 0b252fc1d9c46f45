// kiln: reverse mode. kiln::grad(loss, w1, w2, ...) returns the gradient expressions
// d loss / d wi as a std::tuple, built at compile time from each op's vjp rule (declared next to
// the op). They are ordinary expressions: compile them alone or together with the loss, e.g.
//   auto [dw, db] = kiln::grad(loss, w, b);
//   auto step = kiln::compile(kiln::outputs(loss, dw, db));
// and the planner fuses the forward and backward kernels of the joint graph as one program.
//
// The walk visits the nodes that depend on the variables (autodiff/dag.hpp) from the loss down,
// in reverse topological order: a node's cotangent is the sum of what each of its users' rules
// hands it, computed once and made a Shared value, so it becomes one node of the program however
// many rules read it. The cost in types and in graph nodes is linear in the loss's graph.
#pragma once
#include <array>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/autodiff/dag.hpp"
#include "kiln/expr/ops/axis_copy.hpp"
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/host.hpp"

namespace kiln {

namespace autodiff {

template <class D>
struct Uses {
  static constexpr int N = D::size;
  // kids[u][k]: the entry id of operand k of entry u, or -1.
  static constexpr auto kids = []<std::size_t... U>(std::index_sequence<U...>) {
    std::array<std::array<int, kMaxOperands>, (N > 0 ? N : 1)> t{};
    for (auto& r : t) r.fill(-1);
    (
        [&] {
          using Entry = typename D::template entry<U>;
          static_assert(Entry::nkids <= kMaxOperands, "kiln::grad: an op with more than kiln::kMaxOperands operands");
          for (int k = 0; k < Entry::nkids; ++k) t[U][k] = Entry::kids[k];
        }(),
        ...);
    return t;
  }(std::make_index_sequence<N>{});

  template <int I>
  static constexpr int count = [] {
    int n = 0;
    for (int u = 0; u < N; ++u)
      for (int k = 0; k < kMaxOperands; ++k) n += kids[u][k] == I;
    return n;
  }();
  // The (user, operand position) pairs through which entry I is read.
  template <int I>
  static constexpr auto users = [] {
    std::array<std::pair<int, int>, (count<I> > 0 ? count<I> : 1)> r{};
    int n = 0;
    for (int u = 0; u < N; ++u)
      for (int k = 0; k < kMaxOperands; ++k)
        if (kids[u][k] == I) r[n++] = {u, k};
    return r;
  }();
};

namespace detail {
template <class T>
struct inserted_part : std::false_type {};
template <int Axis, int K, int N, class X, class L>
struct inserted_part<Node<ChunkInsert<Axis, K, N>, X, L>> : std::true_type {
  static constexpr int axis = Axis, k = K, n = N;
  using like = L;
};
// Whether Terms are chunk_insert<A, K, N>(x_K, like) for every K in 0 .. N-1, once each, with
// one axis, N and like, and N parts fit one concat_parts.
template <class... Terms>
constexpr bool are_all_parts() {
  if constexpr (!(inserted_part<Terms>::value && ...)) {
    return false;
  } else {
    using First = inserted_part<std::tuple_element_t<0, std::tuple<Terms...>>>;
    constexpr int n = First::n;
    if (static_cast<int>(sizeof...(Terms)) != n || n > kMaxAxisCopySegments) return false;
    if (!((inserted_part<Terms>::axis == First::axis && inserted_part<Terms>::n == n &&
           std::is_same_v<typename inserted_part<Terms>::like, typename First::like>) && ...))
      return false;
    bool seen[kMaxAxisCopySegments] = {};
    for (int k : {inserted_part<Terms>::k...}) {
      if (seen[k]) return false;
      seen[k] = true;
    }
    return true;
  }
}
// The position in Terms of the part K.
template <int K, class... Terms>
constexpr std::size_t part_index() {
  std::size_t i = 0, at = 0;
  ((inserted_part<Terms>::k == K ? (at = i, ++i) : ++i), ...);
  return at;
}
}  // namespace detail

// The sum of the cotangent contributions `terms` to one value: where they are every part of a
// chunked value placed back (chunk_insert<A, K, N>, K = 0 .. N-1: the gradient of a fused QKV
// projection split into q, k and v), the parts concatenated in one kernel (concat_parts),
// instead of N zero-filled copies of the whole value and their sum; else nullptr_t (the caller
// adds them).
template <class... Terms>
constexpr auto sum_of_parts(const Terms&... terms) {
  if constexpr (sizeof...(Terms) < 2 || !detail::are_all_parts<Terms...>()) {
    return nullptr;
  } else {
    const auto all = std::forward_as_tuple(terms...);
    constexpr int axis = detail::inserted_part<std::tuple_element_t<0, std::tuple<Terms...>>>::axis;
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return kiln::concat_parts<axis>(std::get<0>(std::get<detail::part_index<static_cast<int>(K), Terms...>()>(all).children)...);
    }(std::index_sequence_for<Terms...>{});
  }
}

template <class D, class T, std::uint64_t Tag>
struct Reverse {
  static constexpr int N = D::size;
  using uses = Uses<D>;

  // The contribution of user U's rule to its operand K; cots holds the cotangents of the
  // entries I+1 ... N-1.
  template <int I, int U, int K, class Root, class Cots>
  static constexpr auto contribution(const Root& root, const Cots& cots) {
    const auto& g = std::get<U - I - 1>(cots);
    using G = std::remove_cvref_t<decltype(g)>;
    using E = typename D::template entry<U>::type;
    if constexpr (std::is_same_v<G, NoGrad>) {
      return NoGrad{};
    } else if constexpr (E::kind == NodeKind::Shared) {
      return g;
    } else {
      using Op = typename E::op_type;
      static_assert(!requires { Op::host; },
                    "kiln::grad: kiln::host (a graph break) has no derivative; keep it out of the differentiated path");
      const auto& y = at_path(root, typename D::template entry<U>::path{});
      if constexpr (std::is_base_of_v<PointwiseOp, Op>) return std::get<K>(Op::vjp(with_shared_operands<U>(y), g));
      else if constexpr (requires { Op::vjp_takes_tag; }) {
        // A rule that computes one value for several operands' gradients shares it under a tag
        // of its own, one per entry of the walk.
        constexpr std::uint64_t tag = hash_mix(hash_mix(Tag, fnv1a("kiln::grad.rule")), static_cast<std::uint64_t>(U));
        return std::get<K>(Op::template vjp<tag>(y, g));
      } else return std::get<K>(Op::vjp(y, g));
    }
  }

  // A pointwise rule reads its operand x at several places (gelu_tanh's, 15): each operand that
  // is computed (not a symbol, a constant or a value merged by type anyway) is made a Shared
  // value, one per entry of the walk, so that the rules' reads of it are one node of the
  // program, computed once, and not a copy per read (a matmul's copy each a GEMM).
  template <int U, class Op, class... Cs>
  static constexpr auto with_shared_operands(const Node<Op, Cs...>& y) {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return Node<Op, decltype(shared_operand<U, K>(std::get<K>(y.children)))...>(
          y.op, shared_operand<U, K>(std::get<K>(y.children))...);
    }(std::index_sequence_for<Cs...>{});
  }
  template <int U, std::size_t K, class C>
  static constexpr auto shared_operand(const C& c) {
    if constexpr (!requires { typename C::op_type; }) return c;  // a symbol or a constant
    else {
      constexpr int kid = uses::kids[U][K];
      constexpr std::uint64_t tag = kid >= 0 ? hash_mix(hash_mix(Tag, fnv1a("kiln::grad.operand")), static_cast<std::uint64_t>(kid))
                                             : hash_mix(hash_mix(Tag, fnv1a("kiln::grad.constant_operand")),
                                                        static_cast<std::uint64_t>(U * kMaxOperands + static_cast<int>(K)));
      return share<tag>(c);
    }
  }

  // The contributions' sum; every part of a chunked value placed back is one concat instead
  // (sum_of_parts).
  template <class A, class... B>
  static constexpr auto sum(const A& a, const B&... b) {
    if constexpr (sizeof...(B) == 0) return a;
    else if constexpr (!std::is_same_v<decltype(sum_of_parts(a, b...)), std::nullptr_t>) return sum_of_parts(a, b...);
    else return add_cotangents(a, sum(b...));
  }

  // seed: the cotangent of the root (1 for a loss; the incoming gradient for a vjp).
  template <int I, class Root, class Seed, class Cots>
  static constexpr auto cotangent(const Root& root, const Seed& seed, const Cots& cots) {
    if constexpr (I == N - 1) {
      return seed;
    } else if constexpr (uses::template count<I> == 0) {
      return NoGrad{};
    } else {
      const auto total = [&]<std::size_t... J>(std::index_sequence<J...>) {
        constexpr auto& us = uses::template users<I>;
        return sum(contribution<I, us[J].first, us[J].second>(root, cots)...);
      }(std::make_index_sequence<uses::template count<I>>{});
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(total)>, NoGrad>) return NoGrad{};
      else return share<hash_mix(Tag, static_cast<std::uint64_t>(I))>(total);
    }
  }

  // The cotangents of entries I, I-1, ..., 0, given those of I+1 ... N-1; all N as a tuple.
  template <int I, class Root, class Seed, class... Cs>
  static constexpr auto run(const Root& root, const Seed& seed, const Cs&... cots) {
    if constexpr (I < 0) {
      return std::tuple<Cs...>{cots...};
    } else {
      const auto c = cotangent<I>(root, seed, std::forward_as_tuple(cots...));
      return run<I - 1>(root, seed, c, cots...);
    }
  }
};

// The cotangents of the symbols ws for the root y seeded with `seed`, as a tuple.
template <std::uint64_t Salt, class Y, class Seed, class... Ws>
constexpr auto reverse_from(const Y& y, const Seed& seed, const Ws&... ws);

// The gradient of variable w: its cotangent, or zeros where the loss does not depend on it. Its
// element type is w's: a variable of another float type than the root's is read through
// kiln::cast, whose derivative casts back (mixed precision: a float master weight read in bf16).
template <class D, class Cots, class W>
constexpr auto gradient_of(const Cots& cots, const W& w) {
  constexpr int id = dag_find<W, D>::value;
  if constexpr (id < 0) {
    return expand_as(Constant<typename W::dtype>(0), w);
  } else if constexpr (std::is_same_v<std::tuple_element_t<id, Cots>, NoGrad>) {
    return expand_as(Constant<typename W::dtype>(0), w);
  } else {
    return std::get<id>(cots);
  }
}

}  // namespace autodiff

namespace autodiff {
template <std::uint64_t Salt, class Y, class Seed, class... Ws>
constexpr auto reverse_from(const Y& y, const Seed& seed, const Ws&... ws) {
  static_assert(sizeof...(Ws) > 0, "kiln::grad / kiln::vjp: name the symbols to differentiate with respect to");
  static_assert(((Ws::kind == NodeKind::Symbol) && ...),
                "kiln::grad / kiln::vjp: differentiate with respect to symbols (kiln::param or kiln::input), not expressions");
  static_assert((!is_index_element_v<typename Ws::dtype> && ...),
                "kiln::grad / kiln::vjp: an integer input (kiln::i32, kiln::i64) has no gradient; differentiate with "
                "respect to float symbols only");
  using T = typename Y::dtype;
  using D = dag_of<Vars<Ws::id...>, Y>;
  constexpr std::uint64_t tag = [] {
    std::uint64_t h = dag_hash<D>(hash_mix(fnv1a("kiln::grad"), Salt));
    ((h = hash_mix(h, Ws::id)), ...);
    return h;
  }();
  const auto cots = [&] {
    if constexpr (D::size == 0) return std::tuple<>{};
    else return Reverse<D, T, tag>::template run<D::size - 1>(y, seed);
  }();
  return std::tuple{gradient_of<D>(cots, ws)...};
}
}  // namespace autodiff

// The gradients of a scalar loss with respect to symbols, as a std::tuple of expressions, one
// per symbol, each of that symbol's shape. A symbol the loss does not depend on gets zeros.
// Salt tells apart two kiln::grad calls of equal structure in one program (compile() reports
// such a collision): kiln::grad<1>(loss2, w).
template <std::uint64_t Salt = 0, Expression L, Expression... Ws>
constexpr auto grad(const L& loss, const Ws&... ws) {
  static_assert(L::rank == 0,
                "kiln::grad: the loss must be a scalar (rank 0); reduce it first, e.g. with kiln::sum or kiln::mean, or "
                "use kiln::vjp with a cotangent");
  return autodiff::reverse_from<Salt>(loss, Constant<typename L::dtype>(1), ws...);
}

// The vector-Jacobian product of y: given the cotangent g of y (the gradient of some loss with
// respect to y, y's shape, or broadcasting to it), the cotangents of the symbols ws, as a
// std::tuple (torch.autograd.grad(y, ws, grad_outputs=g)). With it the backward of a region runs
// on its own, given the gradient flowing into it: a model's layers one at a time, say.
//   auto [dx, dw] = kiln::vjp(layer_out, g, x, w);
template <std::uint64_t Salt = 0, Expression Y, Expression G, Expression... Ws>
constexpr auto vjp(const Y& y, const G& g, const Ws&... ws) {
  static_assert(G::rank <= Y::rank, "kiln::vjp: the cotangent g must have y's shape (or broadcast to it), so not a higher rank");
  static_assert(std::is_same_v<typename G::dtype, typename Y::dtype>,
                "kiln::vjp: the cotangent g must have y's element type");
  return autodiff::reverse_from<Salt>(y, expand_as(g, y), ws...);
}

}  // namespace kiln
