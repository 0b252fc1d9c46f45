// kiln: the umbrella header. A header-only C++20 tensor library that does what torch.compile
// does, at C++ compile time: an expression's type is its graph; kiln::compile plans fused
// kernels from it and instantiates them per expression.
#pragma once
#include "kiln/autodiff/grad.hpp"
#include "kiln/autodiff/jvp.hpp"
#include "kiln/core/eigen_interop.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/print.hpp"
#include "kiln/core/random.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/nn/losses.hpp"
#include "kiln/nn/optim.hpp"
#include "kiln/runtime/compile.hpp"
