// Every op of the expression language: the functions users call and the op tags that kernel
// descriptors name. The generated CUDA kernel files (cmake/kiln_cuda_kernels.py) include this
// and the kernels, not kiln.hpp: nvcc then never parses the runtime, autodiff or Eigen.
#pragma once
#include "kiln/expr/node.hpp"
#include "kiln/expr/ops/argmax.hpp"
#include "kiln/expr/ops/attention.hpp"
#include "kiln/expr/ops/axis_copy.hpp"
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/dropout.hpp"
#include "kiln/expr/ops/cast.hpp"
#include "kiln/expr/ops/host.hpp"
#include "kiln/expr/ops/index.hpp"
#include "kiln/expr/ops/layout.hpp"
#include "kiln/expr/ops/matmul.hpp"
#include "kiln/expr/ops/normalization.hpp"
#include "kiln/expr/ops/patch.hpp"
#include "kiln/expr/ops/pointwise.hpp"
#include "kiln/expr/ops/reduce.hpp"
#include "kiln/expr/ops/rotary.hpp"
