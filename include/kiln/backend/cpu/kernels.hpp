// kiln: the CPU backend's dispatcher, its one entry point. For each kernel descriptor
// (lower/evaluator.hpp) it names the CPU kernel that runs it and the workspace that kernel keeps
// between calls, and runs it on the arguments the planner filled (lower/args.hpp):
//   cpu::prepare<Desc>(args, workspace)  once per plan and launch configuration;
//   cpu::run<Desc>(args, workspace)      per call;
//   cpu::candidates<Desc>(args)          MaxAutotune's launch configurations.
#pragma once
#include <vector>

#include "kiln/backend/cpu/attention_kernel.hpp"
#include "kiln/backend/cpu/axis_copy_kernel.hpp"
#include "kiln/backend/cpu/convert_kernel.hpp"
#include "kiln/backend/cpu/dropout_kernel.hpp"
#include "kiln/backend/cpu/gemm_kernel.hpp"
#include "kiln/backend/cpu/index_rows_kernel.hpp"
#include "kiln/backend/cpu/reduce_kernel.hpp"
#include "kiln/backend/cpu/reduce_to_kernel.hpp"
#include "kiln/backend/cpu/row_kernel.hpp"

namespace kiln::cpu {

template <class Desc>
struct kernel_of;
template <class T, class O, class S, int NL, int NC, class A, class E>
struct kernel_of<lower::RowKernel<T, O, S, NL, NC, A, E>> {
  using type = RowKernelCpu<lower::RowKernel<T, O, S, NL, NC, A, E>>;
};
template <class T, class E, int A, int NL, int NC>
struct kernel_of<lower::GemmKernel<T, E, A, NL, NC>> {
  using type = GemmKernelCpu<lower::GemmKernel<T, E, A, NL, NC>>;
};
template <class T, ReduceKind K, class Tr, bool Tot, int NL, int NC>
struct kernel_of<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>> {
  using type = ReduceKernelCpu<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>>;
};
template <class T, class Tr, int NL, int NC>
struct kernel_of<lower::ReduceToKernel<T, Tr, NL, NC>> {
  using type = ReduceToKernelCpu<lower::ReduceToKernel<T, Tr, NL, NC>>;
};
template <class T, int NS, class I>
struct kernel_of<lower::AxisCopyKernel<T, NS, I>> {
  using type = AxisCopyKernelCpu<lower::AxisCopyKernel<T, NS, I>>;
};
template <class T>
struct kernel_of<lower::DropoutKernel<T>> {
  using type = DropoutKernelCpu<lower::DropoutKernel<T>>;
};
template <class To, class From>
struct kernel_of<lower::ConvertKernel<To, From>> {
  using type = ConvertKernelCpu<lower::ConvertKernel<To, From>>;
};
template <class T, class I, bool S>
struct kernel_of<lower::IndexRowsKernel<T, I, S>> {
  using type = IndexRowsKernelCpu<lower::IndexRowsKernel<T, I, S>>;
};
template <class T, int P, bool C, int NL, class I>
struct kernel_of<lower::AttentionKernel<T, P, C, NL, I>> {
  using type = AttentionKernelCpu<lower::AttentionKernel<T, P, C, NL, I>>;
};
template <class Desc>
using kernel_t = typename kernel_of<Desc>::type;

// What a kernel keeps between calls of one plan, reserved by prepare when the plan is built so
// that no kernel allocates while a call runs: its kernel's Workspace where it declares one
// (Eigen's packing buffers and 16-bit operands' float copies for a GEMM, the float sums of a
// 16-bit sum_to or scatter, attention's per-thread tiles), else nothing.
struct NoWorkspace {};
template <class Desc>
struct workspace_of {
  using type = NoWorkspace;
};
template <class Desc>
  requires requires { typename kernel_t<Desc>::Workspace; }
struct workspace_of<Desc> {
  using type = typename kernel_t<Desc>::Workspace;
};
template <class Desc>
using workspace_t = typename workspace_of<Desc>::type;

template <class Desc>
void prepare(const lower::args_t<Desc>& args, workspace_t<Desc>& ws) {
  if constexpr (requires { kernel_t<Desc>::prepare(args, ws); }) kernel_t<Desc>::prepare(args, ws);
}

template <class Desc>
void run(const lower::args_t<Desc>& args, workspace_t<Desc>& ws) {
  if constexpr (requires { kernel_t<Desc>::run(args, ws); }) kernel_t<Desc>::run(args, ws);
  else kernel_t<Desc>::run(args);
}

// Checks a kernel's indices against what they index (an IndexError), where the kernel has
// any; the executor calls it for every kernel before the first one runs.
template <class Desc>
void check_indices(const lower::args_t<Desc>& args) {
  if constexpr (requires { kernel_t<Desc>::check_ids(args); }) kernel_t<Desc>::check_ids(args);
}

template <class Desc>
std::vector<LaunchConfig> candidates(const lower::args_t<Desc>& args) {
  return kernel_t<Desc>::candidates(args);
}

}  // namespace kiln::cpu
