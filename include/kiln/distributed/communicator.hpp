// kiln: what a data-parallel step asks of the ranks' communication: sums over every rank, in
// place, after which every rank holds the same bits. Implemented over TCP for CPU tensors
// (distributed/tcp.hpp) and by NCCL for CUDA tensors (distributed/nccl.hpp); a test can give
// its own (one that records the calls, say).
#pragma once
#include <cstddef>

#include "kiln/core/device.hpp"

namespace kiln::distributed {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[0 .. count) <- the sum over every rank of its data[0 .. count), on `device`'s memory.
  // May return before the sum is done (NCCL enqueues it on a stream of its own, after the
  // kernels kiln's stream ran so far, which wrote data); join() or synchronize() then orders
  // it before what reads data. Every rank must make the same calls with the same counts, in the
  // same order.
  virtual void all_reduce_sum(float* data, std::size_t count, Device device) = 0;
  virtual void all_reduce_sum(double* data, std::size_t count, Device device) = 0;
  // The same for host values, done when the call returns (a loss to average, say).
  virtual void all_reduce_host(double* data, std::size_t count) = 0;
  // Makes whatever kiln's stream runs next wait for every sum asked for so far: for a backend
  // that sums on a stream of its own, beside the kernels that follow (NCCL); nothing for one
  // whose sums are done when all_reduce_sum returns. Legal inside a CUDA graph capture.
  virtual void join() {}
  // Until every reduction asked for so far has finished (join() first). A DistributedError
  // where a rank failed or the timeout passed first. Not inside a CUDA graph capture.
  virtual void synchronize() {}
};

}  // namespace kiln::distributed
