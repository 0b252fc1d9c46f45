// kiln: running a plan on the CPU. The arena is allocated per call (Default) or kept with the
// plan (persistent policies: ReduceOverhead, MaxAutotune, CudaGraphs); kernels run in plan
// order on the calling thread's OpenMP team. Under MaxAutotune the first call times each
// kernel's launch candidates on its own data and keeps the fastest (cached on disk).
//
// A call throws only before its first kernel: the arena and every workspace are allocated
// before it (workspaces when the plan is built), ids are checked against their tables
// before it, and MaxAutotune reads the on-disk cache for
// every kernel before it too. Tuning a kernel that the cache did not answer runs between
// kernels; it catches its own failures (an allocation, a cache write) and then runs the kernel
// with Default's configuration.
#pragma once
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>

#include "kiln/backend/cpu/kernels.hpp"
#include "kiln/runtime/autotune.hpp"
#include "kiln/runtime/binding.hpp"
#include "kiln/runtime/plan.hpp"

namespace kiln::runtime {

// A kernel that reads integer indices (the index-rows kind), whose ids are checked before a call.
// A named concept: nvcc's front end rejects the requires-expression inside the executor's lambda.
template <class Desc>
concept IndexReadingKernel = requires { typename Desc::index_type; };

// Points kernel pr's arguments at this call's buffers (either device).
template <class Desc, class Slot, class Ptrs>
void bind_pointers(Slot& pr, const Ptrs& ptr) {
  using T = typename Desc::value_type;
  auto& ra = pr.row_args();
  for (int s = 0; s < Desc::nloads; ++s) ra.ptr[s] = static_cast<const T*>(ptr[pr.load_buffer[s]]);
  ra.out = static_cast<T*>(ptr[pr.out_buffer]);
  if constexpr (requires { pr.args.extra_out; })
    for (int e = 0; e < Desc::nextra; ++e)
      pr.args.extra_out[e] = pr.extra_buffer[e] >= 0 ? static_cast<T*>(ptr[pr.extra_buffer[e]]) : nullptr;
  if constexpr (requires { pr.args.to; })  // a convert kernel's output, of its own type
    pr.args.to = static_cast<typename Desc::out_type*>(ptr[pr.out_buffer]);
  if constexpr (requires { pr.args.ids; })
    pr.args.ids = static_cast<const typename Desc::index_type*>(ptr[pr.index_buffer]);
  if constexpr (requires { pr.args.epilogue; }) {
    pr.args.a.ptr = static_cast<const T*>(ptr[pr.a_buffer]);
    pr.args.b.ptr = static_cast<const T*>(ptr[pr.b_buffer]);
    pr.args.acc = static_cast<T*>(ptr[pr.acc_buffer]);
  }
}

// The choice as explain() prints it: Default's configuration kept is said so, with the margin.
inline std::string defaults_note(const std::string& described) { return "Default's configuration (" + described + ")"; }
inline std::string chosen_note(const TuneChoice& choice, const std::string& described) {
  if (!choice.kept_default()) return described;
  return defaults_note(described) + ": no candidate faster by more than " +
         std::to_string(static_cast<int>(kTuneMargin * 100 + 0.5)) + "%";
}

template <class F, class Policy>
class CpuExecutor {
 public:
  using Plan = ShapePlan<F>;
  static constexpr int nkernels = F::nkernels;
  static constexpr bool kScalarsFirst = false;
  using Ptrs = std::array<void*, F::kMaxBuffers>;

  // What the CPU keeps per plan: each kernel's workspace, and the arena of persistent policies.
  struct State {
    using workspaces = decltype([]<int... G>(std::integer_sequence<int, G...>) {
      return std::tuple<cpu::workspace_t<typename Plan::template desc<G>>...>{};
    }(std::make_integer_sequence<int, nkernels>{}));
    workspaces ws;
    std::unique_ptr<std::byte[], detail::AlignedDelete> arena;
  };

  static void refine(Plan&, const GroupBuffers<F>&) {}

  // After the plan is built: workspaces for its shapes, and a persistent arena.
  static void prepare(Plan& st, State& cs) {
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      cpu::prepare<typename Plan::template desc<G>>(st.template slot<G>().args, std::get<G>(cs.ws));
    });
    if (Policy::persistent && st.arena_bytes > 0) cs.arena = allocate(st.arena_bytes);
  }

  // Runs every kernel; the inputs' and outputs' pointers are in ptr already.
  static void run(Plan& st, State& cs, const Inputs<F::kSymbols>& in, Ptrs& ptr, bool profiling, AutotuneStats& stats) {
    // MaxAutotune's first call: the cached choices, read before any kernel runs.
    std::array<bool, F::kArray> from_cache{};
    if constexpr (Policy::autotune) {
      if (!st.tuned) load_choices(st, cs, stats, from_cache);
    }
    std::unique_ptr<std::byte[], detail::AlignedDelete> call_arena;  // Default: per call
    std::byte* arena = cs.arena.get();
    if (!arena && st.arena_bytes > 0) {
      call_arena = allocate(st.arena_bytes);
      arena = call_arena.get();
    }
    for (std::size_t b = F::kFirstArenaBuffer; b < st.buffers.size(); ++b) ptr[b] = arena + st.buffers[b];
    // Indices (an embedding's ids) against what they index, before any kernel writes. The ids
    // are always inputs (is_index_input_v, expr/node.hpp), so they are readable now.
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      if constexpr (IndexReadingKernel<Desc>) {
        auto& pr = st.template slot<G>();
        if (!st.runs(G)) return;
        bind_pointers<Desc>(pr, ptr);
        cpu::check_indices<Desc>(pr.args);
      }
    });
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      auto& pr = st.template slot<G>();
      auto& ws = std::get<G>(cs.ws);
      if (!st.runs(G)) return;  // merged into a later kernel, an identity
      bind_pointers<Desc>(pr, ptr);
      if constexpr (Policy::autotune) {
        if (!st.tuned && !pr.writes_input && !from_cache[G]) tune<G>(st, ws, stats);
      }
      if (profiling) {
        const auto t0 = std::chrono::steady_clock::now();
        cpu::run<Desc>(pr.args, ws);
        st.profile_ms[G] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      } else {
        cpu::run<Desc>(pr.args, ws);
      }
    });
    st.profiled_calls += profiling;
    st.tuned = true;
    // While a per-call arena is still alive.
    finish_outputs<F>(st, in, ptr, [](void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); });
  }

 private:
  static std::unique_ptr<std::byte[], detail::AlignedDelete> allocate(std::size_t bytes) {
    return std::unique_ptr<std::byte[], detail::AlignedDelete>(static_cast<std::byte*>(detail::aligned_alloc_bytes(bytes)),
                                                               detail::AlignedDelete{bytes});
  }

  template <int G>
  static std::string tune_key(const Plan& st) {
    using Desc = typename Plan::template desc<G>;
    return machine_id() + " | " + std::string(type_name<Desc>()) + " | " + kernel_signature(st.template slot<G>());
  }

  // MaxAutotune, before the first kernel of the first call: every tuned kernel's choice found
  // in the on-disk cache is applied (the key is made of shapes and strides, known with the
  // plan). A cache that cannot be read answers nothing (AutotuneCache::load does not throw);
  // an exception here (no memory for a workspace) leaves the call before any kernel ran.
  static void load_choices(Plan& st, State& cs, AutotuneStats& stats, std::array<bool, F::kArray>& from_cache) {
    const AutotuneCache cache;
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      auto& pr = st.template slot<G>();
      if (!st.runs(G) || pr.writes_input) return;
      const auto hit = cache.load(tune_key<G>(st));
      if (!hit) return;
      if (!offered(hit->config, cpu::candidates<Desc>(pr.args))) return warn_not_offered(hit->config);
      pr.args.config = hit->config;
      cpu::prepare<Desc>(pr.args, std::get<G>(cs.ws));
      from_cache[G] = true;
      ++stats.from_cache;
      st.tune_notes[G] = describe(hit->config) + ", from the cache (" + std::to_string(hit->ms) + " ms when tuned)";
    });
  }

  // MaxAutotune: time each launch candidate of kernel G on this call's data (kernels are pure:
  // running one again rewrites the same values) and keep the fastest; write the on-disk cache.
  // Runs between kernels, so it throws nothing: on a failure (no memory for a candidate's
  // workspace or for the notes) the kernel keeps Default's configuration, for which its
  // workspace was reserved with the plan (workspaces only grow, and a failed growth leaves them
  // as they were).
  template <int G, class WS>
  static void tune(Plan& st, WS& ws, AutotuneStats& stats) noexcept {
    auto& pr = st.template slot<G>();
    try {
      tune_candidates<G>(st, ws, stats);
    } catch (...) {
      pr.args.config = lower::LaunchConfig{};
      try {
        cpu::prepare<typename Plan::template desc<G>>(pr.args, ws);
        st.tune_notes[G] = defaults_note(describe(lower::LaunchConfig{})) + ": tuning failed";
      } catch (...) {
      }
    }
  }

  template <int G, class WS>
  static void tune_candidates(Plan& st, WS& ws, AutotuneStats& stats) {
    using Desc = typename Plan::template desc<G>;
    auto& pr = st.template slot<G>();
    auto use = [&](const lower::LaunchConfig& c) {
      pr.args.config = c;
      cpu::prepare<Desc>(pr.args, ws);
    };
    const std::string key = tune_key<G>(st);
    const AutotuneCache cache;
    TuneChoice choice;
    std::string notes;
    const auto time_config = [&](const lower::LaunchConfig& c) {
      use(c);
      return time_ms([&] { cpu::run<Desc>(pr.args, ws); });
    };
    choice.offer_default(time_config(lower::LaunchConfig{}));
    notes = defaults_note(describe(lower::LaunchConfig{})) + " " + std::to_string(choice.incumbent.ms) + " ms";
    for (const lower::LaunchConfig& c : cpu::candidates<Desc>(pr.args)) {
      const double ms = time_config(c);
      notes += "; " + describe(c) + " " + std::to_string(ms) + " ms";
      choice.offer(c, ms);
    }
    const TuneRecord best = choice.chosen();
    use(best.config);
    cache.store(key, best);
    st.tune_notes[G] = "chose " + chosen_note(choice, describe(best.config)) + "; candidates: " + notes;
    ++stats.tuned;
  }
};

}  // namespace kiln::runtime
