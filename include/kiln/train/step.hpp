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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/autodiff/grad.hpp"
#include "kiln/distributed/buckets.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/expr/substitute.hpp"
#include "kiln/nn/optim.hpp"
#include "kiln/runtime/compile.hpp"
#include "kiln/train/flat.hpp"

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
// The bindings of `batch` (a tuple) of the symbols that expression E reads.
template <class E, class Batch>
auto bindings_for(const Batch& batch) {
  return std::apply(
      [](const auto&... b) {
        return std::tuple_cat([&] {
          using B = std::remove_cvref_t<decltype(b)>;
          if constexpr (autodiff::depends_on<E, B::id>::value) return std::tuple<B>{b};
          else return std::tuple<>{};
        }()...);
      },
      batch);
}
}  // namespace detail

// A compiled program of type P held in `slot`, made by make() at the first call: for programs
// that only some uses of an engine need, so that they are instantiated only where used.
template <class P, class Make>
P& lazy_program(std::shared_ptr<void>& slot, Make&& make) {
  if (!slot) slot = std::make_shared<P>(make());
  return *static_cast<P*>(slot.get());
}

// The step's hyper-parameters as the trainer holds them: rank-0 tensors on its device, views of
// one block that set() writes with one copy per step (on a GPU each copy from the host waits for
// the device, so one copy rather than six), and the clipping bound as a number as well (+inf: no
// clipping).
template <class T>
class Hyper {
 public:
  explicit Hyper(Device device = Device::cpu()) : block_(zeros<T>(Shape{kCount}, device)) {
    Tensor<T>* views[kCount] = {&lr, &weight_decay, &max_grad_norm, &step, &grad_scale, &norm2};
    for (std::size_t i = 0; i < kCount; ++i) *views[i] = Tensor<T>::view(block_.data() + i, Shape{}, device);
  }
  // Moving keeps the views valid (they point into block_'s memory, which moves with it); a copy
  // would copy the views' values but not their sharing of one block.
  Hyper(Hyper&&) = default;
  Hyper& operator=(Hyper&&) = default;
  Hyper(const Hyper&) = delete;
  Hyper& operator=(const Hyper&) = delete;

  Tensor<T> lr, weight_decay, max_grad_norm, step;
  Tensor<T> grad_scale;  // the factor of the summed gradients (1 / the batches accumulated)
  Tensor<T> norm2;       // the sum of the squared gradients, accumulated on the device
  double max_grad_norm_value = std::numeric_limits<double>::infinity();
  double weight_decay_value = 0;

  // Every value for the next update, and norm2 at 0.
  void set(double lr_value, double step_value, double scale) {
    const double v[kCount] = {lr_value, weight_decay_value, max_grad_norm_value, step_value, scale, 0.0};
    std::vector<T> host(kCount);
    for (std::size_t i = 0; i < kCount; ++i) host[i] = kiln::detail::element_from<T>(v[i]);
    block_.copy_from(from_vector(host, Shape{kCount}));
  }

 private:
  static constexpr std::size_t kCount = 6;
  Tensor<T> block_;
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

// The update of training_step computed parameter by parameter, for engines whose gradients come
// apart from it (a stack of layers, micro-batches of gradient accumulation): sums of gradients
// by name, then with g_p = scale * (the sum for p)
//   norm = sqrt(sum_p sum(g_p^2)),  c = min(max_grad_norm / (norm + 1e-6), 1),
//   AdamW(p, m_p, v_p, c g_p)
// each a small program per parameter rank, the norm summed on the device (norm2 += sum(g^2) per
// parameter) and read back once; or, where parameters, moments and gradients all live in a
// FlatState (train/flat.hpp), the same two programs run once each over its whole buffers. The
// sum is kept in T, the weights' type: float for a bf16 or
// f16 model, which kiln::Trainer trains on float master weights (train/mixed.hpp). Ps: the
// tuples of kiln::param symbols to update.
template <class T, class Ps, class... Policies>
class ParameterUpdate {
 public:
  using Named = detail::Named<T>;

  // grads[name] += g, in place (the first gradient of a name is taken as it is). W: the
  // parameter symbol.
  template <class W>
  void add(Named& grads, const std::string& name, Tensor<T>&& g, W) {
    const auto it = grads.find(name);
    if (it == grads.end()) {
      grads.emplace(name, std::move(g));
      return;
    }
    auto& a = std::get<W::rank>(per_rank_).add;
    a.program(a.x = it->second, a.y = g);
  }

  // add() of the gradients in outputs First.. of `out`, by the names of the symbols ws (a
  // tuple) with prefix.
  template <std::size_t First, class Out, class Ws>
  void collect(Out& out, const Ws& ws, const std::string& prefix, Named& grads) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (add(grads, prefix + std::string(std::get<I>(ws).name()), std::move(std::get<First + I>(out)), std::get<I>(ws)), ...);
    }(std::make_index_sequence<std::tuple_size_v<Ws>>{});
  }

  // Updates every parameter that for_each (Engine::for_each_parameter's signature) names, with
  // the gradients grads scaled by hyper.grad_scale (Hyper::set has run for this update). The
  // norm and the clipping factor are computed on the device; the norm is read back once and
  // returned (before clipping). Where `flat` holds every parameter, moment and gradient
  // (train/flat.hpp), the norm and AdamW each run once over its whole buffers.
  template <class ForEach>
  double apply(ForEach&& for_each, Named& grads, Named& params, Named& moments, Hyper<T>& hyper, FlatState<T>* flat = nullptr) {
    return static_cast<double>(widen(apply_on_device(for_each, grads, params, moments, hyper, flat).cpu()[0]));
  }
  // apply(), the norm left on the device (nothing synchronises: a CUDA graph can hold it).
  template <class ForEach>
  Tensor<T> apply_on_device(ForEach&& for_each, Named& grads, Named& params, Named& moments, Hyper<T>& hyper,
                            FlatState<T>* flat = nullptr) {
    using F = FlatState<T>;
    using S = StepSymbols<T>;
    const bool whole = flat && grads.size() == flat->parts() && flat->holds(F::kGrad, grads) && flat->holds(F::kParam, params) &&
                       flat->holds(F::kExpAvg, moments, "exp_avg.") && flat->holds(F::kExpAvgSq, moments, "exp_avg_sq.");
    // AdamW of parameter p with moments m and v and gradient g, by u's program.
    const auto adamw = [&](auto& u, auto&& p, auto&& m, auto&& v, auto&& g, const Tensor<T>& factor) {
      using U = std::remove_reference_t<decltype(u)>;
      u.adamw(U::p = p, exp_avg(U::p) = m, exp_avg_sq(U::p) = v, U::g = g, U::clip = factor, S::lr = hyper.lr,
              S::weight_decay = hyper.weight_decay, S::step = hyper.step);
    };
    if (whole) {
      ++whole_buffer_updates_;
      flat_.add_squares(Flat::norm2 = hyper.norm2, Flat::g = flat->whole(F::kGrad));
    } else {
      for_each([&](auto w, const std::string& name) {
        auto& u = std::get<decltype(w)::rank>(per_rank_).update;
        using U = std::remove_reference_t<decltype(u)>;
        u.add_squares(U::norm2 = hyper.norm2, U::g = grads.at(name));
      });
    }
    const auto [norm, factor] = clip_(Clip::norm2 = hyper.norm2, Clip::scale = hyper.grad_scale, S::max_grad_norm = hyper.max_grad_norm);
    if (whole) {
      adamw(flat_, flat->whole(F::kParam), flat->whole(F::kExpAvg), flat->whole(F::kExpAvgSq), flat->whole(F::kGrad), factor);
    } else {
      for_each([&](auto w, const std::string& name) {
        adamw(std::get<decltype(w)::rank>(per_rank_).update, params.at(name), moments.at("exp_avg." + name),
              moments.at("exp_avg_sq." + name), grads.at(name), factor);
      });
    }
    return norm;
  }

  // How many updates ran over FlatState's whole buffers.
  long whole_buffer_updates() const { return whole_buffer_updates_; }

  // Plans its programs dropped (Compiled::plans_dropped).
  long plans_dropped() const {
    long n = clip_.plans_dropped() + flat_.add_squares.plans_dropped() + flat_.adamw.plans_dropped();
    std::apply([&](const auto&... r) {
      ((n += [&] {
          if constexpr (requires { r.update; })
            return r.update.add_squares.plans_dropped() + r.update.adamw.plans_dropped() + r.add.program.plans_dropped();
          else return 0L;
        }()), ...);
    }, per_rank_);
    return n;
  }

 private:
  // Per rank R: a gradient's squares added to norm2, AdamW with the gradient scaled by the
  // clipping factor, and the sum of two gradients.
  template <int R>
  struct Programs {
    static constexpr auto g = input<"kiln.grad", R, T>();
    static constexpr auto p = param<"kiln.param", R, T>();
    static constexpr auto clip = input<"kiln.clip", 0, T>();
    static constexpr auto norm2 = param<"kiln.norm2", 0, T>();
    static auto adamw_update() {
      using S = StepSymbols<T>;
      return std::apply([](const auto&... a) { return outputs(a...); },
                        nn::adamw(p, exp_avg(p), exp_avg_sq(p), g * clip, S::step, S::lr, 0.9, 0.999, 1e-8, S::weight_decay));
    }
    // norm2 += sum(g^2), in place.
    static auto squares_added() { return outputs(assign(norm2, norm2 + sum(square(g)))); }
    decltype(compile<Policies...>(squares_added())) add_squares = compile<Policies...>(squares_added());
    decltype(compile<Policies...>(adamw_update())) adamw = compile<Policies...>(adamw_update());
  };
  // x += y, in place.
  template <int R>
  struct Adder {
    static constexpr auto x = param<"kiln.a", R, T>();
    static constexpr auto y = input<"kiln.b", R, T>();
    static auto added() { return outputs(assign(x, x + y)); }
    decltype(compile<Policies...>(added())) program = compile<Policies...>(added());
  };
  template <int R>
  struct PerRank {
    Programs<R> update;
    Adder<R> add;
  };
  // Programs only for the ranks some parameter has.
  template <int R>
  static constexpr bool has_rank = []<class... Tuples>(std::type_identity<std::tuple<Tuples...>>) {
    bool any = false;
    const auto check = [&]<class... Ws>(std::type_identity<std::tuple<Ws...>>) { ((any = any || Ws::rank == R), ...); };
    (check(std::type_identity<Tuples>{}), ...);
    return any;
  }(std::type_identity<Ps>{});
  template <class>
  struct AllRanks;
  template <int... R>
  struct AllRanks<std::integer_sequence<int, R...>> {
    using type = std::tuple<std::conditional_t<has_rank<R>, PerRank<R>, std::monostate>...>;
  };
  typename AllRanks<std::make_integer_sequence<int, kMaxRank + 1>>::type per_rank_;
  // The norm of the scaled gradients, sqrt(norm2) scale, and the factor of the summed gradients
  // in AdamW: min(max_grad_norm / (norm + 1e-6), 1) scale (train/step.hpp's clipping).
  struct Clip {
    static constexpr auto norm2 = input<"kiln.norm2", 0, T>();
    static constexpr auto scale = input<"kiln.grad_scale", 0, T>();
    static auto program() {
      const auto norm = share<fnv1a("kiln.train.scaled_norm")>(sqrt(norm2) * scale);
      return outputs(norm, minimum(StepSymbols<T>::max_grad_norm / (norm + 1e-6), 1.0) * scale);
    }
  };
  decltype(compile<Policies...>(Clip::program())) clip_ = compile<Policies...>(Clip::program());
  // The programs over FlatState's whole buffers (vectors).
  using Flat = Programs<1>;
  Flat flat_;
  long whole_buffer_updates_ = 0;
};

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
#if KILN_WITH_CUDA
  long graph_captures() const { return step_.graph_captures(); }
  long graph_replays() const { return step_.graph_replays(); }
#endif

  template <class Batch>
  double loss(const Batch& batch, Named& params) {
    const auto l = detail::call_with(eval_, std::tuple_cat(batch, detail::bind_named<T>(Model::parameters(), params)));
    return static_cast<double>(widen(l.cpu()[0]));
  }
  // One update. Data-parallel (`reducer`, which needs use_flat): the gradients' program, the sums
  // over the ranks, then the update (train/step.hpp's ParameterUpdate) instead of the one fused
  // program, since the sums come between the gradients and the update.
  template <class Batch>
  std::pair<double, double> step(const Batch& batch, Named& params, Named& moments, Hyper<T>& hyper,
                                 distributed::Reducer<T>* reducer = nullptr) {
    if (reducer) {
      Named grads;
      const double loss = accumulate(batch, params, grads, reducer);
      return {loss, update(grads, params, moments, hyper)};
    }
    using S = StepSymbols<T>;
    const auto hp = std::tuple{S::lr = hyper.lr, S::weight_decay = hyper.weight_decay,
                               S::max_grad_norm = hyper.max_grad_norm, S::step = hyper.step};
    const auto [loss, norm] = detail::call_with(step_, std::tuple_cat(batch, detail::bind_named<T>(Model::parameters(), params), moment_bindings(moments), hp));
    return {static_cast<double>(widen(loss.cpu()[0])), static_cast<double>(widen(norm.cpu()[0]))};
  }
  // Gradient accumulation: adds a batch's gradients to grads (by parameter name) and returns its
  // loss; update() then applies the step's update to their sum times hyper.grad_scale and
  // returns the gradient norm before clipping. With a flat state (use_flat) the sums are kept in
  // its gradient buffer, and update() runs over whole buffers; with a reducer too (the last
  // batch of an update in a data-parallel run) they are then summed over the ranks.
  template <class Batch>
  double accumulate(const Batch& batch, Named& params, Named& grads, distributed::Reducer<T>* reducer = nullptr) {
    if (reducer && !flat_) throw ValueError("kiln::train::OneProgramStep: a reducer sums the flat gradient buffer; call use_flat first");
    auto out = detail::call_with(gradients_, std::tuple_cat(batch, detail::bind_named<T>(Model::parameters(), params)));
    update_.template collect<1>(out, Model::parameters(), "", grads);
    if (flat_)
      for (auto& [name, g] : grads) {
        Tensor<T> part = flat_->view(FlatState<T>::kGrad, name);
        if (g.data() == part.data()) continue;
        part.copy_from(g);
        g = std::move(part);  // the entry becomes the view (a copy assignment would copy the values)
      }
    if (reducer) {
      Tensor<T> whole = flat_->whole(FlatState<T>::kGrad);
      reducer->start(whole.data(), whole.device());
      for (std::size_t i = flat_->parts(); i-- > 0;) reducer->ready(flat_->name(i));
      reducer->finish();
      reducer->communicator().synchronize();
    }
    return static_cast<double>(widen(std::get<0>(out).cpu()[0]));
  }
  double update(Named& grads, Named& params, Named& moments, Hyper<T>& hyper) {
    return update_.apply([](auto&& f) { for_each_parameter(f); }, grads, params, moments, hyper, flat_.get());
  }
  // Keeps accumulated gradients in `flat`'s gradient buffer (train/flat.hpp).
  void use_flat(std::shared_ptr<FlatState<T>> flat) {
    for_each_parameter([&](auto, const std::string& name) {
      if (!flat->has(name)) throw ValueError("kiln::train::OneProgramStep::use_flat: the flat state has no part \"" + name + "\"");
    });
    flat_ = std::move(flat);
  }
  // The model's predictions() of a batch, and its loss, from one program (one forward pass). The
  // program is compiled at the first call (so a model without predictions() compiles as long as
  // predict() is not called).
  template <class Batch>
  auto predict(const Batch& batch, Named& params) {
    static_assert(requires { Model::predictions(); },
                  "kiln::Trainer::predict: the model declares no predictions(), the expression whose value predict() "
                  "returns (its logits, say): add static auto predictions() to the model");
    const auto both = [] { return outputs(Model::predictions(), Model::loss()); };
    auto& program = lazy_program<decltype(compile<Policies...>(both()))>(predict_, [&] { return compile<Policies...>(both()); });
    auto [p, l] = detail::call_with(program, std::tuple_cat(batch, detail::bind_named<T>(Model::parameters(), params)));
    return std::pair{std::move(p), static_cast<double>(widen(l.cpu()[0]))};
  }

 private:
  static auto loss_and_gradients() {
    return std::apply([](auto... w) { return std::apply([](const auto&... g) { return outputs(Model::loss(), g...); },
                                                        grad(Model::loss(), w...)); },
                      Model::parameters());
  }
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
  decltype(compile<Policies...>(loss_and_gradients())) gradients_ = compile<Policies...>(loss_and_gradients());
  ParameterUpdate<T, std::tuple<decltype(Model::parameters())>, Policies...> update_;
  std::shared_ptr<FlatState<T>> flat_;  // where accumulated gradients are kept (use_flat), or none
  std::shared_ptr<void> predict_;  // the predictions' program, once predict() has run
};

}  // namespace kiln::train
