// kiln: optimizers as expressions. Each returns the kiln::assign outputs of one update step, to
// be compiled together with the loss and its gradients, so that one call runs forward,
// backward and update:
//   auto [dw] = kiln::grad(loss, w);
//   auto [av, aw] = kiln::nn::sgd_momentum(w, v, dw, 0.1, 0.9);
//   auto step = kiln::compile(kiln::outputs(loss, av, aw));
// The state (v, m, ...) lives in tensors the caller binds, which the step updates in place.
// The formulas are PyTorch's (torch.optim.SGD, torch.optim.AdamW). A new state that is both
// assigned and read by the weight update is a Shared value (computed once), keyed by the
// weight's symbol; so update each weight once per program.
#pragma once
#include <cmath>
#include <tuple>
#include <type_traits>

#include "kiln/expr/ops/pointwise.hpp"

namespace kiln::nn {

// SGD (torch.optim.SGD without momentum): w <- w - lr (g + wd w).
template <Expression W, Expression G>
constexpr auto sgd(W w, G g, double lr, double weight_decay = 0) {
  return std::tuple{assign(w, w - (g + w * weight_decay) * lr)};
}

// SGD with momentum and weight decay (torch.optim.SGD, no dampening, not Nesterov's):
//   d <- g + wd w;  v <- mu v + d;  w <- w - lr v
// With v zero before the first step, v's first value is d, as PyTorch's first step sets it.
template <Expression W, Expression V, Expression G>
constexpr auto sgd(W w, V v, G g, double lr, double momentum, double weight_decay = 0) {
  const auto v1 = share<hash_mix(fnv1a("kiln::nn::sgd.v"), W::id)>(v * momentum + (g + w * weight_decay));
  return std::tuple{assign(v, v1), assign(w, w - v1 * lr)};
}

// SGD with momentum: v <- mu v + g; w <- w - lr v.
template <Expression W, Expression V, Expression G>
constexpr auto sgd_momentum(W w, V v, G g, double lr, double momentum) {
  const auto v1 = share<hash_mix(fnv1a("kiln::nn::sgd_momentum.v"), W::id)>(v * momentum + g);
  return std::tuple{assign(v, v1), assign(w, w - v1 * lr)};
}

// A hyper-parameter of an optimizer: a number fixed when the program is built, or a rank-0
// expression (an input) read at every call, for a schedule.
template <class H>
concept HyperParameter = std::is_arithmetic_v<H> || (Expression<H> && H::rank == 0);

// AdamW with decoupled weight decay and bias correction; step is a rank-0 input holding the
// step number t (1 for the first step). Arranged as torch.optim.AdamW computes it:
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
//   w <- w (1 - lr wd) - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// lr and weight_decay are numbers or rank-0 inputs (a learning-rate schedule feeds lr at each
// call). The two bias corrections are scalars, computed once per call (the planner gives scalar
// chains a kernel of their own), so each element costs one sqrt and one division.
template <Expression W, Expression M, Expression V, Expression G, Expression Step, HyperParameter Lr,
          HyperParameter Wd = double>
constexpr auto adamw(W w, M m, V v, G g, Step step, Lr lr, double beta1 = 0.9, double beta2 = 0.999,
                     double eps = 1e-8, Wd weight_decay = 1e-2) {
  static_assert(Step::rank == 0, "kiln::nn::adamw: the step count must be a rank-0 input");
  const auto m1 = share<hash_mix(fnv1a("kiln::nn::adamw.m"), W::id)>(m * beta1 + g * (1 - beta1));
  const auto v1 = share<hash_mix(fnv1a("kiln::nn::adamw.v"), W::id)>(v * beta2 + square(g) * (1 - beta2));
  const auto step_size = lr / (1 - exp(step * std::log(beta1)));       // lr / (1 - beta1^t)
  const auto inv_sqrt_c2 = rsqrt(1 - exp(step * std::log(beta2)));  // 1 / sqrt(1 - beta2^t)
  const auto w1 = w * (1 - lr * weight_decay) - m1 * step_size / (sqrt(v1) * inv_sqrt_c2 + eps);
  return std::tuple{assign(m, m1), assign(v, v1), assign(w, w1)};
}

}  // namespace kiln::nn
