// kiln: sums over the ranks of CUDA memory with NCCL (the CUDA Toolkit's libnccl), for a
// translation unit with the CUDA backend and NCCL's header (nccl.h, in the CUDA Toolkit's include
// directory where NCCL is installed; KILN_WITH_NCCL says whether it was found). NCCL is opened at
// run time (dlopen of libnccl.so.2), so a program links nothing more and one that never runs
// distributed never loads it; a missing library is a DistributedError saying so.
//
// Bootstrap: the ranks meet over TCP (distributed/tcp.hpp's ProcessGroup, which also checks that
// they train the same model); rank 0's NCCL unique id is its payload; then ncclCommInitRank.
// NVLink multicast (NVLS) stays off unless NCCL_NVLS_ENABLE is set: it is set to 0 when unset.
//
// Sums run on a stream of the communicator's own, each after the kernels kiln's stream
// (cuda::stream()) ran before it was asked for (an event recorded there), so a bucket's sum
// overlaps the backward's kernels that follow; join() makes kiln's stream wait for them before
// the update. A step captured as a CUDA graph holds them too (the fork and join of a capture).
// synchronize() waits for the stream while polling NCCL's asynchronous error state: a rank that
// died or stopped answering makes it abort the communicator and raise a DistributedError within
// ddp_timeout instead of hanging. (ncclCommInitRank itself blocks until every rank has called
// it: a rank that fails between the rendezvous and that call leaves the others waiting there.)
#pragma once
#include "kiln/core/config.hpp"
#if KILN_WITH_CUDA && __has_include(<nccl.h>)
#define KILN_WITH_NCCL 1
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/backend/cuda/runtime.hpp"
#include "kiln/distributed/communicator.hpp"
#include "kiln/distributed/tcp.hpp"

namespace kiln::distributed {

namespace detail {
// NCCL's functions, from libnccl.so.2 opened once.
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;

  static const NcclApi& get() {
    static const NcclApi api = [] {
      NcclApi a;
      void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
      if (!lib) lib = ::dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
      if (!lib)
        throw DistributedError(std::string("kiln::distributed: ddp_backend \"nccl\" needs NCCL (libnccl.so.2, in the CUDA Toolkit) "
                                           "on the library path: ") + ::dlerror());
      const auto load = [&](auto& f, const char* name) {
        f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(::dlsym(lib, name));
        if (!f) throw DistributedError(std::string("kiln::distributed: libnccl has no ") + name);
      };
      load(a.get_unique_id, "ncclGetUniqueId"), load(a.init_rank, "ncclCommInitRank"), load(a.all_reduce, "ncclAllReduce");
      load(a.async_error, "ncclCommGetAsyncError"), load(a.abort, "ncclCommAbort"), load(a.destroy, "ncclCommDestroy");
      load(a.error_string, "ncclGetErrorString");
      return a;
    }();
    return api;
  }
  void check(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess && r != ncclInProgress)
      throw DistributedError(std::string("kiln::distributed: ") + what + " failed: " + error_string(r));
  }
};
}  // namespace detail

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const Environment& env, const std::string& fingerprint, std::chrono::milliseconds timeout)
      : api_(nvls_off(detail::NcclApi::get())), group_(env, fingerprint, timeout, [this] {
          ncclUniqueId id;
          api_.check(api_.get_unique_id(&id), "ncclGetUniqueId");
          std::vector<std::byte> bytes(sizeof id);
          std::memcpy(bytes.data(), &id, sizeof id);
          return bytes;
        }) {
    ncclUniqueId id;
    if (group_.payload().size() != sizeof id)
      throw DistributedError("kiln::distributed: rank 0 sent an NCCL id of " + std::to_string(group_.payload().size()) + " bytes");
    std::memcpy(&id, group_.payload().data(), sizeof id);
    api_.check(api_.init_rank(&comm_, group_.size(), id, group_.rank()), "ncclCommInitRank");
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&written_, cudaEventDisableTiming));
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming));
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator() override {
    if (comm_) api_.destroy(comm_);
    if (scratch_) cudaFree(scratch_);
    if (host_) cudaFreeHost(host_);
    if (written_) cudaEventDestroy(written_);
    if (summed_) cudaEventDestroy(summed_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(float* data, std::size_t count, Device device) override { overlapped(data, count, ncclFloat32, device); }
  void all_reduce_sum(double* data, std::size_t count, Device device) override { overlapped(data, count, ncclFloat64, device); }
  void join() override {
    if (!pending_) return;
    KILN_CUDA_CHECK(cudaEventRecord(summed_, stream_));
    KILN_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(), summed_, 0));
    pending_ = false;
  }
  // Through pinned host memory, so that the copies are asynchronous and only synchronize(),
  // with its timeout, waits (a copy to pageable memory would wait for the sum with no limit).
  void all_reduce_host(double* data, std::size_t count) override {
    if (scratch_count_ < count) {
      if (scratch_) cudaFree(scratch_);
      if (host_) cudaFreeHost(host_);
      scratch_ = nullptr, host_ = nullptr;
      KILN_CUDA_CHECK(cudaMalloc(&scratch_, count * sizeof(double)));
      KILN_CUDA_CHECK(cudaMallocHost(&host_, count * sizeof(double)));
      scratch_count_ = count;
    }
    const cudaStream_t s = cuda::stream();
    std::memcpy(host_, data, count * sizeof(double));
    KILN_CUDA_CHECK(cudaMemcpyAsync(scratch_, host_, count * sizeof(double), cudaMemcpyHostToDevice, s));
    join();  // after the sums asked for before it, in every rank's order
    enqueue(static_cast<double*>(scratch_), count, ncclFloat64, Device::cuda(cuda::current_device()), s);
    KILN_CUDA_CHECK(cudaMemcpyAsync(host_, scratch_, count * sizeof(double), cudaMemcpyDeviceToHost, s));
    synchronize();
    std::memcpy(data, host_, count * sizeof(double));
  }
  void synchronize() override {
    join();
    const cudaStream_t s = cuda::stream();
    const auto deadline = Clock::now() + group_.timeout();
    for (;;) {
      const cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) KILN_CUDA_CHECK(e);
      ncclResult_t async = ncclSuccess;
      api_.async_error(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) fail(std::string("NCCL reported ") + api_.error_string(async));
      if (Clock::now() > deadline) fail("the step's sums did not finish within ddp_timeout");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  // NCCL_NVLS_ENABLE=0 unless set, before rank 0's ncclGetUniqueId starts NCCL's threads.
  static const detail::NcclApi& nvls_off(const detail::NcclApi& api) {
    ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    return api;
  }
  // The sum on the communicator's stream, after what kiln's stream ran so far.
  void overlapped(void* data, std::size_t count, ncclDataType_t type, Device device) {
    KILN_CUDA_CHECK(cudaEventRecord(written_, cuda::stream()));
    KILN_CUDA_CHECK(cudaStreamWaitEvent(stream_, written_, 0));
    enqueue(data, count, type, device, stream_);
    pending_ = true;
  }
  void enqueue(void* data, std::size_t count, ncclDataType_t type, Device device, cudaStream_t stream) {
    if (!device.is_cuda())
      throw DeviceError("kiln::distributed: the nccl backend sums CUDA memory; tensors on " + device.str() +
                        " need ddp_backend \"tcp\"");
    api_.check(api_.all_reduce(data, data, count, type, ncclSum, comm_, stream), "ncclAllReduce");
  }
  [[noreturn]] void fail(const std::string& why) {
    api_.abort(comm_);
    comm_ = nullptr;
    throw DistributedError("kiln::distributed: rank " + std::to_string(rank()) + ": " + why +
                           " (a rank stopped or failed); the communicator is aborted");
  }

  const detail::NcclApi& api_;
  ProcessGroup group_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;              // where the sums run
  cudaEvent_t written_ = nullptr, summed_ = nullptr;  // kiln's stream -> stream_, and back
  bool pending_ = false;                       // sums on stream_ that kiln's stream has not joined
  void* scratch_ = nullptr;  // all_reduce_host's device and pinned host buffers
  double* host_ = nullptr;
  std::size_t scratch_count_ = 0;
};

}  // namespace kiln::distributed
#else
#define KILN_WITH_NCCL 0
#endif
