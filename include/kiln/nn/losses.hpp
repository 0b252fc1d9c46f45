// kiln: losses, as expressions (their gradients come from kiln::grad like any other).
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/normalization.hpp"

namespace kiln::nn {

// mean((prediction - target)^2), as torch.nn.functional.mse_loss.
template <Expression P, Expression T>
constexpr auto mse(P prediction, T target) {
  return mean(square(prediction - target));
}

// one_hot(labels, like): [B] class labels (whole numbers stored in the element type, as kiln
// has no integer tensors) as [B, C] rows of 0 and 1, C being like's last extent. A label
// outside [0, C) gives a row of zeros.
template <Expression Y, Expression L>
constexpr auto one_hot(Y labels, L like) {
  static_assert(Y::rank == 1 && L::rank == 2, "kiln::nn::one_hot: labels are [batch], the shape to fill is [batch, classes]");
  return abs(column_index(like) - expand_as(unsqueeze<1>(labels), like)) < 0.5;
}

// Cross-entropy from logits [B, C], as torch.nn.functional.cross_entropy with mean reduction,
// where the targets are
// - [B, C]: one-hot or soft targets: -mean_i sum_c target_ic log_softmax(logits)_ic;
// - [B]: class labels (whole numbers in [0, C), in the logits' element type):
//   -mean_i log_softmax(logits)_i,label_i. The label's entry is selected (where(one_hot, ., 0)),
//   not multiplied by one_hot: a -inf logit in another column then stays out of the sum (a
//   product would give 0 * -inf = NaN there), so the loss is finite; -inf at the label gives
//   +inf, and a NaN anywhere in the row gives NaN (it reaches the whole row's log_softmax).
//   A label outside [0, C) selects nothing and adds 0: check_labels below finds such labels.
// The forward pass of the row is one fused row kernel.
template <Expression L, Expression T>
constexpr auto cross_entropy(L logits, T targets) {
  static_assert(L::rank == 2 && (T::rank == 2 || T::rank == 1),
                "kiln::nn::cross_entropy: logits are [batch, classes]; targets are [batch, classes] "
                "(probabilities) or [batch] (class labels)");
  if constexpr (T::rank == 1) return -mean(sum<-1>(where(one_hot(targets, logits), log_softmax(logits), 0.0)));
  else return -mean(sum<-1>(targets * log_softmax(logits)));
}

// Checks class labels for cross_entropy on the host: every value must be a whole number in
// [0, classes). A ValueError names the first row that is not (out of range, negative, NaN,
// infinite or fractional). Kernels cannot raise, and a compiled program cannot look at its
// inputs' values before its kernels run, so call this before a step whose labels are not known
// to be valid (once per data set, or per batch). CUDA labels are copied to the host.
template <class T>
void check_labels(const Tensor<T>& labels, std::size_t classes) {
  if (labels.is_cuda()) return check_labels(labels.cpu(), classes);
  if (labels.rank() != 1) throw ShapeError("cross_entropy: labels are [batch], got " + labels.shape().str());
  const double c = static_cast<double>(classes);
  for (std::size_t i = 0; i < labels.numel(); ++i) {
    const double v = static_cast<double>(widen(labels[i]));
    if (v >= 0.0 && v < c && v == std::floor(v)) continue;  // false for NaN
    char value[32];
    std::snprintf(value, sizeof value, "%g", v);
    throw ValueError("cross_entropy: the label of row " + std::to_string(i) + " is " + value +
                     ", not a class index in [0, " + std::to_string(classes) + ")");
  }
}

// The same against the logits of the call: labels [B] for logits [B, C] (a ShapeError when the
// shapes do not match), then the values as above with C classes.
template <class T>
void check_labels(const Tensor<T>& labels, const Tensor<T>& logits) {
  if (labels.rank() != 1 || logits.rank() != 2 || labels.shape()[0] != logits.shape()[0])
    throw ShapeError("cross_entropy: labels " + labels.shape().str() + " do not match logits " + logits.shape().str() +
                     " (labels are [batch], logits [batch, classes])");
  check_labels(labels, logits.shape()[1]);
}

}  // namespace kiln::nn
