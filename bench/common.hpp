// kiln benchmarks: helpers shared by the bench binaries.
#pragma once
#include <benchmark/benchmark.h>

#include <kiln/kiln.hpp>

namespace bench {

// bytes/s and flop/s counters from per-iteration figures.
inline void set_counters(benchmark::State& state, double bytes, double flops) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["flop/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// The modes every workload runs in. Eager and Default return fresh outputs per call, as a
// user would call them; ReduceOverhead and MaxAutotune write into preallocated outputs.
enum class Mode { Eager, Default, ReduceOverhead, MaxAutotune };
inline const char* name(Mode m) {
  switch (m) {
    case Mode::Eager: return "Eager";
    case Mode::Default: return "Default";
    case Mode::ReduceOverhead: return "ReduceOverhead";
    case Mode::MaxAutotune: return "MaxAutotune";
  }
  return "";
}

// `expr` compiled in mode M.
template <Mode M, class Expr>
auto compiled(const Expr& expr) {
  if constexpr (M == Mode::Eager) return kiln::eager(expr);
  else if constexpr (M == Mode::Default) return kiln::compile(expr);
  else if constexpr (M == Mode::ReduceOverhead) return kiln::compile<kiln::ReduceOverhead>(expr);
  else return kiln::compile<kiln::MaxAutotune>(expr);
}

// Runs `expr` compiled in mode M with the given bindings; `out` receives the result for the
// into() modes.
template <Mode M, class Expr, class Out, class... Bs>
void run_kiln(benchmark::State& state, const Expr& expr, Out& out, const Bs&... bs) {
  auto f = compiled<M>(expr);
  if constexpr (M == Mode::Eager || M == Mode::Default) {
    benchmark::DoNotOptimize(f(bs...));  // first call plans
    for (auto _ : state) benchmark::DoNotOptimize(f(bs...));
  } else {
    f.into(out, bs...);  // first call plans (and, for MaxAutotune, tunes)
    for (auto _ : state) {
      f.into(out, bs...);
      benchmark::ClobberMemory();
    }
  }
}

}  // namespace bench
