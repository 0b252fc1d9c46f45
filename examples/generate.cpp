// Text in, text out with a GPT-2 checkpoint from Hugging Face (config.json, model.safetensors
// and tokenizer.json in one directory): the prompt is tokenized, the model compiled with CUDA
// graphs and static memory, and the continuation generated, greedy or sampled, then decoded.
//
//   generate <checkpoint dir> "<prompt>" [new tokens (32)] [--sample [temperature [top_p [seed]]]]
//
// On a CUDA build with a GPU the model runs there in bf16; otherwise on the CPU in float.
#include <kiln/kiln.hpp>
#include <kiln/models/gpt2.hpp>
#include <kiln/text/tokenizer.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

template <class T>
int run(const std::string& dir, const std::string& prompt, const kiln::models::GenerationConfig& gen, kiln::Device dev) {
  const auto tok = kiln::text::Tokenizer::from_pretrained(dir);
  const std::vector<kiln::i64> ids = tok.encode(prompt);
  if (ids.empty()) return std::fprintf(stderr, "generate: the prompt is empty\n"), 1;
  auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(kiln::models::GPT2<T>::from_pretrained(dir, dev));
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = fast.generate(kiln::from_vector(ids, kiln::Shape{1, ids.size()}, dev), gen).cpu();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n", tok.decode(std::vector<kiln::i64>(out.data(), out.data() + out.numel())).c_str());
  std::fprintf(stderr, "%zu prompt tokens, %zu new, %.1f ms on %s\n", ids.size(), out.numel() - ids.size(), s * 1e3,
               dev.str().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: generate <checkpoint dir> \"<prompt>\" [new tokens] [--sample [temperature [top_p [seed]]]]\n");
    return 2;
  }
  kiln::models::GenerationConfig gen{.max_new_tokens = argc > 3 ? std::atol(argv[3]) : 32};
  if (argc > 4 && std::string(argv[4]) == "--sample") {
    gen.do_sample = true;
    gen.top_k = 0;
    if (argc > 5) gen.temperature = std::atof(argv[5]);
    if (argc > 6) gen.top_p = std::atof(argv[6]);
    if (argc > 7) gen.seed = std::strtoull(argv[7], nullptr, 10);
  }
  try {
#if KILN_WITH_CUDA
    if (kiln::cuda::device_count() > 0) return run<kiln::bf16>(argv[1], argv[2], gen, kiln::Device::cuda());
#endif
    return run<float>(argv[1], argv[2], gen, kiln::Device::cpu());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  }
}
