// kiln: mixed precision for kiln::Trainer. A model whose parameters are 16-bit (kiln::bf16,
// kiln::f16) computes in 16 bits but is trained on float master weights, as torch.autocast
// trains float parameters: every parameter w of element type T is read as cast<T>(w_master),
// w_master being the float parameter of w's name. So
//   - the forward and backward compute in T, as the model is written (each cast is at most
//     one convert kernel per program call that reads the weight);
//   - a gradient reaches the master through the cast's derivative, widened to float;
//   - the gradient norm, the clipping, AdamW's moments and the update are float, and updates
//     smaller than half a step of T accumulate in the master instead of rounding away;
//   - checkpoints hold the float masters, as Hugging Face's Trainer saves them.
// on_masters(e) is that rewriting of one expression; OnMasters<Model> applies it to every
// expression of a model (one loss() or a stack of layers), which the Trainer then trains as a
// float model. A float or double model is its own master: OnMasters is not used for it.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "kiln/expr/ops.hpp"
#include "kiln/expr/substitute.hpp"
#include "kiln/train/stacked.hpp"

namespace kiln::train {

// The element type of the master weights of parameters of element type T: float for bf16 and
// f16, T itself for float and double.
template <class T>
using master_t = compute_t<T>;
template <class T>
inline constexpr bool mixed_precision_v = !std::is_same_v<master_t<T>, T>;

// Symbol s with element type U; its name, and so its id and binding, kept.
template <class U, std::uint64_t Id, int R, class T, SymbolKind K, class N>
constexpr auto retyped(Symbol<Id, R, T, K, N>) {
  return Symbol<Id, R, U, K, N>{};
}
// The master weight of parameter w: the parameter of w's name and rank, in master_t.
template <class W>
constexpr auto master_of(W w) {
  return retyped<master_t<typename W::dtype>>(w);
}
template <class Ws>
constexpr auto masters_of(const Ws& ws) {
  return std::apply([](auto... w) { return std::tuple{master_of(w)...}; }, ws);
}
// e with every parameter w read as its master rounded to w's type, cast<T>(master_of(w))
// (w itself where it is float or double).
template <Expression E>
constexpr auto on_masters(const E& e) {
  return map_symbols(e, [](auto s) {
    using S = decltype(s);
    if constexpr (S::symbol_kind == SymbolKind::Param) return cast<typename S::dtype>(master_of(s));
    else return s;
  });
}

// A model trained on the master weights of its parameters: its expressions on_masters, its
// parameters master_of. For a model with one loss() (train/step.hpp) ...
template <class Model>
struct OnMasters {
  using element = master_t<typename Model::element>;
  static constexpr auto parameters() { return masters_of(Model::parameters()); }
  static constexpr auto loss() { return on_masters(Model::loss()); }
  static constexpr auto predictions()
    requires requires { Model::predictions(); }
  {
    return on_masters(Model::predictions());
  }
};
// ... and for a stack of layers (train/stacked.hpp), whose residual stream stays in T.
template <StackedModel Model>
struct OnMasters<Model> {
  using element = master_t<typename Model::element>;
  static constexpr int layers = Model::layers;
  static constexpr auto residual = Model::residual;
  static constexpr auto embed() { return on_masters(Model::embed()); }
  static constexpr auto layer() { return on_masters(Model::layer()); }
  static constexpr auto head_loss() { return on_masters(Model::head_loss()); }
  static constexpr auto head_predictions()
    requires requires { Model::head_predictions(); }
  {
    return on_masters(Model::head_predictions());
  }
  static constexpr auto embed_parameters() { return masters_of(Model::embed_parameters()); }
  static constexpr auto layer_parameters() { return masters_of(Model::layer_parameters()); }
  static constexpr auto head_parameters() { return masters_of(Model::head_parameters()); }
  static std::string layer_prefix(int l) { return Model::layer_prefix(l); }
};

// What kiln::Trainer trains for Model: the model itself, or OnMasters of a 16-bit one.
template <class Model>
using trained_t = std::conditional_t<mixed_precision_v<typename Model::element>, OnMasters<Model>, Model>;

}  // namespace kiln::train
