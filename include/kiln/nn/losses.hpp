// kiln: losses, as expressions (their gradients come from kiln::grad like any other).
#pragma once
#include "kiln/expr/ops/normalization.hpp"

namespace kiln::nn {

// mean((prediction - target)^2), as torch.nn.functional.mse_loss.
template <Expression P, Expression T>
constexpr auto mse(P prediction, T target) {
  return mean(square(prediction - target));
}

// Cross-entropy from logits [B, C] against one-hot (or soft) targets [B, C]:
// -mean over the batch of sum_c target * log_softmax(logits). The forward pass of the row is
// one fused row kernel. Integer class labels: one_hot(labels) below.
template <Expression L, Expression T>
constexpr auto cross_entropy(L logits, T targets) {
  static_assert(L::rank == 2 && T::rank == 2, "kiln::nn::cross_entropy: logits and targets are [batch, classes]");
  return -mean(sum<-1>(targets * log_softmax(logits)));
}

}  // namespace kiln::nn
