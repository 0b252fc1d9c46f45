// W5, a training step: an MLP 784-1024-1024-10 with ReLU, cross-entropy against class labels
// and AdamW (lr 1e-3) on every weight and bias; batch 256, f32. One call is forward, backward
// and the in-place update of the 6 parameters and their 12 moment tensors. PyTorch's figure
// comes from bench/peers/torch_cpu.py in the same scripts/bench.sh run.
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "w5.hpp"

namespace {
using namespace w5;

template <bench::Mode M>
void W5(benchmark::State& bs) {
  State s;
  auto f = bench::compiled<M>(w5_step());
  s.step(f);  // the first call plans (and tunes)
  for (auto _ : bs) s.step(f);
  bench::set_counters(bs, kBytes, kFlops);
  if constexpr (M != bench::Mode::Eager) print_profile_if_asked(f, s);
}
#define KILN_W5(M) BENCHMARK(W5<bench::Mode::M>)->Name("W5/kiln/" #M)->UseRealTime()->Unit(benchmark::kMillisecond);
KILN_W5(Eager)
KILN_W5(Default)
KILN_W5(ReduceOverhead)
KILN_W5(MaxAutotune)

}  // namespace

BENCHMARK_MAIN();
