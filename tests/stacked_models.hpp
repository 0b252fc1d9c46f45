// The small models of the Trainer tests, in any element type T: a residual stack of tanh layers
// declared by its layers (Stacked: trained region by region, train/stacked.hpp) and the same
// model as one loss() expression (OneProgram: train/step.hpp), and regression data for them.
//   h_0 = x w_in;  h_{l+1} = h_l + tanh(h_l w + b) (weights "layer<l>.w", "layer<l>.b");
//   loss = mean((h_L w_out - y)^2) + 0.01 mean(w_in^2)   (w_in read by the embedding and the head)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/expr/substitute.hpp"
#include "kiln/train/trainer.hpp"

namespace kiln::test {

template <class T>
struct Parts {
  using element = T;
  static constexpr auto x = kiln::input<"x", 2, T>();
  static constexpr auto y = kiln::input<"y", 2, T>();
  static constexpr auto h = kiln::input<"h", 2, T>();
  static constexpr auto w_in = kiln::param<"w_in", 2, T>();
  static constexpr auto w_out = kiln::param<"w_out", 2, T>();
  static constexpr auto w = kiln::param<"w", 2, T>();
  static constexpr auto b = kiln::param<"b", 1, T>();
  static constexpr auto embed() { return kiln::matmul(x, w_in); }
  static constexpr auto layer() { return h + kiln::tanh(kiln::matmul(h, w) + b); }
  static constexpr auto head_predictions() { return kiln::matmul(h, w_out); }
  static constexpr auto head_loss() {
    return kiln::mean(kiln::square(head_predictions() - y)) + 0.01 * kiln::mean(kiln::square(w_in));
  }
};

template <class T, int Layers = 2>
struct Stacked : Parts<T> {
  using P = Parts<T>;
  static constexpr int layers = Layers;
  static constexpr auto residual = P::h;
  static constexpr auto embed_parameters() { return std::tuple{P::w_in}; }
  static constexpr auto layer_parameters() { return std::tuple{P::w, P::b}; }
  static constexpr auto head_parameters() { return std::tuple{P::w_out, P::w_in}; }
  static std::string layer_prefix(int l) { return "layer" + std::to_string(l) + "."; }
};

// Stacked<T, 2> as one expression, built from the same layer with kiln::prefix_params and
// kiln::substitute.
template <class T>
struct OneProgram : Parts<T> {
  using P = Parts<T>;
  static constexpr auto parameters() {
    return std::tuple{P::w_in, P::w_out, kiln::prefixed<"layer0.">(P::w), kiln::prefixed<"layer0.">(P::b),
                      kiln::prefixed<"layer1.">(P::w), kiln::prefixed<"layer1.">(P::b)};
  }
  template <class E>
  static constexpr auto on_stack(E head) {
    const auto h1 = kiln::substitute(kiln::prefix_params<kiln::numbered<"layer", 0>()>(P::layer()), P::h, P::embed());
    const auto h2 = kiln::substitute(kiln::prefix_params<kiln::numbered<"layer", 1>()>(P::layer()), P::h, h1);
    return kiln::substitute(head, P::h, h2);
  }
  static constexpr auto loss() { return on_stack(P::head_loss()); }
  static constexpr auto predictions() { return on_stack(P::head_predictions()); }
};

// The rows `rows` of a [n, k] tensor, in that order (a batch of samples).
template <class T>
kiln::Tensor<T> take_rows(const kiln::Tensor<T>& t, std::span<const std::size_t> rows) {
  const std::size_t k = t.shape()[1];
  kiln::Tensor<T> out(kiln::Shape{rows.size(), k});
  for (std::size_t r = 0; r < rows.size(); ++r) std::copy_n(t.data() + rows[r] * k, k, out.data() + r * k);
  return out;
}

// n samples of x [3] and y [2] = a smooth function of x plus noise (drawn in double, stored in T).
template <class T>
struct Data {
  kiln::Tensor<T> xs, ys;
  explicit Data(std::size_t n, std::uint64_t seed) {
    kiln::Tensor<double> x(kiln::Shape{n, 3}), y(kiln::Shape{n, 2});
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> d;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < 3; ++k) x[i * 3 + k] = d(rng);
      y[i * 2] = std::sin(x[i * 3]) + 0.5 * x[i * 3 + 1] + 0.1 * d(rng);
      y[i * 2 + 1] = x[i * 3 + 2] * x[i * 3] + 0.1 * d(rng);
    }
    xs = x.template as<T>(), ys = y.template as<T>();
  }
  std::size_t size() const { return xs.shape()[0]; }
  struct Batch {
    kiln::Tensor<T> x, y;
    auto bindings() const { return std::tuple{Parts<T>::x = x, Parts<T>::y = y}; }
  };
  Batch batch(std::span<const std::size_t> rows) const { return {take_rows(xs, rows), take_rows(ys, rows)}; }
};

// Random weights of Stacked<T, 2> (and OneProgram<T>), normal with deviation 0.5.
template <class T>
kiln::train::Parameters<T> stacked_weights(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 0.5);
  const auto random = [&](kiln::Shape s) {
    kiln::Tensor<double> t(s);
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = d(rng);
    return t.template as<T>();
  };
  return {{"w_in", random({3, 4})},  {"w_out", random({4, 2})},    {"layer0.w", random({4, 4})},
          {"layer0.b", random({4})}, {"layer1.w", random({4, 4})}, {"layer1.b", random({4})}};
}

// What kiln::Trainer gives an engine: a FlatState of its parameters (train/flat.hpp), the
// parameters (set to `start`) and the moments (zero) as views of it.
template <class Engine, class T>
struct FlatViews {
  using F = kiln::train::FlatState<T>;
  std::shared_ptr<F> flat;
  kiln::train::Parameters<T> params, moments;
  explicit FlatViews(const kiln::train::Parameters<T>& start) {
    std::vector<std::pair<std::string, kiln::Shape>> parts;
    Engine::for_each_parameter([&](auto, const std::string& name) { parts.emplace_back(name, start.at(name).shape()); });
    flat = std::make_shared<F>(parts, kiln::Device::cpu());
    params = flat->views(F::kParam), moments = flat->views(F::kExpAvg, "exp_avg.");
    moments.merge(flat->views(F::kExpAvgSq, "exp_avg_sq."));
    for (const auto& [name, shape] : parts) params.at(name).copy_from(start.at(name));
  }
};

}  // namespace kiln::test
