// kiln: running a plan on a CUDA device. Kernels are launched on kiln's stream
// (cuda::stream()). Under persistent policies (ReduceOverhead, MaxAutotune, CudaGraphs) the
// arena is kept with the plan, the first call for a shape runs the kernels directly (and tunes,
// under MaxAutotune), and later calls replay a CUDA graph of them (run: in place, one per set of
// tensor addresses, or staged, the inputs and outputs copied through buffers of the plan). A
// call made while kiln's stream is being captured (a model's whole forward, or a training step,
// as one graph: models/model_graph.hpp, cuda::PooledGraph) enqueues its kernels into that
// capture.
//
// What the CUDA backend adds to the device-neutral plan, in refine: a cuBLASLt plan per GEMM,
// and bias gradients folded into their GEMM (cuBLASLt's BGRADA). Per call: the scalar kernels
// run first as one launch (cuda::ScalarBatch) where that is safe, and a small product may start
// while the kernel before it finishes (dependent launches).
#pragma once
#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/backend/cuda/gemm.hpp"
#include "kiln/backend/cuda/graphs.hpp"
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/runtime/cpu_executor.hpp"
#if defined(__CUDACC__)
#include "kiln/backend/cuda/kernels.cuh"
#endif

namespace kiln::runtime {

// A kernel's CUDA resources for one plan.
struct CudaKernelState {
  std::unique_ptr<cuda::GemmPlan> gemm_plan;  // GEMM kernels
  cuda::Buffer scratch;                        // a total reduction's partials
  lower::LaunchConfig config;                  // block size, variant (MaxAutotune's choice)
  void* bias_grad_out = nullptr;               // a GEMM's bias gradient (extra_buffer[0]), this call's
};

template <class F, class Policy>
class CudaExecutor {
 public:
  using Plan = ShapePlan<F>;
  static constexpr int nkernels = F::nkernels;
  static constexpr bool kScalarsFirst = true;
  using Ptrs = std::array<void*, F::kMaxBuffers>;

  struct State {
    std::array<CudaKernelState, F::kArray> kernels;
    cuda::Buffer device_arena;  // persistent policies
    long device_calls = 0;
    // Persistent policies' graphs (see run): those reading and writing every tensor where it
    // lives, keyed by all their addresses; those staging the inputs and returned outputs
    // through io_buffers (input symbol s at io_offset[s], returned output k at
    // io_offset[kSymbols + k]), keyed by the params' and assign targets' addresses.
    std::unique_ptr<cuda::GraphCache> graphs, staged_graphs;
    std::vector<const void*> first_key;  // the first call's addresses
    cuda::Buffer io_buffers;
    std::array<std::size_t, F::kSymbols + F::NOut + 1> io_offset{}, io_bytes{};
    long captures() const { return (graphs ? graphs->captures() : 0) + (staged_graphs ? staged_graphs->captures() : 0); }
    long replays() const { return (graphs ? graphs->replays() : 0) + (staged_graphs ? staged_graphs->replays() : 0); }
  };
  // Graphs kept per plan: in place (a few sets of addresses a benchmark or a decode loop
  // alternates among), staged (one per set of parameters: a stack of layers run by one
  // program, a per-parameter optimizer step).
  static constexpr std::size_t kInPlaceGraphs = 4, kStagedGraphs = 256;

  // Checked before planning: a GEMM's cuBLASLt algorithms are chosen on the current device.
  static void check_device(const Device& d) {
    if (cuda::current_device() != d.index)
      throw DeviceError("kiln: the bound tensors are on " + d.str() + ", the current device is cuda:" +
                        std::to_string(cuda::current_device()) + "; call cudaSetDevice first");
  }

  // cuBLASLt plans for the GEMMs, then the bias gradients they can write (fold_bias_gradients).
  static void refine(Plan& st, State& cs, const GroupBuffers<F>& group_out) {
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      if constexpr (requires { st.template slot<G>().args.epilogue; })
        cs.kernels[G].gemm_plan = cuda::make_gemm_plan<Desc>(st.template slot<G>().args);
    });
    fold_bias_gradients(st, cs, group_out);
    // What cuBLASLt offered, for explain(): where it runs the product (not kiln's small-product kernel).
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      if constexpr (requires { st.template slot<G>().args.epilogue; }) {
        const auto& k = cs.kernels[G];
        if (k.gemm_plan && (k.gemm_plan->bias_grad || !cuda::small_gemm_applies(st.template slot<G>().args, Desc::has_epilogue)))
          st.backend_notes[G] = cuda::describe(*k.gemm_plan);
      }
    });
  }

  // After the plan is built: each kernel's scratch, allocated once per shape signature.
  static void prepare(Plan& st, State& cs) {
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      std::size_t bytes = 0;
      if constexpr (!requires { st.template slot<G>().args.epilogue; }) bytes = cuda::scratch_bytes<Desc>(st.template slot<G>().args);
      if (bytes == 0) return;
      cs.kernels[G].scratch = cuda::Buffer(bytes, st.device.index);
      KILN_CUDA_CHECK(cudaMemsetAsync(cs.kernels[G].scratch.get(), 0, bytes, cuda::stream()));
    });
  }

  static void run(Plan& st, State& cs, const Inputs<F::kSymbols>& in, Ptrs& ptr, bool profiling, AutotuneStats& stats) {
    const int dev = in.device.index;
    cudaStream_t stream = cuda::stream();
    cuda::Buffer call_arena;
    std::byte* arena = nullptr;
    if constexpr (Policy::persistent) {
      if (!cs.device_arena.get() && st.arena_bytes > 0) cs.device_arena = cuda::Buffer(st.arena_bytes, dev);
      arena = static_cast<std::byte*>(cs.device_arena.get());
    } else {
      call_arena = cuda::Buffer(st.arena_bytes, dev);  // from the cache: no cudaMalloc in steady state
      arena = static_cast<std::byte*>(call_arena.get());
    }
    for (std::size_t b = F::kFirstArenaBuffer; b < st.buffers.size(); ++b) ptr[b] = arena + st.buffers[b];
    auto copy = [stream](void* dst, const void* src, std::size_t bytes) {
      if (bytes > 0) KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    };
    // Persistent policies replay a CUDA graph from the second call of a shape on (not while
    // tuning, profiling, inside a caller's capture or a cuda::DirectLaunches scope). Two kinds,
    // chosen per call:
    //   in place  the kernels read and write every tensor where it lives, so the graph is kept
    //             per set of all addresses (bound tensors and outputs). Taken when the call's
    //             addresses are a kept graph's, or (the first graph of the plan) the first
    //             call's: a benchmark or a loop over the same tensors, with no copy at all.
    //   staged    otherwise (fresh inputs or kept outputs on every call, as in a training or
    //             logging loop): the kiln::input values are copied into the plan's buffers
    //             before the launch and the returned outputs out of them after it, so the graph
    //             is kept per set of kiln::param (and assign-target) addresses only and replays
    //             whatever tensors the inputs arrive in.
    const bool graphed = Policy::persistent && cs.device_calls > 0 && !(Policy::autotune && !st.tuned) && !profiling &&
                         !cuda::direct_launches() && !cuda::capturing(stream);
    std::vector<const void*> key;
    if (Policy::persistent && (graphed || cs.device_calls == 0)) {
      key.assign(in.data.begin(), in.data.begin() + F::kSymbols);
      for (int k = 0; k < F::NOut; ++k) key.push_back(ptr[F::kSymbols + k]);
      if (cs.device_calls == 0) cs.first_key = key;
    }
    bool staged = false;
    std::array<void*, F::NOut + 1> returned{};
    if (graphed) {
      if (!cs.graphs) {
        cs.graphs = std::make_unique<cuda::GraphCache>(kInPlaceGraphs);
        cs.staged_graphs = std::make_unique<cuda::GraphCache>(kStagedGraphs);
      }
      staged = !cs.graphs->contains(key) && !(cs.graphs->size() == 0 && cs.staged_graphs->size() == 0 && key == cs.first_key);
    }
    if (staged) {
      graph_buffers(st, cs, in, dev);
      std::byte* io = static_cast<std::byte*>(cs.io_buffers.get());
      for (int s = 0; s < F::kSymbols; ++s)
        if (!F::kInPlace[s]) {
          copy(io + cs.io_offset[s], in.data[s], cs.io_bytes[s]);
          ptr[s] = io + cs.io_offset[s];
        }
      for (int k = 0; k < F::NOut; ++k)
        if (F::kAssignTarget[k] < 0) {
          returned[k] = ptr[F::kSymbols + k];
          ptr[F::kSymbols + k] = io + cs.io_offset[F::kSymbols + k];
        }
    }
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      auto& pr = st.template slot<G>();
      bind_pointers<Desc>(pr, ptr);
      if constexpr (requires { pr.args.epilogue; })
        cs.kernels[G].bias_grad_out = pr.extra_buffer[0] >= 0 ? ptr[pr.extra_buffer[0]] : nullptr;
    });
    auto launch_all = [&] {
      const bool batch = scalar_batch_safe(st, cs);
      if (batch) launch_scalar_batch(st, stream, std::make_index_sequence<F::kScalarKernels.count>{});
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if (!(batch && F::kScalarKernels.is[G]) && st.runs(G)) launch<G>(st, cs, stream);
      });
      finish_outputs<F>(st, in, ptr, copy);
    };
    if (Policy::autotune && !st.tuned) {
      // The first call of MaxAutotune: the choices in the on-disk cache read for every kernel
      // before the first one runs (a cache that cannot be read answers nothing, and reading it
      // throws nothing); then each other kernel tuned on the values the kernels before it just
      // computed (an in-place update is never run twice), then run with its choice.
      std::array<bool, F::kArray> from_cache{};
      load_choices(st, cs, stats, from_cache);
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if (!st.runs(G)) return;
        if (!st.template slot<G>().writes_input && !from_cache[G]) tune<G>(st, cs, stream, stats);
        launch<G>(st, cs, stream);
      });
      finish_outputs<F>(st, in, ptr, copy);
    } else if (profiling) {
      profile(st, cs, stream);
      finish_outputs<F>(st, in, ptr, copy);
    } else if (staged) {
      std::vector<const void*> in_place;
      for (int s = 0; s < F::kSymbols; ++s)
        if (F::kInPlace[s]) in_place.push_back(in.data[s]);
      cs.staged_graphs->run(in_place, stream, launch_all);
      for (int k = 0; k < F::NOut; ++k)
        if (F::kAssignTarget[k] < 0) copy(returned[k], ptr[F::kSymbols + k], cs.io_bytes[F::kSymbols + k]);
    } else if (graphed) {
      cs.graphs->run(key, stream, launch_all);
    } else {
      launch_all();
    }
    ++cs.device_calls;
    st.profiled_calls += profiling;
    st.tuned = true;
  }

 private:
  // The plan's input and output buffers of its graphs, allocated at its first graphed call (a
  // plan serves one shape signature, so their sizes never change).
  static void graph_buffers(const Plan& st, State& cs, const Inputs<F::kSymbols>& in, int dev) {
    if (cs.io_buffers.get()) return;
    std::size_t total = 0;
    const auto place = [&](int i, std::size_t bytes) {
      cs.io_offset[i] = total, cs.io_bytes[i] = bytes;
      total += (bytes + 255) / 256 * 256;
    };
    for (int s = 0; s < F::kSymbols; ++s)
      if (!F::kInPlace[s]) place(s, in.shapes[s].numel() * F::kElementSize[F::kSymbolNodes[s]]);
    for (int k = 0; k < F::NOut; ++k)
      if (F::kAssignTarget[k] < 0) place(F::kSymbols + k, st.node_bytes(F::graph().outputs[k]));
    cs.io_buffers = cuda::Buffer(total > 0 ? total : 1, dev);
  }

  template <int G>
  static void launch(Plan& st, State& cs, cudaStream_t stream) {
    using Desc = typename Plan::template desc<G>;
    auto& pr = st.template slot<G>();
    auto& k = cs.kernels[G];
    if constexpr (requires { pr.args.epilogue; })
      cuda::run_gemm<Desc>(pr.args, k.gemm_plan.get(), k.config, stream, overlap_previous<G>(st, cs), k.bias_grad_out);
    else cuda::launch<Desc>(pr.args, k.config, stream, k.scratch.get());
  }

  // Bias gradients (the schedule's bias_grad, schedule::fold_bias_gradients): GEMM kernel G
  // computes C = A B, and sum_to kernel R sums B over its rows. Where R runs (not an identity),
  // its root is one row of B's columns ([n] or [1, n]), G's B is that value stored row-major
  // (cuBLASLt's A, op N: BGRADA is not offered for op T) in one matrix, the product is not one for
  // the small-product kernel, and cuBLASLt offers its BGRADA epilogue for the product, G writes
  // R's root and R is not run. (MaxAutotune then times cuBLASLt's algorithms with the epilogue
  // only: kiln's tensor-core kernels write no sums.)
  static void fold_bias_gradients(Plan& st, State& cs, const GroupBuffers<F>& group_out) {
    lower::for_each_index<nkernels>([&](auto gi) {
      constexpr int G = decltype(gi)::value;
      constexpr int R = F::plan().groups[G].bias_grad;
      if constexpr (R >= 0) {
        using Desc = typename Plan::template desc<G>;
        auto& pr = st.template slot<G>();
        auto& k = cs.kernels[G];
        const auto& a = pr.args;
        const int sum = F::plan().groups[R].root, c = F::graph().nodes[sum].children[0];
        const Shape &bias = st.shapes[sum], &b = st.shapes[c];
        const auto n = static_cast<std::size_t>(a.n), kk = static_cast<std::size_t>(a.k);
        const bool one_row = bias.rank() == 1 ? bias[0] == n : bias[0] == 1 && bias[1] == n;
        // A product of a few rows keeps kiln's small-product kernel (it writes no sums).
        if (!st.runs(R) || !k.gemm_plan || k.gemm_plan->bias_slot >= 0 || !one_row || a.batch != 1 || b.rank() != 2 ||
            b[0] != kk || b[1] != n || pr.b_buffer != st.faces[c].buffer || a.b.col != 1 || a.b.row != a.n ||
            cuda::small_gemm_applies(a, Desc::has_epilogue))
          return;
        auto plan = cuda::make_gemm_plan<Desc>(a, /*bias_grad=*/true);
        if (!plan) return;  // cuBLASLt offers no algorithm with the epilogue: R runs
        k.gemm_plan = std::move(plan);
        pr.extra_buffer[0] = group_out[R];
        st.skip[R] = Skip::Folded;
        st.write_bytes[G] += st.write_bytes[R];
      }
    });
  }

  // The bytes kernel H writes: its output (write_bytes), and a GEMM's product when that is
  // stored apart. (The scalar batch and a small product's early start check against these.)
  struct Written {
    static constexpr int kMax = 2 + schedule::kMaxExtra;
    const std::byte* p[kMax] = {};
    std::size_t bytes[kMax] = {};
    bool overlaps(const void* q, std::size_t n) const {
      const auto* b = static_cast<const std::byte*>(q);
      for (int i = 0; i < kMax; ++i)
        if (p[i] && b < p[i] + bytes[i] && p[i] < b + n) return true;
      return false;
    }
  };
  template <int H>
  static Written written(const Plan& st, const State& cs) {
    const auto& a = st.template slot<H>().args;
    Written w;
    if (!st.runs(H)) return w;  // not run here (merged into a later kernel, or an identity)
    if constexpr (requires { a.epilogue; }) {
      using TA = std::remove_cvref_t<decltype(*a.acc)>;
      w.p[0] = reinterpret_cast<const std::byte*>(a.epilogue.out);
      w.p[1] = reinterpret_cast<const std::byte*>(a.acc);
      w.bytes[1] = sizeof(TA) * static_cast<std::size_t>(a.batch * a.m * a.n);
      if constexpr (F::plan().groups[H].bias_grad >= 0) {  // a bias gradient folded in: n sums
        w.p[2] = static_cast<const std::byte*>(cs.kernels[H].bias_grad_out);
        w.bytes[2] = sizeof(TA) * static_cast<std::size_t>(a.n);
      }
    } else {
      w.p[0] = reinterpret_cast<const std::byte*>(a.out);
    }
    w.bytes[0] = static_cast<std::size_t>(st.out_bytes[H]);
    if constexpr (requires { a.extra_out; })
      for (int e = 0; e < Plan::template desc<H>::nextra; ++e) {
        w.p[2 + e] = reinterpret_cast<const std::byte*>(a.extra_out[e]);
        w.bytes[2 + e] = w.bytes[0];  // the same shape as the root (the merge's condition)
      }
    return w;
  }

  // Running the scalar kernels first is the same as running them in plan order when none writes
  // an input in place (a kernel before it may read that) and no kernel before one writes what
  // it reads or where it writes (the arena may reuse its bytes for a value that dies before it
  // runs). Checked on this call's pointers.
  static bool scalar_batch_safe(const Plan& st, const State& cs) {
    if constexpr (F::kScalarKernels.count == 0) {
      return false;
    } else {
      std::array<Written, nkernels> w;
      lower::for_each_index<nkernels>([&](auto h) { w[decltype(h)::value] = written<decltype(h)::value>(st, cs); });
      bool safe = true;
      lower::for_each_index<nkernels>([&](auto g) {
        constexpr int G = decltype(g)::value;
        if constexpr (F::kScalarKernels.is[G]) {
          const auto& a = st.template slot<G>().args;
          using TG = std::remove_cvref_t<decltype(*a.out)>;
          if (st.template slot<G>().writes_input) safe = false;
          for (int h = 0; h < G; ++h) {
            if (w[h].overlaps(a.out, sizeof(TG))) safe = false;
            for (int s = 0; s < Plan::template desc<G>::nloads; ++s)
              if (w[h].overlaps(a.ptr[s], sizeof(TG))) safe = false;
          }
        }
      });
      return safe;
    }
  }

  template <int G, int... Rest, class Pack>
  static void fill_pack(const Plan& st, Pack& p) {
    p.head = st.template slot<G>().args;
    if constexpr (sizeof...(Rest) > 0) fill_pack<Rest...>(st, p.tail);
  }
  template <std::size_t... I>
  static void launch_scalar_batch(const Plan& st, cudaStream_t stream, std::index_sequence<I...>) {
    if constexpr (sizeof...(I) > 0) {
      using Batch = cuda::ScalarBatch<typename Plan::template desc<F::kScalarKernels.index[I]>...>;
      cuda::launch_args_t<Batch> pack{};
      fill_pack<F::kScalarKernels.index[I]...>(st, pack);
      cuda::launch<Batch>(pack, lower::LaunchConfig{}, stream, nullptr);
    }
  }

  // Whether GEMM kernel G may start while kernel G - 1 still runs (run_gemm's overlap_previous):
  // G - 1 writes no byte of B (its output, and a GEMM's product, are elsewhere). Never the
  // first kernel: the kernel before it on the stream is not this call's. Never after a scalar
  // kernel: batched (launch_scalar_batch), it ran first, and the kernel right before G on the
  // stream is an earlier one, which may write B and, launched as a dependent launch itself,
  // lets G start once it has waited for its own predecessor.
  template <int G>
  static bool overlap_previous(const Plan& st, const State& cs) {
    if constexpr (G == 0 || F::kScalarKernels.is[G > 0 ? G - 1 : 0]) {
      return false;
    } else {
      using T = typename Plan::template desc<G>::value_type;
      const auto& g = st.template slot<G>().args;
      if (!st.runs(G - 1)) return false;  // not launched: the kernel before G is an earlier one
      if (g.batch != 1 || g.k < 1 || g.n < 1 || g.b.col != 1) return false;  // B as the small product reads it
      return !written<G - 1>(st, cs).overlaps(g.b.ptr, sizeof(T) * static_cast<std::size_t>((g.k - 1) * g.b.row + g.n));
    }
  }

  // Times each kernel with CUDA events (profile(true)); synchronises once per call.
  static void profile(Plan& st, State& cs, cudaStream_t stream) {
    std::array<cuda::Event, nkernels + 1> ev;
    KILN_CUDA_CHECK(cudaEventRecord(ev[0], stream));
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      if (st.runs(G)) launch<G>(st, cs, stream);
      KILN_CUDA_CHECK(cudaEventRecord(ev[G + 1], stream));
    });
    KILN_CUDA_CHECK(cudaEventSynchronize(ev[nkernels]));
    for (int g = 0; g < nkernels; ++g) st.profile_ms[g] += ev[g + 1].since(ev[g]);
  }

  template <int G>
  static std::string tune_key(const Plan& st) {
    using Desc = typename Plan::template desc<G>;
    return cuda::device_id() + " | " + std::string(type_name<Desc>()) + " | " + kernel_signature(st.template slot<G>());
  }

  // MaxAutotune, before the first kernel of the first call: every tuned kernel's choice found in
  // the on-disk cache (keys are shapes and strides, known with the plan).
  static void load_choices(Plan& st, State& cs, AutotuneStats& stats, std::array<bool, F::kArray>& from_cache) {
    const AutotuneCache cache;
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename Plan::template desc<G>;
      if (!st.runs(G) || st.template slot<G>().writes_input) return;
      const auto hit = cache.load(tune_key<G>(st));
      if (!hit) return;
      if (!offered(hit->config, candidates_of<G>(st, cs))) return warn_not_offered(hit->config);
      cs.kernels[G].config = hit->config;
      from_cache[G] = true;
      ++stats.from_cache;
      st.tune_notes[G] = describe_cuda<Desc>(hit->config) + ", from the cache (" + std::to_string(hit->ms) + " ms when tuned)";
    });
  }

  // Kernel G's launch candidates: block sizes and row layouts, or a GEMM's algorithms.
  template <int G>
  static std::vector<lower::LaunchConfig> candidates_of(const Plan& st, const State& cs) {
    using Desc = typename Plan::template desc<G>;
    const auto& pr = st.template slot<G>();
    if constexpr (requires { pr.args.epilogue; })
      return cuda::gemm_candidates(cs.kernels[G].gemm_plan.get(),
                                   cuda::tc_gemm_offered<Desc> && cuda::tc_gemm_applies(pr.args, Desc::has_epilogue));
    else return cuda::candidates<Desc>();
  }

  // MaxAutotune on CUDA: each candidate (block size and row layout; the heuristic's first
  // cuBLASLt algorithms for a GEMM) timed with events on this call's data, the fastest kept
  // and cached on disk under the device's name, compute capability and driver.
  template <int G>
  static void tune(Plan& st, State& cs, cudaStream_t stream, AutotuneStats& stats) {
    using Desc = typename Plan::template desc<G>;
    auto& k = cs.kernels[G];
    const std::string key = tune_key<G>(st);
    const AutotuneCache cache;
    std::vector<lower::LaunchConfig> cands = candidates_of<G>(st, cs);
    TuneChoice choice;
    std::string notes;
    cuda::Event e0, e1;
    // Candidates are timed as a CUDA graph of two launches back to back, replayed, half the
    // replay counted: as calls run them. Launched directly, a candidate's host cost (cuBLASLt's
    // is several microseconds a call) showed as idle GPU time between the events and favoured
    // kiln's kernels on small products; and the second launch overlaps the first as a kernel
    // launched to overlap its predecessor (dependent launches) does in a call, where timed alone
    // that overlap did not show (docs/design-decisions.md has the figures). Not with the real
    // predecessor: running that one again could read arena bytes this kernel has since written
    // (values whose lifetimes do not meet share bytes).
    // Default's configuration first, as the incumbent (TuneChoice).
    cands.insert(cands.begin(), lower::LaunchConfig{});
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const lower::LaunchConfig& c = cands[i];
      const std::string described = i == 0 ? defaults_note(describe_cuda<Desc>(c)) : describe_cuda<Desc>(c);
      k.config = c;
      try {
        launch<G>(st, cs, stream);  // warm-up
      } catch (const CudaError& e) {
        // A block size the kernel's registers do not allow is not a candidate; any other failure is an error.
        if (e.code != cudaErrorLaunchOutOfResources) throw;
        if (i == 0) throw;  // Default's configuration must launch
        notes += "; " + described + " does not launch";
        continue;
      }
      const cuda::CapturedLaunches pair(stream, [&] {
        launch<G>(st, cs, stream);
        launch<G>(st, cs, stream);
      });
      pair.launch(stream);  // the graph's first replay uploads it
      float best_ms = 1e30f;
      for (int rep = 0; rep < 3; ++rep) {
        KILN_CUDA_CHECK(cudaEventRecord(e0, stream));
        pair.launch(stream);
        KILN_CUDA_CHECK(cudaEventRecord(e1, stream));
        best_ms = std::min(best_ms, e1.since(e0) / 2.0f);
      }
      notes += (i == 0 ? "" : "; ") + described + " " + std::to_string(best_ms) + " ms";
      if (i == 0) choice.offer_default(best_ms);
      else choice.offer(c, best_ms);
    }
    const TuneRecord best = choice.chosen();
    k.config = best.config;
    cache.store(key, best);
    ++stats.tuned;
    st.tune_notes[G] = "chose " + chosen_note(choice, describe_cuda<Desc>(best.config)) +
                       "; candidates (each timed as a graph of two launches, per launch): " + notes;
  }

  template <class Desc>
  static std::string describe_cuda(const lower::LaunchConfig& c) {
    if constexpr (requires { Desc::acc_slot; }) {  // a GEMM
      if (c.variant >= cuda::kLtAlgo) return "cuBLASLt algorithm " + std::to_string(c.variant - cuda::kLtAlgo);
      if (c.variant == cuda::kTcGemm && c.chunks == cuda::kTcWgmmaTma) return "kiln's wgmma kernel fed by TMA, persistent, 128 x 128 tiles";
      if (c.variant == cuda::kTcGemm) return "kiln's mma.sync kernel, 64 x 64 tiles";
      return "the small-product kernel where it applies, else cuBLASLt's first algorithm";
    }
    std::string s = c.threads ? std::to_string(c.threads) + " threads/block" : std::string("the default block size");
    if (c.variant == 1) s += ", a warp per row";
    if (c.variant == 2) s += ", a block per row";
    if (c.chunks == 1) s += ", element loads";
    if (c.chunks == 2) s += ", streamed 16-byte loads";
    if (c.chunks == 0 && Desc::nstages > 0) s += ", the row in registers where it fits";
    return s;
  }
};

}  // namespace kiln::runtime
