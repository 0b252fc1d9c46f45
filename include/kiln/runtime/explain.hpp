// kiln: the plan as text. Each kernel on one line: its kind, the value it writes, the ops it
// fuses (in topological order) and what it reads from memory.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/lower/lower.hpp"

namespace kiln::runtime {

template <class Program>
std::string node_label(int i) {
  const auto& n = Program::graph.nodes[i];
  if (n.kind == NodeKind::Symbol) return n.name;
  if (n.kind == NodeKind::Transpose) return "transpose(" + node_label<Program>(n.children[0]) + ")";
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
  return "  kernel " + std::to_string(G) + ": " + kind + " -> " + out + " = [" + ops + "]; reads " +
         (read_list.empty() ? "nothing" : read_list) + (recomputed.empty() ? "" : "; recomputes " + recomputed) + "\n";
}

template <class Program>
std::string explain(const std::string& policy) {
  std::string s = "kiln plan (" + policy + "): " + std::to_string(Program::nkernels) +
                  (Program::nkernels == 1 ? " kernel\n" : " kernels\n");
  lower::for_each_index<Program::nkernels>([&](auto g) { s += explain_kernel<Program, decltype(g)::value>(); });
  return s;
}

}  // namespace kiln::runtime
