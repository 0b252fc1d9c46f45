// kiln: the training step kiln::Trainer compiles, as one program (torch.compile's training
// mode): the loss of a batch, the gradient of every parameter, their global norm, clipping, and
// AdamW's update of every parameter and its two moments, in place:
//   g_p   = d loss / d p                                   for each parameter p
//   norm  = sqrt(sum_p sum(g_p^2))                          (torch.nn.utils.clip_grad_norm_)
//   c     = min(max_grad_norm / (norm + 1e-6), 1)           (1 when max_grad_norm is +inf)
//   m_p, v_p, p <- AdamW(p, m_p, v_p, c g_p, t, lr, wd)     (kiln::nn::adamw, torch.optim.AdamW)
// The learning rate, weight decay, clipping bound and step count t are rank-0 inputs, so a
// schedule changes them at every call without a new plan. The moments are parameters of their
// own, named as PyTorch's optimizer state: "exp_avg.<name>" and "exp_avg_sq.<name>".
#pragma once
#include <cstdint>
#include <tuple>
#include <utility>

#include "kiln/autodiff/grad.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/nn/optim.hpp"

namespace kiln::train {

// A parameter derived from W: its name prefixed by P, its type keyed by P and W's id.
template <fixed_string P, std::uint64_t Id, int R, class T, SymbolKind K, char... Cs>
constexpr auto derived_param(Symbol<Id, R, T, K, Name<Cs...>>) {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return Symbol<hash_mix(fnv1a(P.view()), Id), R, T, SymbolKind::Param, Name<P.data[I]..., Cs...>>{};
  }(std::make_index_sequence<P.size()>{});
}
// AdamW's first and second moments of parameter w.
template <class W>
constexpr auto exp_avg(W w) {
  return derived_param<"exp_avg.">(w);
}
template <class W>
constexpr auto exp_avg_sq(W w) {
  return derived_param<"exp_avg_sq.">(w);
}

// The step's run-time hyper-parameters, in the parameters' element type T.
template <class T>
struct StepSymbols {
  static constexpr auto lr = input<"kiln.lr", 0, T>();
  static constexpr auto weight_decay = input<"kiln.weight_decay", 0, T>();
  static constexpr auto max_grad_norm = input<"kiln.max_grad_norm", 0, T>();
  static constexpr auto step = input<"kiln.step", 0, T>();  // t: 1 for the first update
};

// The training step of `loss` over the parameters in `params` (a tuple of kiln::param
// symbols of element type T): outputs(loss, gradient norm, the assignments of every moment
// and parameter).
template <class T, Expression Loss, class... Ws>
constexpr auto training_step(Loss loss, std::tuple<Ws...> params, double beta1 = 0.9, double beta2 = 0.999,
                             double eps = 1e-8) {
  static_assert(Loss::rank == 0, "kiln::Trainer: the model's loss must be a scalar (rank 0), e.g. a mean over the batch");
  static_assert(sizeof...(Ws) > 0, "kiln::Trainer: the model has no parameters to train");
  static_assert(((Ws::kind == NodeKind::Symbol && Ws::symbol_kind == SymbolKind::Param) && ...),
                "kiln::Trainer: the model's parameters() must be kiln::param symbols");
  static_assert((std::is_same_v<typename Ws::dtype, T> && ...),
                "kiln::Trainer: every parameter must have the model's element type");
  using S = StepSymbols<T>;
  const auto grads = std::apply([&](auto... w) { return grad(loss, w...); }, params);
  const auto norm = share<fnv1a("kiln.train.grad_norm")>(
      sqrt(std::apply([](const auto&... g) { return (sum(square(g)) + ...); }, grads)));
  const auto clip = share<fnv1a("kiln.train.clip")>(minimum(S::max_grad_norm / (norm + 1e-6), 1.0));
  const auto updates = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple_cat(nn::adamw(std::get<I>(params), exp_avg(std::get<I>(params)), exp_avg_sq(std::get<I>(params)),
                                    std::get<I>(grads) * clip, S::step, S::lr, beta1, beta2, eps, S::weight_decay)...);
  }(std::index_sequence_for<Ws...>{});
  return std::apply([&](const auto&... u) { return outputs(loss, norm, u...); }, updates);
}

}  // namespace kiln::train
