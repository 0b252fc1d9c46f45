// kiln: patch embedding, the stem of a vision transformer: a convolution whose kernel is its
// stride (ViT's 16 x 16, stride 16), written as patchify + GEMM. For images x [B, C, H, W] and a
// convolution weight [D, C, p, p] (PyTorch's Conv2d layout, as Hugging Face checkpoints store it):
//   patch_embed(x, weight, p)[b, n, d] = sum_{c,u,v} weight[d, c, u, v] x[b, c, i p + u, j p + v]
// with n = i (W / p) + j, the patches in row-major order: HF's
// `projection(pixel_values).flatten(2).transpose(1, 2)`, [B, N, D]. H and W must be multiples of
// p (a ShapeError of the reshape otherwise).
//
// A composition of views and one GEMM: the image is split into [B, H/p, p, W/p, p] blocks by
// unflatten, reordered to [B, H/p, W/p, C, p, p] by permute and copied once into the [B, N, C p p]
// patch matrix (the one copy: a reshape of a permuted view); the weight is read in place as
// [C p p, D] (a transposed view of its [D, C p p] flattening). Derivatives come from theirs.
#pragma once
#include <string>

#include "kiln/core/errors.hpp"
#include "kiln/expr/ops/layout.hpp"
#include "kiln/expr/ops/matmul.hpp"

namespace kiln {

template <Expression X, Expression W>
constexpr auto patch_embed(X x, W weight, long patch) {
  static_assert(X::rank == 4, "kiln::patch_embed: the images must be [batch, channels, height, width]");
  static_assert(W::rank == 4, "kiln::patch_embed: the weight must be a convolution's [out_channels, channels, p, p]");
  if (patch < 1) throw ValueError("kiln::patch_embed: the patch size must be at least 1, got " + std::to_string(patch));
  const auto blocks = unflatten<2>(unflatten<3>(x, {-1, patch}), {-1, patch});  // [B, C, H/p, p, W/p, p]
  const auto patches = flatten<1, 2>(flatten<3, 5>(permute<0, 2, 4, 1, 3, 5>(blocks)));
  return matmul(patches, transpose(flatten<1, 3>(weight)));
}

// With the convolution's bias [D], added to every patch.
template <Expression X, Expression W, Expression B>
constexpr auto patch_embed(X x, W weight, B bias, long patch) {
  static_assert(B::rank == 1, "kiln::patch_embed: the bias must be [out_channels]");
  return patch_embed(x, weight, patch) + bias;
}

}  // namespace kiln
