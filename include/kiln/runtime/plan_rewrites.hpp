// kiln: the rewrites of a plan that Planner::build (runtime/planner.hpp) applies once the
// buffers and faces are set: kernels not run for these shapes (identities, values written by
// another kernel, merges into a kernel of several outputs) and kiln::assign targets written in
// place. Each moves the readers of a buffer to another and frees the arena buffer it no longer
// needs; explain() names the reason each kernel was skipped (runtime/plan.hpp's Skip).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/runtime/kind_args.hpp"
#include "kiln/runtime/plan.hpp"

namespace kiln::runtime {

template <class F>
struct PlanRewrites {
  using Plan = ShapePlan<F>;
  using program = typename F::program;
  static constexpr int NOut = F::NOut, nkernels = F::nkernels, kSymbols = F::kSymbols;
  static constexpr const auto& graph() { return F::graph(); }
  static constexpr const auto& plan() { return F::plan(); }

  // Every face and output that reads buffer `from` reads buffer `to` instead.
  static void move_readers(Plan& st, int from, int to) {
    for (auto& f : st.faces) f.buffer = f.buffer == from ? to : f.buffer;
    for (auto& f : st.view_faces) f.buffer = f.buffer == from ? to : f.buffer;
    for (int& o : st.output_source) o = o == from ? to : o;
  }

  // A sum_to that sums nothing (its input already has its shape: the gradient of a bias add
  // that did not broadcast, say) is its input. Where the input is stored contiguously and the
  // value is not an output, its readers read the input's buffer and the kernel is not run. So is
  // one of expand_as(x) where x has the shape already (a vjp's cotangent, which kiln::vjp
  // broadcasts to the value's shape: the same shape when the caller gives it whole).
  static void skip_identities(Plan& st, const GroupBuffers<F>& group_out, std::vector<ArenaRequest>& arena) {
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int G = decltype(gi)::value;
      constexpr auto& ki = program::template kernel_info<G>;
      if constexpr (ki.group.kind == schedule::KernelKind::ReduceTo) {
        using Desc = typename Plan::template desc<G>;
        using Tree = typename Desc::tree;
        if constexpr (Desc::nloads == 1 &&
                      (std::is_same_v<Tree, lower::LLoad<0>> || std::is_same_v<Tree, lower::LOp<ExpandAs, lower::LLoad<0>>>)) {
          const int root = ki.group.root, in = ki.load_node[0], b = group_out[G];
          // Not an output (returned, or assigned: that value is copied from its buffer after
          // the last kernel), and a real identity for these shapes.
          if (graph().is_output[root] || !(st.shapes[in] == st.shapes[root])) return;
          const Face& fi = st.faces[in];
          index_t c[kMaxRank] = {};
          contiguous_strides(st.shapes[in], c);
          for (int d = 0; d < st.shapes[in].rank(); ++d)
            if (fi.strides[d] != c[d] && st.shapes[in][d] != 1) return;
          if (fi.buffer < 0) return;
          move_readers(st, b, fi.buffer);
          arena[static_cast<std::size_t>(b - F::kFirstArenaBuffer)].bytes = 0;
          st.skip[G] = Skip::Identity;
        }
      }
    });
  }

  // A returned output that is a reshape of a value stored in the arena (the heads' layout of a
  // GEMM's output kept for the backward pass, say) would be a copy of that value: instead the
  // value's kernel writes the output's tensor, whose elements are the same in the same order,
  // and the value's readers read it there. The value must be contiguous, no output itself, and
  // the only value reshaped into an output so.
  static void write_reshaped_outputs(Plan& st, GroupBuffers<F>& group_out, std::vector<ArenaRequest>& arena) {
    for (int k = 0; k < NOut; ++k) {
      const int node = graph().outputs[k], g = plan().group_of[node];
      const auto& n = graph().nodes[node];
      if (F::kAssignTarget[k] >= 0 || g < 0 || !plan().groups[g].copy || plan().groups[g].root != node ||
          !st.runs(g) || (n.kind != NodeKind::Reshape && n.kind != NodeKind::ReshapeLike))
        continue;
      const int src = n.children[0], gs = plan().group_of[src];
      if (!plan().materialized[src] || gs < 0 || plan().groups[gs].root != src || graph().is_output[src]) continue;
      const int b = group_out[gs], out = group_out[g];
      if (b < F::kFirstArenaBuffer || out != kSymbols + k) continue;
      move_readers(st, b, out);
      group_out[gs] = out;
      arena[static_cast<std::size_t>(b - F::kFirstArenaBuffer)].bytes = 0;
      st.skip[g] = Skip::Reshaped;
    }
  }

  // Multiple outputs: kernel A merged into B (the schedule's merged_into) runs inside B when A's
  // root has B's root's shape for these inputs; B then writes A's root (an extra output) and A
  // is not run. Otherwise A runs, and B evaluates A's value again from A's inputs (its tree has
  // them inlined either way).
  static void merge_kernels(Plan& st, const GroupBuffers<F>& group_out) {
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int B = decltype(gi)::value;
      constexpr auto& grp = plan().groups[B];
      auto& pr = st.template slot<B>();
      for (int e = 0; e < grp.nextra; ++e) {
        const int a = grp.extra[e];
        const bool merged = st.shapes[plan().groups[a].root] == st.shapes[grp.root];
        pr.extra_buffer[e] = merged ? group_out[a] : -1;
        if (!merged) continue;
        st.skip[a] = Skip::Merged;
        st.write_bytes[B] += st.write_bytes[a];  // B stores A's value (A's counts are zeroed in build)
      }
    });
  }

  // kiln::assign without a copy: the value is written straight into the target's tensor when
  // its kernel is a pointwise one that reads the target's old value (if at all) only at the
  // element it writes, or a write_slice of the target itself (which then writes the window
  // only), and no later kernel reads that old value. Then the arena buffer the value had is not
  // needed. (The compiled object makes sure no other symbol is bound to the target's tensor.)
  static void assign_in_place(Plan& st, GroupBuffers<F>& group_out, std::vector<ArenaRequest>& arena,
                              std::vector<bool>& keep_to_end) {
    for (int k = 0; k < NOut; ++k) {
      const int s = F::kAssignTarget[k];
      if (s < 0) continue;
      const int node = graph().outputs[k];
      const int own = plan().group_of[node];
      if (own < 0) continue;
      const int b = group_out[own];
      if (b < F::kFirstArenaBuffer) continue;  // also a returned output: that tensor is written
      // The kernel that writes the value: its own, or the one it is merged into.
      const int g = st.skip[own] == Skip::Merged ? plan().groups[own].merged_into : own;
      bool ok = true;
      for (int j = 0; j < NOut; ++j)
        ok = ok && (j == k || F::kAssignTarget[j] != s) && (j == k || graph().outputs[j] != node);
      const auto& grp = plan().groups[own];
      const auto& n = graph().nodes[node];
      const bool window = grp.kind == schedule::KernelKind::AxisCopy && grp.root == node &&
                          n.copy_form == static_cast<std::uint8_t>(AxisCopyForm::WriteAt) &&
                          graph().nodes[n.children[0]].kind == NodeKind::Symbol && st.faces[n.children[0]].buffer == s &&
                          st.faces[n.children[1]].buffer != s;
      ok = ok && (window || (grp.kind == schedule::KernelKind::Row && grp.nstages == 0 && !grp.copy && grp.root == node));
      lower::for_each_index<nkernels>([&](auto gi) {
        constexpr int G = decltype(gi)::value;
        constexpr auto& ki = program::template kernel_info<G>;
        const auto& pr = st.template slot<G>();
        if (!st.runs(G)) return;
        for (int l = 0; l < Plan::template desc<G>::nloads; ++l) {
          if (pr.load_buffer[l] != s) continue;
          if (G > g) ok = false;  // read after the update
          if (G == g && !(graph().nodes[ki.load_node[l]].kind == NodeKind::Symbol && st.shapes[ki.load_node[l]] == st.shapes[node]))
            ok = false;  // read at other elements (a broadcast or a view)
        }
        if (G > g && (pr.a_buffer == s || pr.b_buffer == s)) ok = false;
      });
      if (!ok) continue;
      lower::for_each_index<nkernels>([&](auto gi) {
        constexpr int G = decltype(gi)::value;
        auto& pr = st.template slot<G>();
        if (pr.out_buffer == b) pr.out_buffer = s;
        for (int& x : pr.extra_buffer) x = x == b ? s : x;
        for (int& l : pr.load_buffer) l = l == b ? s : l;
        const std::array<int*, 3> operands{&pr.a_buffer, &pr.b_buffer, &pr.acc_buffer};
        for (int* x : operands) *x = *x == b ? s : *x;
        if (G == g) pr.writes_input = true;
        if constexpr (program::template kernel_info<G>.group.kind == schedule::KernelKind::AxisCopy)
          if (G == g && window) make_window_only<typename Plan::template desc<G>>(st, G, program::template kernel_info<G>, st.faces[n.children[0]], pr);
      });
      move_readers(st, b, s);
      group_out[own] = s;
      const std::size_t a = static_cast<std::size_t>(b - F::kFirstArenaBuffer);
      arena[a].bytes = 0;
      if (a < keep_to_end.size()) keep_to_end[a] = false;
    }
  }
};

}  // namespace kiln::runtime
