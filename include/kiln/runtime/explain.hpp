// kiln: the plan as text. Each kernel on one line: its kind, the value it writes, the ops it
// fuses (in topological order) and what it reads from memory. After a call, the plan of the
// last input shapes: each kernel's traffic and operations, what was not run and why,
// MaxAutotune's choices, profiled times, the arena and what is assigned in place.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/lower/epilogue.hpp"
#include "kiln/lower/lower.hpp"
#include "kiln/runtime/plan.hpp"

namespace kiln::runtime {

template <class Program>
std::string node_label(int i) {
  const auto& n = Program::graph.nodes[i];
  if (n.kind == NodeKind::Symbol) return n.name;
  if (n.kind == NodeKind::Permute && !Program::plan.materialized[i]) {
    std::string axes;
    for (int d = 0; d < n.rank; ++d) axes += (d ? ", " : "") + std::to_string(n.perm[d]);
    return "permute<" + axes + ">(" + node_label<Program>(n.children[0]) + ")";
  }
  if ((n.kind == NodeKind::Reshape || n.kind == NodeKind::ReshapeLike) && !Program::plan.materialized[i])
    return "reshape(" + node_label<Program>(n.children[0]) + ")";
  if (n.kind == NodeKind::Unsqueeze && !Program::plan.materialized[i]) return "unsqueeze(" + node_label<Program>(n.children[0]) + ")";
  return "%" + std::to_string(i);
}

template <class Program, int G>
std::string explain_kernel() {
  constexpr auto& ki = Program::template kernel_info<G>;
  const auto& g = Program::graph;
  const auto& grp = ki.group;
  std::string kind;
  switch (grp.kind) {
    case schedule::KernelKind::Row:
      kind = grp.copy ? "copy" : grp.nstages ? "row reduction" : "pointwise";
      break;
    case schedule::KernelKind::Gemm:
      kind = "gemm + epilogue";
      break;
    case schedule::KernelKind::AxisReduce:
      kind = "axis reduction";
      break;
    case schedule::KernelKind::TotalReduce:
      kind = "total reduction";
      break;
    case schedule::KernelKind::ReduceTo:
      kind = "sum to shape";
      break;
    case schedule::KernelKind::AxisCopy:
      kind = "axis copy";
      break;
    case schedule::KernelKind::Attention:
      kind = "attention";
      break;
    case schedule::KernelKind::Convert:
      kind = "cast";
      break;
    case schedule::KernelKind::Dropout:
      kind = "dropout";
      break;
    case schedule::KernelKind::IndexRows:
      kind = g.nodes[grp.root].scatter ? "scatter-add rows" : "gather rows";
      break;
  }
  std::string ops;
  for (int i = 0; i < Program::size; ++i) {
    if (Program::plan.group_of[i] != G || grp.copy) continue;
    ops += (ops.empty() ? "" : ", ") + std::string(g.nodes[i].name);
  }
  if (grp.copy) ops = "copy";
  std::string recomputed;  // values this kernel evaluates again instead of reading them
  for (int i = 0; i < Program::size; ++i)
    if (Program::plan.recompute[i] && Program::plan.recomputed_in(i, G))
      recomputed += (recomputed.empty() ? "" : ", ") + ("%" + std::to_string(i) + " " + g.nodes[i].name);
  std::vector<std::string> reads;
  auto read = [&](const std::string& l) {
    if (std::find(reads.begin(), reads.end(), l) == reads.end()) reads.push_back(l);
  };
  for (int s = 0; s < ki.nloads; ++s) {
    const int n = ki.load_node[s];
    if (grp.kind == schedule::KernelKind::Gemm && n == grp.gemm) continue;  // its own accumulator
    const bool copied_view = grp.copy && n == grp.root && g.nodes[n].kind != NodeKind::Symbol;
    read(node_label<Program>(copied_view ? g.nodes[n].children[0] : n));
  }
  if (grp.kind == schedule::KernelKind::Gemm)
    for (int c = 0; c < 2; ++c) read(node_label<Program>(g.nodes[grp.gemm].children[c]));
  if (ki.index_node >= 0) read(node_label<Program>(ki.index_node));
  std::string read_list;
  for (const auto& l : reads) read_list += (read_list.empty() ? "" : ", ") + l;
  auto label = [&](int root) {
    std::string o = "%" + std::to_string(root);
    for (int k = 0; k < Program::graph_type::noutputs; ++k)
      if (g.outputs[k] == root) o += " (output " + std::to_string(k) + ")";
    return o;
  };
  std::string out = label(grp.root);
  for (int e = 0; e < grp.nextra; ++e)
    out += ", " + label(Program::plan.groups[grp.extra[e]].root) + " of kernel " + std::to_string(grp.extra[e]);
  if (grp.merged_into >= 0) kind += " (merged into kernel " + std::to_string(grp.merged_into) + " where the shapes agree)";
  if (grp.folded_into >= 0)
    kind += " (on CUDA, of kernel " + std::to_string(grp.folded_into) + "'s GEMM where the shapes agree: a bias gradient)";
  if (grp.bias_grad >= 0)
    out += ", on CUDA " + label(Program::plan.groups[grp.bias_grad].root) + " of kernel " + std::to_string(grp.bias_grad) +
           " (the column sums of B, cuBLASLt's BGRADA)";
  std::string recipe;  // a GEMM's epilogue, as the backends classify it
  if constexpr (ki.group.kind == schedule::KernelKind::Gemm)
    recipe = std::string("; epilogue ") + lower::describe(lower::gemm_recipe<typename Program::template kernel<G>>::kind);
  return "  kernel " + std::to_string(G) + ": " + kind + " -> " + out + " = [" + ops + "]; reads " +
         (read_list.empty() ? "nothing" : read_list) + (recomputed.empty() ? "" : "; recomputes " + recomputed) + recipe +
         "\n";
}

template <class Program>
std::string explain(const std::string& policy) {
  std::string s = "kiln plan (" + policy + "): " + std::to_string(Program::nkernels) +
                  (Program::nkernels == 1 ? " kernel\n" : " kernels\n");
  lower::for_each_index<Program::nkernels>([&](auto g) { s += explain_kernel<Program, decltype(g)::value>(); });
  return s;
}

// The part of explain() that describes the plan of one shape signature.
template <class F>
std::string explain_shapes(const ShapePlan<F>& st, std::size_t saved_bytes) {
  using program = typename F::program;
  std::string s = st.device.is_cuda() ? "on " + st.device.str() + ", for input shapes" : "for input shapes";
  for (int i = 0; i < F::kSymbols; ++i) s += std::string(i ? ", " : " ") + F::symbol_name(i) + " " + st.key[i].str();
  s += ":\n";
  for (int g = 0; g < F::nkernels; ++g) {
    char line[200];
    std::snprintf(line, sizeof line, "  kernel %d: reads %.3g MB, writes %.3g MB, %.3g Mop", g, st.read_bytes[g] / 1e6,
                  st.write_bytes[g] / 1e6, st.ops[g] / 1e6);
    s += line;
    if (st.skip[g] == Skip::Merged) s += "; runs inside kernel " + std::to_string(program::plan.groups[g].merged_into);
    if (st.skip[g] == Skip::Identity) s += "; not run: its input has its shape, and is read in its place";
    if (st.skip[g] == Skip::Reshaped) s += "; not run: the kernel of its input writes the output, a reshape of it, directly";
    if (st.skip[g] == Skip::Folded)
      s += "; computed by kernel " + std::to_string(program::plan.groups[g].folded_into) + "'s GEMM (cuBLASLt's BGRADA)";
    if (st.profiled_calls > 0) {
      const double ms = st.profile_ms[g] / static_cast<double>(st.profiled_calls);
      double total = 0;
      for (int k = 0; k < F::nkernels; ++k) total += st.profile_ms[k];
      std::snprintf(line, sizeof line, "; %.3f ms per call (%.0f%%), %.1f GB/s", ms, 100 * st.profile_ms[g] / total,
                    (st.read_bytes[g] + st.write_bytes[g]) / (ms * 1e6));
      s += line;
    }
    s += "\n";
    if (!st.backend_notes[g].empty()) s += "    " + st.backend_notes[g] + "\n";
    if (!st.tune_notes[g].empty()) s += "    autotune: " + st.tune_notes[g] + "\n";
  }
  s += "  arena: " + std::to_string(st.arena_bytes) + " bytes\n";
  if (F::NOut > 1) {
    std::string saved;
    for (int n : F::saved_nodes()) saved += " %" + std::to_string(n) + " " + st.shapes[n].str();
    s += "  saved between output 0's kernels and the others: " + std::to_string(saved_bytes) + " bytes" +
         (saved.empty() ? "" : ":" + saved) + "\n";
  }
  std::string in_place;
  lower::for_each_index<F::nkernels>([&](auto gi) {
    constexpr int G = decltype(gi)::value;
    const auto& pr = st.template slot<G>();
    if (!pr.writes_input) return;
    for (int b : pr.output_buffers())
      if (b >= 0 && b < F::kSymbols) in_place += " " + std::string(F::symbol_name(b)) + " (kernel " + std::to_string(G) + ")";
  });
  if (!in_place.empty()) s += "  assigned in place, without a copy:" + in_place + "\n";
  return s;
}

}  // namespace kiln::runtime
