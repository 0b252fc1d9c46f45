// kiln: the plan of one shape signature, device-neutral. Given the input shapes, build_plan
// (runtime/planner.hpp) infers every node's shape, gives each stored value a buffer (the
// inputs, the outputs, or an offset in one arena planned by liveness), and fills each kernel's
// arguments (lower/args.hpp) with extents, strides and constants; pointers are bound per call.
// It runs no kernel and touches no device: tests build plans and read them directly.
//
// Kernels a plan does not run for its shapes (ShapePlan::skip):
// - Merged: a kernel merged into a later one (the schedule's merged_into) whose shape it has;
//   that one writes its root as an extra output (merge_kernels).
// - Identity: a sum_to whose input already has its shape; its readers read the input
//   (skip_identities).
// - Folded: a bias gradient that a backend computes inside its GEMM; the backend decides this
//   in build_plan's refine step (the CUDA executor, with cuBLASLt's BGRADA epilogue).
#pragma once
#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/lower/args.hpp"
#include "kiln/runtime/memory.hpp"
#include "kiln/runtime/program_facts.hpp"
#include "kiln/runtime/shapes.hpp"

namespace kiln::runtime {

// One kernel's arguments, with the buffer each pointer is taken from at call time.
template <class Desc>
struct KernelSlot {
  lower::args_t<Desc> args{};
  int load_buffer[Desc::nloads > 0 ? Desc::nloads : 1] = {};
  int out_buffer = -1, a_buffer = -1, b_buffer = -1, acc_buffer = -1;
  int index_buffer = -1;  // an index-rows kernel's ids
  // A pointwise kernel's extra outputs (the roots of kernels merged into it), or a GEMM's bias
  // gradient (extra_buffer[0]: the root of the sum_to kernel folded into it); -1 where that
  // kernel runs on its own for these shapes.
  int extra_buffer[schedule::kMaxExtra] = {-1, -1, -1, -1};
  bool writes_input = false;  // an in-place kiln::assign: running it twice would update twice

  auto& row_args() { return lower::row_part(args); }
  const auto& row_args() const { return lower::row_part(args); }
  std::array<int, 1 + schedule::kMaxExtra> output_buffers() const {
    std::array<int, 1 + schedule::kMaxExtra> b{out_buffer};
    for (int e = 0; e < schedule::kMaxExtra; ++e) b[1 + e] = extra_buffer[e];
    return b;
  }
};

enum class Skip : std::uint8_t { No, Merged, Identity, Folded, Reshaped };

template <class Facts>
struct ShapePlan {
  using F = Facts;
  using program = typename F::program;
  using kernel_tuple = decltype([]<int... G>(std::integer_sequence<int, G...>) {
    return std::tuple<KernelSlot<typename program::template kernel<G>>...>{};
  }(std::make_integer_sequence<int, F::nkernels>{}));
  template <int G>
  using desc = typename program::template kernel<G>;

  Device device = Device::cpu();
  std::vector<Shape> key;     // the input shapes this plan is for
  std::vector<Shape> shapes;  // every node's shape
  std::vector<Face> faces, view_faces;
  std::vector<std::size_t> buffers;  // every buffer's arena offset (arena buffers only)
  std::size_t arena_bytes = 0;
  kernel_tuple kernels;
  std::array<int, F::NOut> output_source{};  // the buffer each output's value is written to
  std::array<Skip, F::kArray> skip{};
  // explain()'s counts: each kernel's traffic and operations; out_bytes is its root's bytes.
  std::array<double, F::kArray> read_bytes{}, write_bytes{}, ops{}, out_bytes{};

  // What the executor observed running it: MaxAutotune's choices, profiling.
  bool tuned = false;
  std::array<std::string, F::kArray> tune_notes;
  std::array<std::string, F::kArray> backend_notes;  // what a backend chose at plan time (a GEMM's library algorithm)
  std::array<double, F::kArray> profile_ms{};  // summed over profiled calls
  long profiled_calls = 0;

  bool runs(int g) const { return skip[g] == Skip::No; }
  template <int G>
  auto& slot() { return std::get<G>(kernels); }
  template <int G>
  const auto& slot() const { return std::get<G>(kernels); }
  std::size_t node_bytes(int node) const { return shapes[node].numel() * F::kElementSize[node]; }
};

// The shape part of an autotune key: every extent and stride a kernel runs with.
template <class Slot>
std::string kernel_signature(const Slot& pr) {
  const auto& ra = pr.row_args();
  std::string s = "rows";
  for (int d = 0; d < ra.nrow_dims; ++d) s += " " + std::to_string(ra.row_dims[d]);
  s += " len " + std::to_string(ra.len) + " inner";
  for (auto v : ra.inner) s += " " + std::to_string(v);
  for (const auto& o : ra.outer) {
    s += " outer";
    for (int d = 0; d < ra.nrow_dims; ++d) s += " " + std::to_string(o[d]);
  }
  for (auto v : ra.stage_len) s += " stage " + std::to_string(v);
  // Kernels merged into this one: whether each extra output is stored is part of what was
  // timed (absent where none is, so earlier keys stay valid).
  std::string extras;
  for (int e : pr.extra_buffer) extras += e >= 0 ? " 1" : " 0";
  if (extras.find('1') != std::string::npos) s += " extras" + extras;
  if constexpr (requires { pr.args.epilogue; }) {
    const auto& g = pr.args;
    s += " gemm " + std::to_string(g.batch) + "x" + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
         std::to_string(g.k) + " a " + std::to_string(g.a.batch) + "," + std::to_string(g.a.row) + "," +
         std::to_string(g.a.col) + " b " + std::to_string(g.b.batch) + "," + std::to_string(g.b.row) + "," +
         std::to_string(g.b.col) + (g.in_place ? " in-place" : " scratch");
  }
  return s;
}

// The buffers build_plan hands its refine step: the one each kernel's root is written to.
template <class Facts>
using GroupBuffers = std::array<int, Facts::kArray>;

}  // namespace kiln::runtime
