// kiln: the exceptions a call can raise. Kernels never throw; every check happens before the
// first kernel runs, so a failed call leaves no output half-written.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln {

// A shape mismatch found at call time. The message names the op and the shapes involved,
// e.g. "matmul: inner dimensions differ: [64, 768] x [512, 3072]".
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A call that binds the wrong tensors in a way the types could not show.
struct BindingError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A value outside what an op accepts, found on the host before any kernel runs, e.g.
// "cross_entropy: the label of row 2 is 4, not a class index in [0, 4)".
struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// An index outside its range, found on the host before any kernel runs, e.g.
// "embedding: id 50257 at position 3 is not a row of the table [50257, 768]".
struct IndexError : std::out_of_range {
  using std::out_of_range::out_of_range;
};

// A file that cannot be read or written, or whose contents break its format (a safetensors
// header that points past the file, say). The message names the file and what is wrong.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A process group that cannot form or that broke (kiln::distributed): a rank that did not join
// or stopped answering within the timeout, a model or training arguments that differ between
// ranks, a malformed RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT. The message names the ranks.
struct DistributedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kiln
