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
  // May return before the sum is done (NCCL enqueues it on kiln's stream, after the kernels that
  // wrote data and before those that read it); synchronize() waits for it. Every rank must make
  // the same calls with the same counts, in the same order.
  virtual void all_reduce_sum(float* data, std::size_t count, Device device) = 0;
  virtual void all_reduce_sum(double* data, std::size_t count, Device device) = 0;
  // The same for host values, done when the call returns (a loss to average, say).
  virtual void all_reduce_host(double* data, std::size_t count) = 0;
  // Until every reduction asked for so far has finished. A DistributedError where a rank failed
  // or the timeout passed first.
  virtual void synchronize() {}
};

}  // namespace kiln::distributed
