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
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "kiln/autodiff/grad.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/expr/substitute.hpp"
#include "kiln/nn/optim.hpp"
#include "kiln/runtime/compile.hpp"

namespace kiln::train {

// AdamW's first and second moments of parameter w (kiln::param<"exp_avg.<name>">).
template <class W>
constexpr auto exp_avg(W w) {
  return prefixed<"exp_avg.">(w);
}
template <class W>
constexpr auto exp_avg_sq(W w) {
  return prefixed<"exp_avg_sq.">(w);
}

// The step's run-time hyper-parameters, in the parameters' element type T.
template <class T>
struct StepSymbols {
  static constexpr auto lr = input<"kiln.lr", 0, T>();
  static constexpr auto weight_decay = input<"kiln.weight_decay", 0, T>();
  static constexpr auto max_grad_norm = input<"kiln.max_grad_norm", 0, T>();
  static constexpr auto step = input<"kiln.step", 0, T>();  // t: 1 for the first update
};

namespace detail {
// f called with a tuple of bindings.
template <class F, class Bindings>
auto call_with(F& f, const Bindings& b) {
  return std::apply([&](const auto&... x) { return f(x...); }, b);
}
// Tensors by name (a model's parameters, their moments, their gradients).
template <class T>
using Named = std::map<std::string, Tensor<T>>;
// Bindings of the symbols in `ws` (a tuple) to the tensors named prefix + their names.
template <class T, class Ws>
auto bind_named(const Ws& ws, Named<T>& tensors, const std::string& prefix = "") {
  return std::apply([&](auto... w) { return std::tuple{(w = tensors.at(prefix + std::string(w.name())))...}; }, ws);
}
}  // namespace detail

// The step's hyper-parameters as the trainer holds them: rank-0 tensors on its device, and the
// clipping bound as a number as well (+inf: no clipping).
template <class T>
struct Hyper {
  Tensor<T> lr, weight_decay, max_grad_norm, step;
  double max_grad_norm_value = 0;
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

// A model whose loss() is one expression over its parameters(), its step compiled as one
// program: forward, backward, clipping and AdamW (kiln::Trainer's engine for such a model; a
// stack of layers has train/stacked.hpp's).
template <class Model, class... Policies>
class OneProgramStep {
 public:
  using T = typename Model::element;
  using Named = detail::Named<T>;

  // Every parameter, with its name.
  template <class F>
  static void for_each_parameter(F&& f) {
    std::apply([&](auto... w) { (f(w, std::string(w.name())), ...); }, Model::parameters());
  }
  std::string explain() const { return step_.explain(); }
  void profile(bool on) { step_.profile(on), eval_.profile(on); }

  template <class Batch>
  double loss(const Batch& batch, Named& params) {
    const Tensor<T> l = detail::call_with(eval_, std::tuple_cat(batch, detail::bind_named<T>(Model::parameters(), params)));
    return static_cast<double>(widen(l.cpu()[0]));
  }
  template <class Batch>
  std::pair<double, double> step(const Batch& batch, Named& params, Named& moments, const Hyper<T>& hyper) {
    using S = StepSymbols<T>;
    const auto hp = std::tuple{S::lr = hyper.lr, S::weight_decay = hyper.weight_decay,
                               S::max_grad_norm = hyper.max_grad_norm, S::step = hyper.step};
    const auto [loss, norm] = detail::call_with(step_, std::tuple_cat(batch, detail::bind_named<T>(Model::parameters(), params), moment_bindings(moments), hp));
    return {static_cast<double>(widen(loss.cpu()[0])), static_cast<double>(widen(norm.cpu()[0]))};
  }

 private:
  static auto moment_bindings(Named& moments) {
    return std::apply(
        [&](auto... w) {
          return std::tuple{(exp_avg(w) = moments.at(std::string(exp_avg(w).name())))...,
                            (exp_avg_sq(w) = moments.at(std::string(exp_avg_sq(w).name())))...};
        },
        Model::parameters());
  }
  using Step = decltype(compile<Policies...>(training_step<T>(Model::loss(), Model::parameters())));
  using Eval = decltype(compile<Policies...>(Model::loss()));
  Step step_ = compile<Policies...>(training_step<T>(Model::loss(), Model::parameters()));
  Eval eval_ = compile<Policies...>(Model::loss());
};

}  // namespace kiln::train
