// kiln: the definition of cuda::launch<Desc> (launch.hpp), for nvcc. Included by compiled.hpp
// in translation units nvcc builds, and by the kernel files the build generates for host-built
// ones (cmake/kiln_cuda_kernels.py).
#pragma once
#include "kiln/backend/cuda/attention_kernel.cuh"
#include "kiln/backend/cuda/axis_copy_kernel.cuh"
#include "kiln/backend/cuda/convert_kernel.cuh"
#include "kiln/backend/cuda/dropout_kernel.cuh"
#include "kiln/backend/cuda/index_rows_kernel.cuh"
#include "kiln/backend/cuda/reduce_kernel.cuh"
#include "kiln/backend/cuda/row_kernel.cuh"
#include "kiln/backend/cuda/small_gemm.cuh"
#include "kiln/backend/cuda/tc_gemm.cuh"

namespace kiln::cuda {

template <class Desc>
struct kernel_impl;
template <class T, class O, class S, int NL, int NC, class A, class E>
struct kernel_impl<lower::RowKernel<T, O, S, NL, NC, A, E>> {
  using type = RowKernelCuda<lower::RowKernel<T, O, S, NL, NC, A, E>>;
};
template <class T, ReduceKind K, class Tr, bool Tot, int NL, int NC>
struct kernel_impl<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>> {
  using type = ReduceKernelCuda<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>>;
};
template <class T, class Tr, int NL, int NC>
struct kernel_impl<lower::ReduceToKernel<T, Tr, NL, NC>> {
  using type = ReduceToKernelCuda<lower::ReduceToKernel<T, Tr, NL, NC>>;
};
template <class T, int NS, class I>
struct kernel_impl<lower::AxisCopyKernel<T, NS, I>> {
  using type = AxisCopyCuda<lower::AxisCopyKernel<T, NS, I>>;
};
template <class T>
struct kernel_impl<lower::DropoutKernel<T>> {
  using type = DropoutCuda<lower::DropoutKernel<T>>;
};
template <class To, class From>
struct kernel_impl<lower::ConvertKernel<To, From>> {
  using type = ConvertCuda<lower::ConvertKernel<To, From>>;
};
template <class T, class I, bool S>
struct kernel_impl<lower::IndexRowsKernel<T, I, S>> {
  using type = IndexRowsCuda<lower::IndexRowsKernel<T, I, S>>;
};

template <class T, int P, bool C, int NL, class I>
struct kernel_impl<lower::AttentionKernel<T, P, C, NL, I>> {
  using type = AttentionCuda<lower::AttentionKernel<T, P, C, NL, I>>;
};

template <class Epi, int Acc>
struct kernel_impl<GemmEpilogue<Epi, Acc>> {
  struct type {
    static void run(const launch_args_t<Epi>& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void*) {
      RowKernelCuda<Epi>::template run_epilogue<Acc>(a, cfg, stream);
    }
  };
};
template <class Desc>
struct kernel_impl<SmallGemm<Desc>> {
  using type = SmallGemmCuda<Desc>;
};
template <class Desc>
struct kernel_impl<TcGemm<Desc>> {
  using type = TcGemmCuda<Desc>;
};
template <class... Descs>
struct kernel_impl<ScalarBatch<Descs...>> {
  using type = ScalarBatchCuda<Descs...>;
};

template <class Desc>
void launch(const launch_args_t<Desc>& args, const lower::LaunchConfig& config, cudaStream_t stream, void* scratch) {
  kernel_impl<Desc>::type::run(args, config, stream, scratch);
}

}  // namespace kiln::cuda
