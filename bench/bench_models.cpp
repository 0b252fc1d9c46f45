// kiln's models at their real sizes (docs/benchmarks.md, "Workloads"), loaded from Hugging Face
// style checkpoints with random weights that this program writes once to a temporary
// directory:
//   W6  ViT-B/16 inference: 224 x 224 images, batch 1, 16 and 64, f32 and bf16; ms per batch.
//   W7  GPT-2 small decode: bf16, batch 1, a 32-token prompt and 64 new tokens, greedy with the
//       static KV cache; the counter ms_per_token is the time of generate() over 64 (the prompt
//       included, as the peers' figures include it).
//   W7prefill  the same model's forward over the 32-token prompt (logits for every position).
// Each in Default, ReduceOverhead + FullGraph and MaxAutotune. bench_models runs them on the
// CPU; bench_models_gpu (a CUDA build) on the GPU. Wall-clock times: each call ends when the
// device has finished it (the logits stay on the device, as in PyTorch's peer; generate()
// returns its tokens on the host); use --benchmark_repetitions and the median. Counters:
// first_call_s, the first call (planning, CUDA-graph capture, MaxAutotune's tuning); peak_MB
// (GPU only), the most device memory kiln's allocator held at once from loading the model to
// the end of the timed calls (weights, plans' arenas and graphs' buffers), in 10^6 bytes, as
// PyTorch's peer reports torch.cuda.max_memory_allocated.
// KILN_MODELS_PROFILE=1 prints, after each W6 and W7 case, its kernels and their times.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/models/gpt2.hpp>
#include <kiln/models/vit.hpp>

#if KILN_CUDA_KERNELS
#include <cuda_runtime.h>
#endif

namespace {
namespace fs = std::filesystem;

#if KILN_CUDA_KERNELS
const kiln::Device kDevice = kiln::Device::cuda();
#else
const kiln::Device kDevice = kiln::Device::cpu();
#endif

// Starts a case's peak-memory count: the models of earlier cases are freed by now, so the peak
// counts this case's model, buffers and outputs.
void start_peak_memory() {
#if KILN_CUDA_KERNELS
  kiln::cuda::reset_peak_memory();
#endif
}

// The most bytes kiln's allocator held at once since start_peak_memory() (0 on the CPU).
double peak_device_bytes() {
#if KILN_CUDA_KERNELS
  return static_cast<double>(kiln::cuda::memory_stats().peak_bytes);
#else
  return 0;
#endif
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Waits for the device to finish the work behind `t` (nothing to wait for on the CPU).
template <class T>
void finished(const kiln::Tensor<T>& t) {
  benchmark::DoNotOptimize(t.data());
#if KILN_CUDA_KERNELS
  kiln::cuda::synchronize();
#endif
}

// The first call of a case in this process: the later repetitions of a case find its plans,
// graphs and tuning cached, so every repetition reports the first's time (`key` tells a case's
// arguments apart).
template <auto Case>
double first_call_of(std::int64_t key, double seconds) {
  static std::map<std::int64_t, double> first;
  return first.try_emplace(key, seconds).first->second;
}

// With KILN_MODELS_PROFILE set, after the timed calls: 5 profiled calls, then the programs'
// plans with each kernel's mean time per call, on stderr under `title`.
template <class Model, class Call>
void print_profile(Model& fast, const std::string& title, Call&& call) {
  if (!std::getenv("KILN_MODELS_PROFILE")) return;
  fast.profile();
  for (int i = 0; i < 5; ++i) call();
  fast.profile(false);
  std::fprintf(stderr, "== %s\n%s\n", title.c_str(), fast.explain().c_str());
}

// The counters every case reports (see the top of this file); called after the timed calls.
void report(benchmark::State& state, double first_call_s) {
  state.counters["first_call_s"] = first_call_s;
  if (kDevice.is_cuda()) state.counters["peak_MB"] = peak_device_bytes() / 1e6;
}

// A random tensor of the given shape: normal with standard deviation sd around mean.
kiln::io::NamedTensor weight(const std::string& name, kiln::Shape shape, double sd, double mean, std::uint64_t& seed) {
  auto t = kiln::randn<float>(shape, ++seed);
  for (std::size_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(mean + sd * t[i]);
  return {name, t};
}

// GPT-2 small (124M) in the layout GPT2LMHeadModel saves, written once.
std::string gpt2_small() {
  static const std::string dir = [] {
    const fs::path d = fs::temp_directory_path() / "kiln_bench_gpt2_small";
    if (!fs::exists(d / "model.safetensors")) {
      fs::create_directories(d);
      std::ofstream(d / "config.json") << R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
        "n_layer": 12, "n_head": 12, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05})";
      std::uint64_t seed = 0;
      const std::size_t E = 768;
      std::vector<kiln::io::NamedTensor> w;
      w.push_back(weight("transformer.wte.weight", {50257, E}, 0.02, 0, seed));
      w.push_back(weight("transformer.wpe.weight", {1024, E}, 0.01, 0, seed));
      w.push_back(weight("transformer.ln_f.weight", {E}, 0.02, 1, seed));
      w.push_back(weight("transformer.ln_f.bias", {E}, 0.02, 0, seed));
      for (int l = 0; l < 12; ++l) {
        const std::string p = "transformer.h." + std::to_string(l) + ".";
        w.push_back(weight(p + "ln_1.weight", {E}, 0.02, 1, seed));
        w.push_back(weight(p + "ln_1.bias", {E}, 0.02, 0, seed));
        w.push_back(weight(p + "attn.c_attn.weight", {E, 3 * E}, 0.02, 0, seed));
        w.push_back(weight(p + "attn.c_attn.bias", {3 * E}, 0.02, 0, seed));
        w.push_back(weight(p + "attn.c_proj.weight", {E, E}, 0.02, 0, seed));
        w.push_back(weight(p + "attn.c_proj.bias", {E}, 0.02, 0, seed));
        w.push_back(weight(p + "ln_2.weight", {E}, 0.02, 1, seed));
        w.push_back(weight(p + "ln_2.bias", {E}, 0.02, 0, seed));
        w.push_back(weight(p + "mlp.c_fc.weight", {E, 4 * E}, 0.02, 0, seed));
        w.push_back(weight(p + "mlp.c_fc.bias", {4 * E}, 0.02, 0, seed));
        w.push_back(weight(p + "mlp.c_proj.weight", {4 * E, E}, 0.02, 0, seed));
        w.push_back(weight(p + "mlp.c_proj.bias", {E}, 0.02, 0, seed));
      }
      kiln::io::save_safetensors((d / "model.safetensors").string(), w);
    }
    return d.string();
  }();
  return dir;
}

// ViT-B/16 (86M) in the layout ViTForImageClassification saves, 2 labels, written once.
std::string vit_base() {
  static const std::string dir = [] {
    const fs::path d = fs::temp_directory_path() / "kiln_bench_vit_base";
    if (!fs::exists(d / "model.safetensors")) {
      fs::create_directories(d);
      std::ofstream(d / "config.json") << R"({"model_type": "vit", "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "image_size": 224, "patch_size": 16, "num_channels": 3,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12, "qkv_bias": true})";
      std::uint64_t seed = 100;
      const std::size_t E = 768, I = 3072;
      std::vector<kiln::io::NamedTensor> w;
      w.push_back(weight("vit.embeddings.cls_token", {1, 1, E}, 0.02, 0, seed));
      w.push_back(weight("vit.embeddings.position_embeddings", {1, 197, E}, 0.02, 0, seed));
      w.push_back(weight("vit.embeddings.patch_embeddings.projection.weight", {E, 3, 16, 16}, 0.02, 0, seed));
      w.push_back(weight("vit.embeddings.patch_embeddings.projection.bias", {E}, 0.02, 0, seed));
      w.push_back(weight("vit.layernorm.weight", {E}, 0.02, 1, seed));
      w.push_back(weight("vit.layernorm.bias", {E}, 0.02, 0, seed));
      w.push_back(weight("classifier.weight", {2, E}, 0.02, 0, seed));
      w.push_back(weight("classifier.bias", {2}, 0.02, 0, seed));
      for (int l = 0; l < 12; ++l) {
        const std::string p = "vit.encoder.layer." + std::to_string(l) + ".";
        for (const char* n : {"query", "key", "value"}) {
          w.push_back(weight(p + "attention.attention." + n + ".weight", {E, E}, 0.02, 0, seed));
          w.push_back(weight(p + "attention.attention." + n + ".bias", {E}, 0.02, 0, seed));
        }
        w.push_back(weight(p + "attention.output.dense.weight", {E, E}, 0.02, 0, seed));
        w.push_back(weight(p + "attention.output.dense.bias", {E}, 0.02, 0, seed));
        w.push_back(weight(p + "layernorm_before.weight", {E}, 0.02, 1, seed));
        w.push_back(weight(p + "layernorm_before.bias", {E}, 0.02, 0, seed));
        w.push_back(weight(p + "layernorm_after.weight", {E}, 0.02, 1, seed));
        w.push_back(weight(p + "layernorm_after.bias", {E}, 0.02, 0, seed));
        w.push_back(weight(p + "intermediate.dense.weight", {I, E}, 0.02, 0, seed));
        w.push_back(weight(p + "intermediate.dense.bias", {I}, 0.02, 0, seed));
        w.push_back(weight(p + "output.dense.weight", {E, I}, 0.02, 0, seed));
        w.push_back(weight(p + "output.dense.bias", {E}, 0.02, 0, seed));
      }
      kiln::io::save_safetensors((d / "model.safetensors").string(), w);
    }
    return d.string();
  }();
  return dir;
}

// W6: one batch of images through ViT-B/16; the argument is the batch size.
template <class T, class... Policies>
void W6(benchmark::State& state) {
  const std::string dir = vit_base();
  start_peak_memory();
  const auto vit = kiln::models::ViT<T>::from_pretrained(dir, kDevice);
  auto fast = kiln::compile<Policies...>(vit);
  const auto B = static_cast<std::size_t>(state.range(0));
  const auto images = kiln::randn<float>({B, 3, 224, 224}, 7).template as<T>().to(kDevice);
  const auto t0 = std::chrono::steady_clock::now();
  finished(fast(images));  // plan, capture, tune
  const double first_call_s = first_call_of<&W6<T, Policies...>>(state.range(0), seconds_since(t0));
  finished(fast(images));
  for (auto _ : state) finished(fast(images));
  report(state, first_call_s);
  print_profile(fast, "W6 batch " + std::to_string(B), [&] { finished(fast(images)); });
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(B), benchmark::Counter::kIsIterationInvariantRate);
}

// W7's prompt: 32 token ids, batch 1.
kiln::Tensor<kiln::i64> w7_prompt() {
  std::vector<kiln::i64> prompt(32);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<kiln::i64>((i * 7919) % 50257);
  return kiln::from_vector(prompt, kiln::Shape{1, 32}, kDevice);
}

// W7: generate() of 64 tokens after a 32-token prompt, batch 1.
template <class T, class... Policies>
void W7(benchmark::State& state) {
  const std::string dir = gpt2_small();
  start_peak_memory();
  const auto lm = kiln::models::GPT2<T>::from_pretrained(dir, kDevice);
  auto fast = kiln::compile<Policies...>(lm);
  const auto ids = w7_prompt();
  const kiln::models::GenerationConfig gen{.max_new_tokens = 64, .eos_token_id = std::vector<long>{}, .pad_token_id = {}};
  auto t0 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(fast.generate(ids, gen));  // plan (and capture) both shapes
  const double first_call_s = first_call_of<&W7<T, Policies...>>(0, seconds_since(t0));
  t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(fast.generate(ids, gen));
  state.counters["ms_per_token"] = seconds_since(t0) * 1e3 / static_cast<double>(state.iterations()) / 64;
  report(state, first_call_s);
  print_profile(fast, "W7", [&] { (void)fast.generate(ids, gen); });
}

// W7prefill: the logits of the 32-token prompt, the forward generate() starts with.
template <class T, class... Policies>
void W7prefill(benchmark::State& state) {
  const std::string dir = gpt2_small();
  start_peak_memory();
  const auto lm = kiln::models::GPT2<T>::from_pretrained(dir, kDevice);
  auto fast = kiln::compile<Policies...>(lm);
  const auto ids = w7_prompt();
  const auto t0 = std::chrono::steady_clock::now();
  finished(fast(ids));
  const double first_call_s = first_call_of<&W7prefill<T, Policies...>>(0, seconds_since(t0));
  finished(fast(ids));
  for (auto _ : state) finished(fast(ids));
  report(state, first_call_s);
}

using kiln::bf16;
using kiln::FullGraph;
using kiln::MaxAutotune;
using kiln::ReduceOverhead;
#define KILN_W6(T, ...)                                                                       \
  BENCHMARK(W6<T, ##__VA_ARGS__>)->Name("W6/" #T "/" #__VA_ARGS__)->Arg(1)->Arg(16)->Arg(64) \
      ->Unit(benchmark::kMillisecond)->UseRealTime()
KILN_W6(float);
KILN_W6(float, ReduceOverhead, FullGraph);
KILN_W6(float, MaxAutotune);
KILN_W6(bf16);
KILN_W6(bf16, ReduceOverhead, FullGraph);
KILN_W6(bf16, MaxAutotune);
BENCHMARK(W7<bf16>)->Name("W7/bf16/Default")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(W7<bf16, ReduceOverhead, FullGraph>)->Name("W7/bf16/ReduceOverhead,FullGraph")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(W7<bf16, MaxAutotune>)->Name("W7/bf16/MaxAutotune")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(W7prefill<bf16, ReduceOverhead, FullGraph>)->Name("W7prefill/bf16/ReduceOverhead,FullGraph")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
