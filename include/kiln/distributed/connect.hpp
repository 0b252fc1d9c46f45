// kiln: the communicator of a data-parallel run, by backend name (TrainingArguments'
// ddp_backend): "tcp" (host memory, distributed/tcp.hpp), "nccl" (CUDA memory,
// distributed/nccl.hpp), or "" for the one that fits the device.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "kiln/core/device.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/distributed/communicator.hpp"
#include "kiln/distributed/environment.hpp"
#include "kiln/distributed/nccl.hpp"
#include "kiln/distributed/tcp.hpp"

namespace kiln::distributed {

// The backend for tensors on `device`: `backend` when given, else nccl for a CUDA device, tcp
// for the CPU.
inline std::string backend_for(const std::string& backend, Device device) {
  if (!backend.empty()) return backend;
  return device.is_cuda() ? "nccl" : "tcp";
}

// Every rank of env joined into one communicator (the rendezvous checks that `fingerprint` is
// the same on every rank), or none for a run of one process.
inline std::unique_ptr<Communicator> connect(const Environment& env, const std::string& backend, Device device,
                                             const std::string& fingerprint, std::chrono::milliseconds timeout) {
  if (!env.is_distributed()) return nullptr;
  const std::string b = backend_for(backend, device);
  if (b == "tcp") return std::make_unique<TcpCommunicator>(env, fingerprint, timeout);
  if (b == "nccl") {
#if KILN_WITH_NCCL
    return std::make_unique<NcclCommunicator>(env, fingerprint, timeout);
#elif KILN_WITH_CUDA
    throw DeviceError("kiln::distributed: ddp_backend \"nccl\" needs NCCL's header, nccl.h, which this build did not find "
                      "(install NCCL where the CUDA Toolkit's headers are)");
#else
    throw DeviceError("kiln::distributed: ddp_backend \"nccl\" needs the CUDA backend in this translation unit "
                      "(build it with nvcc or kiln_cuda_executable; docs/cuda.md)");
#endif
  }
  throw ValueError("kiln::distributed: ddp_backend \"" + b + "\" is not one of tcp, nccl");
}

}  // namespace kiln::distributed
