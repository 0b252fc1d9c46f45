// kiln: losses, as expressions (their gradients come from kiln::grad like any other).
#pragma once
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

// Cross-entropy from logits [B, C], as torch.nn.functional.cross_entropy with mean reduction:
// -mean over the batch of sum_c target * log_softmax(logits), where the targets are
// - [B, C]: one-hot or soft targets, or
// - [B]: class labels (whole numbers in [0, C), in the logits' element type), one_hot above.
// The forward pass of the row is one fused row kernel.
template <Expression L, Expression T>
constexpr auto cross_entropy(L logits, T targets) {
  static_assert(L::rank == 2 && (T::rank == 2 || T::rank == 1),
                "kiln::nn::cross_entropy: logits are [batch, classes]; targets are [batch, classes] "
                "(probabilities) or [batch] (class labels)");
  if constexpr (T::rank == 1) return -mean(sum<-1>(one_hot(targets, logits) * log_softmax(logits)));
  else return -mean(sum<-1>(targets * log_softmax(logits)));
}

}  // namespace kiln::nn
