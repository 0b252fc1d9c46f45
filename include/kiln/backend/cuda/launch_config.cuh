// kiln: launching kiln's CUDA kernels: the architecture a kernel was compiled for, programmatic
// dependent launches (a kernel that may start while the one before it finishes), thread-block
// clusters, and one launch call that sets them.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "kiln/backend/cuda/runtime.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

// Programmatic dependent launch (Hopper): a kernel launched with launch_after_previous may
// start while the kernel before it on the stream is still running; before it touches global
// memory it waits for that kernel to complete (and its writes to be visible), and once it has
// waited it lets the next kernel start. So each launch and block start-up overlaps the previous
// kernel's last blocks instead of following them (a gap of a few microseconds, much of a kernel
// that moves 50-100 MB). Every kernel launched so must call await_previous_kernel first.
__device__ __forceinline__ void await_previous_kernel() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
// A launch's configuration for cudaLaunchKernelEx, with its attributes: thread-block clusters
// of `cluster` blocks (none where that is one block) and a programmatic dependent launch
// (`dependent`: only for a kernel that calls await_previous_kernel first and whose code waits,
// compiled for sm_90 on). Not copyable: config points at attrs.
struct KernelLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attrs[2]{};
  KernelLaunch(dim3 blocks, dim3 threads, std::size_t smem, cudaStream_t stream, dim3 cluster, bool dependent) {
    config.gridDim = blocks;
    config.blockDim = threads;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    unsigned n = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      attrs[n].val.clusterDim.x = cluster.x;
      attrs[n].val.clusterDim.y = cluster.y;
      attrs[n].val.clusterDim.z = cluster.z;
      ++n;
    }
    if (dependent) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    config.attrs = attrs;
    config.numAttrs = n;
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
};

// A kernel launched with more than 48 KiB of dynamic shared memory must opt in, per device, to
// at least the size it launches with: asked again only when a launch needs more than before
// (attention's kernels size theirs from the shapes).
template <auto Kernel>
void allow_dynamic_smem(std::size_t bytes) {
  thread_local std::unordered_map<int, std::size_t> opted;
  std::size_t& done = opted[current_device()];
  if (bytes <= done) return;
  KILN_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done = bytes;
}

// What the runtime knows of a kernel on the current device (registers, the largest block, the
// virtual architecture its code was compiled for): asked once per device and kernel.
template <auto Kernel>
const cudaFuncAttributes& kernel_attributes() {
  thread_local std::unordered_map<int, cudaFuncAttributes> known;
  const int device = current_device();
  auto it = known.find(device);
  if (it == known.end()) {
    cudaFuncAttributes fa{};
    KILN_CUDA_CHECK(cudaFuncGetAttributes(&fa, Kernel));
    it = known.emplace(device, fa).first;
  }
  return it->second;
}

// The most threads per block `Kernel` can launch with on the current device: fewer than 1024
// when its registers per thread do not fit a block of 1024 (65536 registers per block).
template <auto Kernel>
int max_threads_per_block() {
  return kernel_attributes<Kernel>().maxThreadsPerBlock;
}

// A failed launch, as a CudaError naming the kernel, its launch shape and what it needs: a
// kernel whose registers per thread do not fit the block (cudaErrorLaunchOutOfResources) is
// named, with its register count and the largest block it can run.
[[noreturn]] inline void launch_failed(cudaError_t e, const void* kernel, const cudaLaunchConfig_t& config) {
  (void)cudaGetLastError();
  const char* name = nullptr;
  if (cudaFuncGetName(&name, kernel) != cudaSuccess || !name) name = "(unnamed)";
  cudaFuncAttributes fa{};
  const bool known = cudaFuncGetAttributes(&fa, kernel) == cudaSuccess;
  (void)cudaGetLastError();
  const dim3 blocks = config.gridDim, threads = config.blockDim;
  std::string msg = std::string("kiln: launching ") + name + " with " + std::to_string(blocks.x * blocks.y * blocks.z) +
                    " blocks of " + std::to_string(threads.x * threads.y * threads.z) + " threads and " +
                    std::to_string(config.dynamicSmemBytes) + " bytes of dynamic shared memory failed: " +
                    cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (known)
    msg += "; the kernel uses " + std::to_string(fa.numRegs) + " registers per thread and " +
           std::to_string(fa.sharedSizeBytes) + " bytes of static shared memory, and runs at most " +
           std::to_string(fa.maxThreadsPerBlock) + " threads per block";
  throw CudaError(msg, static_cast<int>(e));
}

// Every launch of kiln's own kernels goes through here: a failure names the kernel and its shape.
template <auto Kernel, class... Args>
void launch_kernel(const KernelLaunch& l, const Args&... args) {
  const cudaError_t e = cudaLaunchKernelEx(&l.config, Kernel, args...);
  if (e != cudaSuccess) launch_failed(e, reinterpret_cast<const void*>(Kernel), l.config);
}

template <auto Kernel, class... Args>
void launch_after_previous(dim3 blocks, dim3 threads, std::size_t smem, cudaStream_t stream, const Args&... args) {
  // Only a device with it (Hopper on), and code that waits (compiled for sm_90 on): other code
  // is launched in stream order.
  const bool waits = device_has_clusters() && kernel_attributes<Kernel>().ptxVersion >= 90;
  launch_kernel<Kernel>(KernelLaunch(blocks, threads, smem, stream, dim3(1), waits), args...);
}

// A grid-stride loop over `work` items (the copy and convert kinds): cfg's threads per block (256
// when not chosen), enough blocks to fill the device a few times over; the loop covers the rest.
template <auto Kernel, class Args>
void launch_grid_stride(index_t work, const lower::LaunchConfig& cfg, cudaStream_t stream, const Args& a) {
  if (work == 0) return;
  const int threads = cfg.threads > 0 ? cfg.threads : 256;
  const index_t want = (work + threads - 1) / threads;
  const auto blocks = static_cast<unsigned>(std::min<index_t>(want, index_t{8} * multiprocessors()));
  launch_after_previous<Kernel>(blocks, dim3(threads), 0, stream, a);
  KILN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kiln::cuda
