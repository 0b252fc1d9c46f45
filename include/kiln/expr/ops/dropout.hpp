// kiln: dropout<P>(x, rng), as torch.nn.functional.dropout in training: each element of x is
// kept with probability 1 - P and scaled by 1 / (1 - P), or set to 0. The mask is drawn from
// Philox4x32-10 (core/philox.hpp), a pure function of (seed, offset, stream, element), so it is
// never stored: the backward draws the same mask again (its VJP is dropout of the cotangent), and
// the CPU and CUDA draw the same bits.
//   rng       a kiln::i64 input of shape [2], (seed, offset), read where the kernel runs: a
//             training loop advances the offset (or the seed) each step without a recompile or
//             a new CUDA graph
//   Stream    a number per dropout site (a template argument, default 0): two sites with one
//             stream draw the same mask for tensors of one shape, as two torch calls with one
//             generator state would; give each site its own
//   Training  false: the identity (evaluation), no kernel
// Element i is the i-th of x's shape in row-major order (whatever x's strides), kept where
// philox::uniform(seed, offset, Stream, i) >= P. One kernel of the dropout kind.
#pragma once
#include <cstdint>
#include <tuple>

#include "kiln/core/philox.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/zero.hpp"

namespace kiln {

template <double P, std::uint32_t Stream>
struct DropoutOp {
  static constexpr NodeKind kind = NodeKind::Dropout;
  static constexpr bool composite = false;
  static constexpr bool takes_indices = true, index_last = true;  // rng
  static constexpr const char* name = "dropout";
  static constexpr double probability = P;
  static constexpr std::uint32_t stream = Stream;
  template <int R, int>
  static constexpr int out_rank = R;
  template <class T, class>
  using dtype = T;
  // The same mask and scale on the cotangent (tangent): the map is linear in x.
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{Node<DropoutOp, G, std::tuple_element_t<1, decltype(y.children)>>({}, g, std::get<1>(y.children)),
                      autodiff::NoGrad{}};
  }
  template <class N, class Tx, class Tr>
  static constexpr auto jvp(const N& y, const Tx& t, const Tr&) {
    return autodiff::tangent_apply(
        [&](const auto& v) {
          using V = std::remove_cvref_t<decltype(v)>;
          return Node<DropoutOp, V, std::tuple_element_t<1, decltype(y.children)>>({}, v, std::get<1>(y.children));
        },
        t);
  }
};

template <double P, bool Training = true, std::uint32_t Stream = 0, Expression X, Expression R>
constexpr auto dropout(X x, R rng) {
  static_assert(P >= 0 && P < 1, "kiln::dropout<P>: the probability of dropping must be in [0, 1)");
  static_assert(is_float_element_v<typename X::dtype>, "kiln::dropout: x must be a float tensor");
  static_assert(std::is_same_v<typename R::dtype, i64> && R::rank == 1 && is_index_input_v<R>,
                "kiln::dropout: rng must be a kiln::i64 input of shape [2], (seed, offset): "
                "kiln::input<\"rng\", 1, kiln::i64>()");
  if constexpr (!Training) return x;
  else return Node<DropoutOp<P, Stream>, X, R>({}, x, rng);
}

}  // namespace kiln
