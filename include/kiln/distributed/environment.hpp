// kiln: where this process stands in a data-parallel run, read from the environment variables
// torchrun sets (and scripts/launch.sh sets the same way):
//   WORLD_SIZE    the number of processes (ranks); unset: 1, a run of one process
//   RANK          this process's rank, 0 .. WORLD_SIZE - 1
//   LOCAL_RANK    its rank among the processes of its host (the GPU it drives); unset: 0
//   MASTER_ADDR   the host where rank 0 listens, MASTER_PORT its TCP port
// With WORLD_SIZE unset or 1 the other variables are not read: one process is not distributed.
#pragma once
#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

#include "kiln/core/errors.hpp"

namespace kiln::distributed {

struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  bool is_distributed() const { return world_size > 1; }

  // The environment of this process. A DistributedError names a variable that is malformed or
  // out of range, or missing where a run of several processes needs it.
  static Environment from_env() {
    Environment e;
    const char* world = std::getenv("WORLD_SIZE");
    if (!world) return e;
    e.world_size = integer("WORLD_SIZE", world, 1, 1 << 20);
    if (e.world_size == 1) return e;
    e.rank = integer("RANK", required("RANK"), 0, e.world_size - 1);
    if (const char* local = std::getenv("LOCAL_RANK")) e.local_rank = integer("LOCAL_RANK", local, 0, e.world_size - 1);
    e.master_addr = required("MASTER_ADDR");
    if (e.master_addr.empty()) fail("MASTER_ADDR is empty");
    e.master_port = integer("MASTER_PORT", required("MASTER_PORT"), 1, 65535);
    return e;
  }

 private:
  [[noreturn]] static void fail(const std::string& why) {
    throw DistributedError("kiln::distributed: " + why +
                           " (a run of several processes takes RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT "
                           "from the environment: start it with scripts/launch.sh -n N or torchrun)");
  }
  static const char* required(const char* name) {
    const char* v = std::getenv(name);
    if (!v) fail(std::string(name) + " is not set but WORLD_SIZE is " + std::getenv("WORLD_SIZE"));
    return v;
  }
  // `text` as an integer in [lo, hi], all of it.
  static int integer(const char* name, const char* text, int lo, int hi) {
    const std::string s = text;
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
      fail(std::string(name) + " is \"" + s + "\", not an integer");
    if (v < lo || v > hi)
      fail(std::string(name) + " is " + s + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
};

}  // namespace kiln::distributed
