// kiln: GEMM epilogue recipes, classified once and device-neutrally. A GEMM kernel's epilogue
// (GemmKernel::epilogue) is an evaluator tree over the product, load slot Acc. Libraries with
// fixed epilogues (cuBLASLt's BIAS, RELU_BIAS, GELU_BIAS; CUTLASS's fusion operations) apply
// only some shapes of it, so each backend asks which recipe a tree is and maps the recipes it
// has; every other tree runs as kiln's own epilogue (a row kernel over the product, or fused
// into kiln's GEMM kernels).
//
// At compile time, from the tree alone:
//   None          the product itself
//   Add           acc + x               x: another load (a bias or a residual, by its shape)
//   AddRelu       relu(acc + x)
//   AddGelu       gelu(acc + x)         the exact, erf form
//   AddGeluTanh   gelu_tanh(acc + x)    the tanh form (HF's gelu_new)
//   Other         anything else
// At plan time, from the arguments (add_is_row_bias): whether x is a bias, one row packed
// along the output's columns and broadcast over its rows, as fixed-function epilogues read it.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kiln/expr/ops/pointwise.hpp"
#include "kiln/lower/evaluator.hpp"

namespace kiln::lower {

enum class EpilogueKind : std::uint8_t { None, Add, AddRelu, AddGelu, AddGeluTanh, Other };

template <class Epi, int Acc>
struct epilogue_recipe {
  static constexpr EpilogueKind kind = std::is_same_v<Epi, LLoad<Acc>> ? EpilogueKind::None : EpilogueKind::Other;
  static constexpr int operand = -1;  // the load slot added to the product, for the Add kinds
};
template <int Acc, int B>
  requires(B != Acc)
struct epilogue_recipe<LOp<Add, LLoad<Acc>, LLoad<B>>, Acc> {
  static constexpr EpilogueKind kind = EpilogueKind::Add;
  static constexpr int operand = B;
};
template <int Acc, int B>
  requires(B != Acc)
struct epilogue_recipe<LOp<Add, LLoad<B>, LLoad<Acc>>, Acc> {
  static constexpr EpilogueKind kind = EpilogueKind::Add;
  static constexpr int operand = B;
};

// An activation over acc + x.
template <class Op>
inline constexpr EpilogueKind activation_after_add = EpilogueKind::Other;
template <>
inline constexpr EpilogueKind activation_after_add<Relu> = EpilogueKind::AddRelu;
template <>
inline constexpr EpilogueKind activation_after_add<Gelu> = EpilogueKind::AddGelu;
template <>
inline constexpr EpilogueKind activation_after_add<GeluTanh> = EpilogueKind::AddGeluTanh;
template <class Op, class Inner, int Acc>
  requires(activation_after_add<Op> != EpilogueKind::Other)
struct epilogue_recipe<LOp<Op, Inner>, Acc> {
  static constexpr bool over_add = epilogue_recipe<Inner, Acc>::kind == EpilogueKind::Add;
  static constexpr EpilogueKind kind = over_add ? activation_after_add<Op> : EpilogueKind::Other;
  static constexpr int operand = over_add ? epilogue_recipe<Inner, Acc>::operand : -1;
};

template <class Desc>
using gemm_recipe = epilogue_recipe<typename Desc::epilogue, Desc::acc_slot>;

inline constexpr const char* describe(EpilogueKind k) {
  switch (k) {
    case EpilogueKind::None: return "none";
    case EpilogueKind::Add: return "acc + x";
    case EpilogueKind::AddRelu: return "relu(acc + x)";
    case EpilogueKind::AddGelu: return "gelu(acc + x)";
    case EpilogueKind::AddGeluTanh: return "gelu_tanh(acc + x)";
    case EpilogueKind::Other: return "a general tree";
  }
  return "";
}

// Whether the Add kinds' operand of GEMM arguments g is a bias as fixed-function epilogues read
// it: one matrix, the product written in place (the epilogue over the product's own rows), and
// the operand one row with unit stride broadcast over every row (outer strides 0).
template <class Desc, class G>
bool add_is_row_bias(const G& g) {
  constexpr int x = gemm_recipe<Desc>::operand;
  if constexpr (x < 0) {
    return false;
  } else {
    const auto& e = g.epilogue;
    if (g.batch != 1 || !g.in_place || e.rows != g.m || e.len != g.n || e.inner[x] != 1) return false;
    for (int d = 0; d < e.nrow_dims; ++d)
      if (e.outer[x][d] != 0) return false;
    return true;
  }
}

}  // namespace kiln::lower
