// kiln: the training step of a stack of identical layers, compiled one region at a time (what
// PyTorch calls regional compilation): the layer's forward and its vector-Jacobian product are
// each compiled once and run for every layer with that layer's weights, so the compile time and
// the program sizes do not grow with the depth. kiln::Trainer takes this path for a model that
// declares its layers (train::StackedModel); a model with one loss() expression is compiled as
// one program (train/step.hpp).
//
// A stacked model, over a residual stream h (a kiln::input, e.g. [batch, seq, hidden]):
//   embed()       h_0 from the batch's inputs and the embedding weights
//   layer()       h_{l+1} from h_l (the symbol `residual`) and layer l's weights, whose names
//                 are layer_prefix(l) + the names in layer_parameters()
//   head_loss()   the scalar loss from h_L (`residual`), the head's weights and the batch
// A weight of embed() may appear in head_loss() as well (tied embeddings): it is one parameter
// and its gradient is the sum of both.
//
// One step:
//   forward:   h_0 = embed(batch);  h_{l+1} = layer(h_l; w_l)   (h_0 ... h_L kept)
//   backward:  loss, g_L, dhead = the head's gradients at h_L
//              g_l, dw_l = vjp of layer(h_l; w_l) with g_{l+1}   (reading the activations the
//                                                                  forward pass kept)
//              dembed = vjp of embed with g_0
//   update:    norm = sqrt(sum of every gradient squared); c = min(max_grad_norm / (norm + 1e-6), 1)
//              AdamW(p, m_p, v_p, c g_p) for every parameter p
// which is train/step.hpp's update, computed region by region.
//
// Kept activations: the layer's kiln::shared values (its norms' outputs, q k v, the attention's
// output, ...) that its vector-Jacobian product reads are outputs of the forward program beside
// h_{l+1}, and inputs of the vjp program, which therefore computes none of them again. What is
// not shared (a matmul feeding an activation) the vjp recomputes from them.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/autodiff/grad.hpp"
#include "kiln/distributed/buckets.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/expr/substitute.hpp"
#include "kiln/nn/optim.hpp"
#include "kiln/runtime/compile.hpp"
#include "kiln/runtime/large_stack.hpp"
#include "kiln/train/step.hpp"

namespace kiln::train {

template <class M>
concept StackedModel = requires(int l) {
  typename M::element;
  { M::layers } -> std::convertible_to<int>;
  M::residual;
  M::embed();
  M::layer();
  M::head_loss();
  M::embed_parameters();
  M::layer_parameters();
  M::head_parameters();
  { M::layer_prefix(l) } -> std::convertible_to<std::string>;
};

namespace detail {
// A call's outputs as a tuple (a program of one output returns its tensor).
template <class R>
auto as_tuple(R&& r) {
  if constexpr (requires { std::tuple_size<std::remove_cvref_t<R>>::value; }) return std::forward<R>(r);
  else return std::tuple<std::remove_cvref_t<R>>{std::forward<R>(r)};
}

}  // namespace detail

template <StackedModel M, class... Policies>
class StackedStep {
 public:
  using T = typename M::element;  // the parameters'
  using Named = detail::Named<T>;
  static constexpr auto h = M::residual;
  using H = typename decltype(M::residual)::dtype;  // the activations' (T, or bf16 in mixed precision)
  using Embed = decltype(M::embed());
  using Head = decltype(M::head_loss());
  using L = typename Head::dtype;  // the loss's
  static constexpr auto cotangent = input<"kiln.cotangent", decltype(M::residual)::rank, H>();

  // Every parameter's name, with its rank: the embedding's and head's (once each) and every layer's.
  template <class F>
  static void for_each_parameter(F&& f) {
    std::vector<std::string> seen;
    const auto once = [&](auto w, const std::string& name) {
      for (const auto& s : seen)
        if (s == name) return;
      seen.push_back(name);
      f(w, name);
    };
    std::apply([&](auto... w) { (once(w, std::string(w.name())), ...); }, M::embed_parameters());
    for (int l = 0; l < M::layers; ++l)
      std::apply([&](auto... w) { (once(w, M::layer_prefix(l) + std::string(w.name())), ...); }, M::layer_parameters());
    std::apply([&](auto... w) { (once(w, std::string(w.name())), ...); }, M::head_parameters());
  }

  // The compiled programs' plans.
  std::string explain() const {
    return "embedding:\n" + embed_.explain() + "\nlayer:\n" + layer_.explain() + "\nhead (loss and gradients):\n" +
           head_->explain() + "\nlayer (vector-Jacobian product):\n" + layer_backward_->explain() +
           "\nembedding (vector-Jacobian product):\n" + embed_backward_->explain();
  }

  // Plans the programs dropped (Compiled::plans_dropped): a CUDA graph of the whole step bakes in
  // their arenas and is valid while this count stays.
  long plans_dropped() const {
    return embed_.plans_dropped() + layer_.plans_dropped() + loss_.plans_dropped() + head_->plans_dropped() +
           layer_backward_->plans_dropped() + embed_backward_->plans_dropped() + update_.plans_dropped();
  }

  // Per-kernel timing of every program (kiln::compile's profile()): explain() then shows each
  // kernel's mean time per call.
  void profile(bool on = true) {
    embed_.profile(on), layer_.profile(on), loss_.profile(on), head_->profile(on), layer_backward_->profile(on),
        embed_backward_->profile(on);
  }

  // The mean loss of a batch (`batch`: a tuple of bindings of the model's inputs), no update.
  template <class Batch>
  double loss(const Batch& batch, Named& params) {
    const Tensor<L> loss = detail::call_with(
        loss_, std::tuple_cat(detail::bindings_for<Head>(batch), std::tuple{h = forward(batch, params, nullptr).back()},
                              detail::bind_named<T>(M::head_parameters(), params)));
    return static_cast<double>(widen(loss.cpu()[0]));
  }

  // The model's head_predictions() of a batch (an expression of `residual`, the head's
  // parameters and the batch: its logits, say), and its loss, from one program. It is compiled at
  // the first call, so a model without head_predictions() compiles while predict() is not called.
  template <class Batch>
  auto predict(const Batch& batch, Named& params) {
    static_assert(requires { M::head_predictions(); },
                  "kiln::Trainer::predict: the model declares no head_predictions(), the expression of the last "
                  "layer's output whose value predict() returns (its logits, say): add static auto head_predictions()");
    const auto both = [] { return outputs(M::head_predictions(), M::head_loss()); };
    auto& program = lazy_program<decltype(compile<Policies...>(both()))>(predict_, [&] { return compile<Policies...>(both()); });
    auto [p, l] = detail::call_with(
        program, std::tuple_cat(detail::bindings_for<Head>(batch), std::tuple{h = forward(batch, params, nullptr).back()},
                                detail::bind_named<T>(M::head_parameters(), params)));
    return std::pair{std::move(p), static_cast<double>(widen(l.cpu()[0]))};
  }

  // One update of params and moments (exp_avg.<name>, exp_avg_sq.<name>) from a batch, with the
  // run-time hyper-parameters of train/step.hpp. Returns the loss and the gradient norm before
  // clipping.
  //
  // Under a policy with CUDA graphs, on a CUDA device, the whole step (dozens of compiled calls:
  // every layer forward and backward, the update of each parameter) is one CUDA graph
  // (cuda::PooledGraph): run, captured, then replayed with one launch per step. The graph reads
  // the batch's tensors, the parameters, the moments and the hyper-parameters' block where they
  // live, so those addresses are its key: a caller keeps them put from step to step (the
  // Trainer's static batch tensors) and replays one graph per batch shape.
  //
  // Data-parallel (`reducer`, which needs use_flat): each bucket of gradients is summed over the
  // ranks as soon as the backward has finished it (distributed/buckets.hpp), inside the graph
  // where there is one; the communicator's synchronize() follows the step, before the loss is read.
  template <class Batch>
  std::pair<double, double> step(const Batch& batch, Named& params, Named& moments, Hyper<T>& hyper,
                                 distributed::Reducer<T>* reducer = nullptr) {
    Tensor<L> loss;
    Tensor<T> norm;
#if KILN_WITH_CUDA
    if (kStepGraph && hyper.lr.device().is_cuda()) {
      std::vector<const void*> key;
      for (const auto* named : {&params, &moments})
        for (const auto& [name, t] : *named) key.push_back(t.data());
      key.push_back(hyper.lr.data());
      std::apply([&](const auto&... b) { (key.push_back(b.tensor->data()), ...); }, batch);
      step_graph_.run(key, plans_dropped(),
                      [&] { std::tie(step_loss_, step_norm_) = step_on_device(batch, params, moments, hyper, reducer); });
      loss = step_loss_, norm = step_norm_;
    } else
#endif
      std::tie(loss, norm) = step_on_device(batch, params, moments, hyper, reducer);
    if (reducer) reducer->communicator().synchronize();
    return {static_cast<double>(widen(loss.cpu()[0])), static_cast<double>(widen(norm.cpu()[0]))};
  }
#if KILN_WITH_CUDA
  // The step's CUDA graphs (step() under a policy with graphs, on a CUDA device): how many were
  // captured, and how many steps replayed one.
  long graph_captures() const { return step_graph_.captures(); }
  long graph_replays() const { return step_graph_.replays(); }
#endif
  // step(), the loss and the norm left on the device: every kernel of the step is enqueued on
  // kiln's stream and nothing synchronises, so the whole step can be one CUDA graph.
  template <class Batch>
  std::pair<Tensor<L>, Tensor<T>> step_on_device(const Batch& batch, Named& params, Named& moments, Hyper<T>& hyper,
                                                 distributed::Reducer<T>* reducer = nullptr) {
    Named grads;
    Tensor<L> loss = accumulate_on_device(batch, params, grads, reducer);
    if (reducer) reducer->finish();
    return {std::move(loss), update_.apply_on_device([](auto&& f) { for_each_parameter(f); }, grads, params, moments, hyper, flat_.get())};
  }

  // Adds a batch's gradients to grads (by parameter name) and returns its loss: the forward,
  // then the backward region by region. With a reducer (the last batch of an update in a
  // data-parallel run), each gradient is marked ready once its last contribution is in, and the
  // reducer sums the buckets so completed; the caller then calls its finish().
  template <class Batch>
  double accumulate(const Batch& batch, Named& params, Named& grads, distributed::Reducer<T>* reducer = nullptr) {
    Tensor<L> loss = accumulate_on_device(batch, params, grads, reducer);
    if (reducer) reducer->finish(), reducer->communicator().synchronize();
    return static_cast<double>(widen(loss.cpu()[0]));
  }
  template <class Batch>
  Tensor<L> accumulate_on_device(const Batch& batch, Named& params, Named& grads, distributed::Reducer<T>* reducer = nullptr) {
    if (reducer) {
      if (!flat_) throw ValueError("kiln::train::StackedStep: a reducer sums the flat gradient buffer; call use_flat first");
      Tensor<T> grads_buffer = flat_->whole(FlatState<T>::kGrad);
      reducer->start(grads_buffer.data(), grads_buffer.device());
      left_ = contributions();
    }
    reducer_ = reducer;
    std::vector<SavedTensors> saved;
    const std::vector<Tensor<H>> xs = forward(batch, params, &saved);  // each layer's input, and the last output
    // An output the programs write into (with a flat state; otherwise they return their own).
    const auto slot = [&]<class U>(std::type_identity<U>, const Shape& shape) {
      return flat_ ? Tensor<U>(shape, xs.back().device()) : Tensor<U>();
    };
    Tensor<H> g = slot(std::type_identity<H>{}, xs.back().shape());
    Tensor<L> loss = slot(std::type_identity<L>{}, Shape{});
    run_collecting(*head_, std::tuple_cat(detail::bindings_for<Head>(batch), std::tuple{h = xs.back()},
                                          detail::bind_named<T>(M::head_parameters(), params)),
                   M::head_parameters(), "", grads, loss, g);
    for (int l = M::layers - 1; l >= 0; --l) {
      const std::string prefix = M::layer_prefix(l);
      Tensor<H> next = slot(std::type_identity<H>{}, xs[static_cast<std::size_t>(l)].shape());
      run_collecting(*layer_backward_,
                     std::tuple_cat(std::tuple{h = xs[static_cast<std::size_t>(l)], cotangent = g}, Saved::bind(saved[static_cast<std::size_t>(l)]),
                                    detail::bind_named<T>(M::layer_parameters(), params, prefix)),
                     M::layer_parameters(), prefix, grads, next);
      g = std::move(next);
    }
    run_collecting(*embed_backward_,
                   std::tuple_cat(detail::bindings_for<Embed>(batch), std::tuple{cotangent = g}, detail::bind_named<T>(M::embed_parameters(), params)),
                   M::embed_parameters(), "", grads);
    reducer_ = nullptr;
    return loss;
  }

  // Keeps the gradients in `flat`'s gradient buffer (train/flat.hpp), which holds a part for
  // every parameter: each program writes a parameter's first gradient of an update there, and
  // update() then runs the norm and AdamW once over the whole buffers when the parameters and
  // moments it is given are flat's views too.
  void use_flat(std::shared_ptr<FlatState<T>> flat) {
    for_each_parameter([&](auto, const std::string& name) {
      if (!flat->has(name)) throw ValueError("kiln::train::StackedStep::use_flat: the flat state has no part \"" + name + "\"");
    });
    flat_ = std::move(flat);
  }

  // The global norm, the clipping factor, and AdamW on every parameter, with the gradients grads
  // times hyper.grad_scale. Returns the gradient norm before clipping.
  double update(Named& grads, Named& params, Named& moments, Hyper<T>& hyper) {
    return update_.apply([](auto&& f) { for_each_parameter(f); }, grads, params, moments, hyper, flat_.get());
  }
  // How many updates ran once over the flat state's whole buffers (use_flat) rather than
  // parameter by parameter.
  long whole_buffer_updates() const { return update_.whole_buffer_updates(); }

 private:
  // How many programs of a step write a gradient of each parameter: 1, or 2 for a weight of both
  // the embedding and the head (tied).
  static std::map<std::string, int> contributions() {
    std::map<std::string, int> n;
    std::apply([&](auto... w) { (++n[std::string(w.name())], ...); }, M::head_parameters());
    for (int l = 0; l < M::layers; ++l)
      std::apply([&](auto... w) { (++n[M::layer_prefix(l) + std::string(w.name())], ...); }, M::layer_parameters());
    std::apply([&](auto... w) { (++n[std::string(w.name())], ...); }, M::embed_parameters());
    return n;
  }
  // After a program wrote its gradients: those of their last contribution go to the reducer.
  void finished(const std::string& name) {
    if (reducer_ && --left_.at(name) == 0) reducer_->ready(name);
  }

  // Runs `program` with the bindings b (a tuple). Its outputs are `lead` (tensors of the right
  // shapes, which the call fills: the loss, the residual's gradient), then the gradients of the
  // parameters ws (a tuple), named prefix + their names, which are added to grads. With a flat
  // state, a parameter's first gradient of the update is written into the state's part for it and
  // a later one (a tied weight's second use, the next batch of an accumulation) into a temporary,
  // then added in place; without one, the program's outputs are taken as they come.
  template <class Program, class Bindings, class Ws, class... Lead>
  void run_collecting(Program& program, const Bindings& b, const Ws& ws, const std::string& prefix, Named& grads, Tensor<Lead>&... lead) {
    constexpr std::size_t N = std::tuple_size_v<Ws>;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      const std::array<std::string, N> names{(prefix + std::string(std::get<I>(ws).name()))...};
      if (!flat_) {
        auto out = detail::as_tuple(detail::call_with(program, b));
        [&]<std::size_t... J>(std::index_sequence<J...>) { ((lead = std::move(std::get<J>(out))), ...); }(std::index_sequence_for<Lead...>{});
        update_.template collect<sizeof...(Lead)>(out, ws, prefix, grads);
        (finished(names[I]), ...);
        return;
      }
      std::array<bool, N> first{};
      std::array<Tensor<T>, N> dst;
      for (std::size_t i = 0; i < N; ++i) {
        first[i] = grads.count(names[i]) == 0;
        Tensor<T> part = flat_->view(FlatState<T>::kGrad, names[i]);
        dst[i] = first[i] ? std::move(part) : Tensor<T>(part.shape(), part.device());
      }
      std::apply([&](const auto&... x) { program.into(std::tie(lead..., dst[I]...), x...); }, b);
      (([&] {
         if (first[I]) grads.emplace(names[I], std::move(dst[I]));  // the view itself (a copy would be a deep one)
         else update_.add(grads, names[I], std::move(dst[I]), std::get<I>(ws));
         finished(names[I]);
       }()), ...);
    }(std::make_index_sequence<N>{});
  }

  // The layer's shared values, each read back by the vjp program as input "kiln.saved.<i>.v".
  using Shared = decltype(shared_values(M::layer()));
  static constexpr auto saved_inputs = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple{prefixed<numbered<"kiln.saved.", I>()>(
        input<"v", std::tuple_element_t<I, Shared>::rank, typename std::tuple_element_t<I, Shared>::dtype>())...};
  }(std::make_index_sequence<std::tuple_size_v<Shared>>{});
  // The layer's vector-Jacobian product (the gradients of h and of the layer's weights), reading
  // the shared values as those inputs.
  static auto layer_vjp_grads() {
    return std::apply(
        [](auto... w) {
          return std::apply([](const auto&... g) { return std::tuple{replace_shared<Shared>(g, saved_inputs)...}; },
                            vjp(M::layer(), cotangent, h, w...));
        },
        M::layer_parameters());
  }
  using LayerGrads = decltype(layer_vjp_grads());
  // The shared values the vjp reads: those the forward program outputs.
  static constexpr auto saved_read = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<bool, sizeof...(I) + 1>{[]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      using X = std::remove_cvref_t<decltype(std::get<J>(saved_inputs))>;
      return [&]<std::size_t... G>(std::index_sequence<G...>) {
        return (autodiff::depends_on<std::tuple_element_t<G, LayerGrads>, X::id>::value || ...);
      }(std::make_index_sequence<std::tuple_size_v<LayerGrads>>{});
    }(std::integral_constant<std::size_t, I>{})..., false};
  }(std::make_index_sequence<std::tuple_size_v<Shared>>{});
  static constexpr std::size_t saved_count = [] {
    std::size_t n = 0;
    for (bool b : saved_read) n += b;
    return n;
  }();
  static constexpr auto saved_index = [] {
    std::array<std::size_t, saved_count + 1> r{};
    std::size_t j = 0;
    for (std::size_t i = 0; i + 1 < saved_read.size(); ++i)
      if (saved_read[i]) r[j++] = i;
    return r;
  }();
  template <class J>
  struct SavedOf;
  template <std::size_t... J>
  struct SavedOf<std::index_sequence<J...>> {
    using Tensors = std::tuple<Tensor<typename std::tuple_element_t<saved_index[J], Shared>::dtype>...>;
    // h_{l+1} and the kept values.
    static auto forward() {
      [[maybe_unused]] const auto shared = shared_values(M::layer());
      return outputs(M::layer(), std::get<saved_index[J]>(shared)...);
    }
    template <class Out>
    static Tensors take(Out& out) {
      return Tensors{std::move(std::get<1 + J>(out))...};
    }
    static auto bind(const Tensors& t) { return std::tuple{(std::get<saved_index[J]>(saved_inputs) = std::get<J>(t))...}; }
  };
  using Saved = SavedOf<std::make_index_sequence<saved_count>>;
  using SavedTensors = typename Saved::Tensors;

  // h_0 = embed(batch), then h_{l+1} = layer(h_l; w_l): the input of each layer and the last
  // output; each layer's kept values into *saved (when given).
  template <class Batch>
  std::vector<Tensor<H>> forward(const Batch& batch, Named& params, std::vector<SavedTensors>* saved) {
    std::vector<Tensor<H>> xs;
    xs.push_back(detail::call_with(
        embed_, std::tuple_cat(detail::bindings_for<Embed>(batch), detail::bind_named<T>(M::embed_parameters(), params))));
    for (int l = 0; l < M::layers; ++l) {
      auto out = detail::call_with(
          layer_, std::tuple_cat(std::tuple{h = xs.back()},
                                 detail::bind_named<T>(M::layer_parameters(), params, M::layer_prefix(l))));
      xs.push_back(std::move(std::get<0>(out)));
      if (saved) saved->push_back(Saved::take(out));
    }
    return xs;
  }
  ParameterUpdate<T,
                  std::tuple<decltype(M::embed_parameters()), decltype(M::layer_parameters()), decltype(M::head_parameters())>,
                  Policies...>
      update_;
  std::shared_ptr<void> predict_;  // the predictions' program, once predict() has run
  std::shared_ptr<FlatState<T>> flat_;  // where the gradients go (use_flat), or none
  distributed::Reducer<T>* reducer_ = nullptr;  // during a data-parallel backward
  std::map<std::string, int> left_;             // its contributions still to come, by parameter

  template <class Ws>
  static auto head_program(const Ws& ws) {
    const auto loss = M::head_loss();
    return std::apply([&](auto... w) { return std::apply([&](const auto&... g) { return outputs(loss, g...); },
                                                         grad(loss, h, w...)); },
                      ws);
  }
  template <class Y, class Ws>
  static auto vjp_program(const Y& y, const Ws& ws) {
    return std::apply([&](auto... w) { return std::apply([](const auto&... g) { return outputs(g...); },
                                                         vjp(y, cotangent, w...)); },
                      ws);
  }
  static auto layer_vjp() {
    return std::apply([](const auto&... g) { return outputs(g...); }, layer_vjp_grads());
  }

  static constexpr bool kStepGraph = runtime::Policy<Policies...>::persistent;
#if KILN_WITH_CUDA
  cuda::PooledGraph step_graph_;
  Tensor<L> step_loss_;  // where the step's graph writes the loss and the gradient norm
  Tensor<T> step_norm_;
#endif
  using HeadProgram = decltype(compile<Policies...>(head_program(M::head_parameters())));
  using LayerBackward = decltype(compile<Policies...>(layer_vjp()));
  using EmbedBackward = decltype(compile<Policies...>(vjp_program(M::embed(), M::embed_parameters())));
  decltype(compile<Policies...>(M::embed())) embed_ = compile<Policies...>(M::embed());
  decltype(compile<Policies...>(Saved::forward())) layer_ = compile<Policies...>(Saved::forward());
  decltype(compile<Policies...>(M::head_loss())) loss_ = compile<Policies...>(M::head_loss());
  // The derivative programs, built on a thread of a large stack (kiln::detail::on_large_stack).
  std::unique_ptr<HeadProgram> head_;
  std::unique_ptr<LayerBackward> layer_backward_;
  std::unique_ptr<EmbedBackward> embed_backward_;
  int built_ = [this] {
    kiln::detail::on_large_stack([this] {
      head_.reset(new HeadProgram(compile<Policies...>(head_program(M::head_parameters()))));
      layer_backward_.reset(new LayerBackward(compile<Policies...>(layer_vjp())));
      embed_backward_.reset(new EmbedBackward(compile<Policies...>(vjp_program(M::embed(), M::embed_parameters()))));
    });
    return 0;
  }();
};

}  // namespace kiln::train
