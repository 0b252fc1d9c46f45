// kiln example: a character-level GPT trained on real text, then asked to write.
//
// The text is Debian's fortune cookies (scripts/fetch_fortunes.sh: about 14,000 fortunes, 2.5 MB).
// Every tenth fortune is held out for validation. The model is GPT-2's architecture
// (kiln::models::GPT2ForTraining: 4 layers of 4 heads, 128 wide, 64 characters of context,
// about 0.8 M parameters), trained by kiln::Trainer with AdamW and a cosine schedule; the layer
// is compiled once and run for every layer (train/stacked.hpp). At the end the weights are
// saved as a Hugging Face GPT-2 checkpoint, loaded back with kiln::models::GPT2, and compiled
// for generation with a static KV cache.
//
//   scripts/fetch_fortunes.sh                                   # once: data/fortunes.txt
//   ./build/examples/train_gpt [data/fortunes.txt] [--help] [--steps N | --minutes M] [--context N]
//                              [--batch N] [--embd N] [--lr X] [--out DIR] [--device cpu|cuda]
//                              [--compile none|default|reduce-overhead|max-autotune] [--no-compare]
//                              [--profile]
//
// The defaults are the README's run. Without --steps it trains for as many steps as fit in
// --minutes (8.5), at most 6000, counted from the step time it measures first: the README's
// 10-minute budget on whatever machine runs it (6000 steps of 32 x 64 characters reach about
// 1.6 nats/char; docs/benchmarks.md). --steps N trains N steps wherever it runs. --context,
// --batch, --embd and --lr change the model's
// width, its context and the batch without a rebuild (the layers and heads are template
// arguments), --compile picks the Trainer's policy (torch.compile's modes: kiln::Eager,
// kiln::Default, kiln::ReduceOverhead, kiln::MaxAutotune), --no-compare skips the timing of a
// compiled step beside an eager one, and --profile prints each kernel's time per call
// (kiln::Trainer::profile). Built with the CUDA kernels (kiln_cuda_executable, where nvcc is),
// --device cuda trains on the GPU; there ReduceOverhead runs each training step as one CUDA graph.
//
// It prints the unigram baseline (the loss of predicting each character by its frequency), the
// time of a compiled step beside an eager one, the training log (also written to
// <out>/trainer_log.jsonl, which scripts/plot_loss.py draws), the validation loss, and a few
// samples.
//
// Data-parallel: `scripts/launch.sh -n 2 ./build/examples/train_gpt data/fortunes.txt --steps N`
// trains on two processes, each with a batch of --batch (docs/distributed.md). --steps is then
// required (each rank would time its own step and fit another number of steps in --minutes),
// the eager comparison is skipped, and only rank 0 saves the model and writes the samples.
#include <kiln/kiln.hpp>
#include <kiln/models/gpt2_training.hpp>
#include <kiln/train/trainer.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kLayers = 4, kHeads = 4;
using Model = kiln::models::GPT2ForTraining<float, kLayers, kHeads>;

// The corpus as character ids: a vocabulary of the bytes that occur, and the training and
// validation streams (each fortune with its closing "%" line, every tenth one for validation).
struct Corpus {
  std::vector<unsigned char> vocab;
  std::array<long, 256> id{};
  std::vector<long> train, valid;

  explicit Corpus(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path + " (run scripts/fetch_fortunes.sh)");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[c]) id[c] = static_cast<long>(vocab.size()), vocab.push_back(static_cast<unsigned char>(c));
    std::size_t start = 0, n = 0;
    while (start < text.size()) {
      std::size_t end = text.find("\n%\n", start);
      end = end == std::string::npos ? text.size() : end + 3;
      auto& out = n++ % 10 == 9 ? valid : train;
      for (std::size_t i = start; i < end; ++i) out.push_back(id[static_cast<unsigned char>(text[i])]);
      start = end;
    }
  }
  std::string decode(const std::vector<long>& ids) const {
    std::string s;
    for (long i : ids) s += static_cast<char>(vocab[static_cast<std::size_t>(i)]);
    return s;
  }
};

// Windows of S + 1 characters of a stream (S: the context), one every `stride` characters:
// sample i is the input chars [i stride, i stride + S) and, as labels, the chars one further.
// Training windows overlap by half (stride S / 2), so that an epoch sees each character at two
// places in its context; validation windows do not (stride S).
struct Windows {
  const std::vector<long>* stream;
  std::size_t context, stride;
  std::size_t limit = 0;  // at most this many windows (0: all)
  std::size_t size() const {
    const std::size_t n = stream->size() > context ? (stream->size() - 1 - context) / stride + 1 : 0;
    return limit > 0 ? std::min(n, limit) : n;
  }
  struct Batch {
    kiln::Tensor<kiln::i64> ids, positions, labels;
    auto bindings() const {
      return std::tuple{Model::input_ids = ids, Model::position_ids = positions, Model::labels = labels};
    }
  };
  Batch batch(std::span<const std::size_t> rows) const {
    const std::size_t B = rows.size(), S = context;
    Batch b{kiln::Tensor<kiln::i64>(kiln::Shape{B, S}), kiln::Tensor<kiln::i64>(kiln::Shape{B, S}),
            kiln::Tensor<kiln::i64>(kiln::Shape{B * S})};
    for (std::size_t r = 0; r < B; ++r)
      for (std::size_t s = 0; s < S; ++s) {
        const std::size_t at = rows[r] * stride + s;
        b.ids[r * S + s] = (*stream)[at];
        b.positions[r * S + s] = static_cast<long>(s);
        b.labels[r * S + s] = (*stream)[at + 1];
      }
    return b;
  }
};

// The loss of predicting each validation character by its frequency in the training text.
double unigram_loss(const Corpus& c) {
  std::vector<double> count(c.vocab.size(), 1.0);  // add-one smoothing
  for (long i : c.train) count[static_cast<std::size_t>(i)] += 1;
  const double total = static_cast<double>(c.train.size() + c.vocab.size());
  double loss = 0;
  for (long i : c.valid) loss -= std::log(count[static_cast<std::size_t>(i)] / total);
  return loss / static_cast<double>(c.valid.size());
}

// Milliseconds per step of a policy's trainer: runs of 2 and of 2 + n steps, the difference over
// n (the first steps plan, allocate and, under CUDA graphs, capture); n is 20 on the CPU and 200
// on a GPU, where a step takes milliseconds.
template <class... Policies>
double ms_per_step(kiln::TrainingArguments args, const kiln::train::Parameters<float>& weights, const Windows& data,
                   kiln::Device device) {
  const auto run = [&](long steps) {
    args.max_steps = steps, args.logging_steps = 0, args.print_logs = false, args.report_to = "none";
    kiln::Trainer<Model, Policies...> trainer(args, weights, device, kiln::distributed::Environment{});  // this process alone
    return 1e3 * trainer.train(data).train_runtime;  // the training loop's time, not the Trainer's construction
  };
  // On a GPU the first run in the process also pays for what is made once (the context, the
  // libraries' handles, the kernels' first launches): a run of its own, not timed.
  if (device.is_cuda()) run(2);
  const long timed = device.is_cuda() ? 200 : 20;
  const double short_run = run(2);
  return (run(2 + timed) - short_run) / static_cast<double>(timed);
}

struct Options;

// The run with a Trainer of Policies: its step time beside an eager step's, the training, the
// validation loss. Returns the trained weights.
template <class... Policies>
kiln::train::Parameters<float> train_with(const Options& opt, kiln::TrainingArguments args,
                                          const kiln::train::Parameters<float>& weights, const Windows& train,
                                          const Windows& valid);

// The command line: the data file, and --name value options.
struct Options {
  std::string data = "data/fortunes.txt", out = "train_gpt_output";
  long steps = 0, context = 64, batch = 32, embd = 128;  // steps 0: as many as fit in `minutes`
  static constexpr long kMostSteps = 6000;
  double lr = 8e-3, minutes = 8.5;
  bool compare = true, profile = false;
  std::string compile = "default";
  kiln::Device device = kiln::Device::cpu();

  Options(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      const auto positive = [&](long& x) {
        x = std::stol(value());
        if (x <= 0) throw std::invalid_argument(a + " must be positive");
      };
      if (a == "--help" || a == "-h") {
        std::printf("usage: train_gpt [data/fortunes.txt] [--steps N | --minutes M] [--context N] [--batch N] [--embd N]\n"
                    "                 [--lr X] [--out DIR] [--device cpu|cuda] [--compile MODE] [--no-compare] [--profile]\n"
                    "defaults: --minutes 8.5 (as many steps as fit, at most %ld, from the measured step time; --steps N\n"
                    "          trains N steps) --context 64 --batch 32 --embd 128 --lr 8e-3 --out train_gpt_output,\n"
                    "          --device cpu (cuda: the GPU, where train_gpt was built with the CUDA kernels),\n"
                    "          --compile default (none, default, reduce-overhead or max-autotune: kiln::Eager,\n"
                    "          kiln::Default, kiln::ReduceOverhead, kiln::MaxAutotune)\n"
                    "--embd must be a multiple of %d (the heads); --no-compare skips the eager/compiled step timing;\n"
                    "--profile times every kernel of the training and prints the plans with the times\n",
                    kMostSteps, kHeads);
        std::exit(0);
      }
      if (a == "--steps") positive(steps);
      else if (a == "--minutes") {
        minutes = std::stod(value());
        if (!(minutes > 0)) throw std::invalid_argument("--minutes must be positive");
      }
      else if (a == "--context") positive(context);
      else if (a == "--batch") positive(batch);
      else if (a == "--embd") positive(embd);
      else if (a == "--lr") lr = std::stod(value());
      else if (a == "--out") out = value();
      else if (a == "--device") device = parse_device(value());
      else if (a == "--compile") compile = value();
      else if (a == "--no-compare") compare = false;
      else if (a == "--profile") profile = true;
      else if (a.starts_with("--")) throw std::invalid_argument("unknown option " + a);
      else data = a;
    }
    if (embd % kHeads != 0) throw std::invalid_argument("--embd must be a multiple of " + std::to_string(kHeads));
    if (compile != "none" && compile != "default" && compile != "reduce-overhead" && compile != "max-autotune")
      throw std::invalid_argument("--compile must be none, default, reduce-overhead or max-autotune, not " + compile);
  }
  static kiln::Device parse_device(const std::string& name) {
    if (name == "cpu") return kiln::Device::cpu();
    if (name != "cuda") throw std::invalid_argument("--device must be cpu or cuda, not " + name);
#if KILN_WITH_CUDA
    if (kiln::cuda::device_count() > 0) return kiln::Device::cuda();
    throw std::invalid_argument("--device cuda: no CUDA device here");
#else
    throw std::invalid_argument("--device cuda: this train_gpt was built without the CUDA kernels (kiln_cuda_executable)");
#endif
  }
};

template <class... Policies>
kiln::train::Parameters<float> train_with(const Options& opt, kiln::TrainingArguments args,
                                          const kiln::train::Parameters<float>& weights, const Windows& train,
                                          const Windows& valid) {
  // The compiled step beside the eager one (kiln::Eager: one kernel per node).
  double step_ms = 0;
  if (opt.compare && opt.compile != "none") {
    step_ms = ms_per_step<Policies...>(args, weights, train, opt.device);
    const double eager_ms = ms_per_step<kiln::Eager>(args, weights, train, opt.device);
    std::printf("step time (batch %ld x %ld chars): %s %.2f ms, eager %.2f ms (%.2fx)\n", opt.batch, opt.context,
                opt.compile.c_str(), step_ms, eager_ms, eager_ms / step_ms);
  }
  if (opt.steps == 0) {  // as many steps as fit in opt.minutes, in fifties, at most kMostSteps
    if (step_ms == 0) step_ms = ms_per_step<Policies...>(args, weights, train, opt.device);
    const double fit = opt.minutes * 60e3 / step_ms;
    args.max_steps = std::clamp(static_cast<long>(fit / 50) * 50, 50L, Options::kMostSteps);
    std::printf("training for %ld steps: as many as fit in %g minutes at %.2f ms per step (at most %ld)\n",
                args.max_steps, opt.minutes, step_ms, Options::kMostSteps);
  }
  // The Trainer prints its log (and on a terminal a progress bar) and writes it to
  // opt.out/trainer_log.jsonl; scripts/plot_loss.py draws it.
  kiln::Trainer<Model, Policies...> trainer(args, weights, opt.device);
  if (opt.profile) trainer.profile();
  trainer.train(train);
  const double valid_loss = trainer.evaluate(valid);
  if (trainer.is_world_process_zero()) std::printf("validation loss %.3f nats/char\n", valid_loss);
  if (opt.profile) std::printf("%s\n", trainer.explain().c_str());
#if KILN_WITH_CUDA
  if (opt.device.is_cuda() && kiln::runtime::Policy<Policies...>::persistent && trainer.is_world_process_zero())
    std::printf("training step graphs: %ld captured, %ld replayed\n", trainer.graph_captures(), trainer.graph_replays());
#endif
  return trainer.parameters();
}

}  // namespace

int main(int argc, char** argv) try {
  Options opt(argc, argv);
  const auto place = kiln::distributed::Environment::from_env();
  if (place.is_distributed()) {
    if (opt.steps == 0)
      throw kiln::ValueError("run under scripts/launch.sh or torchrun, give --steps N: each rank would time its own step "
                             "and fit another number of steps in --minutes");
    opt.compare = false;
  }
  const Corpus corpus(opt.data);
  if (place.rank == 0) {
    std::printf("data: %zu training and %zu validation characters, %zu distinct\n", corpus.train.size(),
                corpus.valid.size(), corpus.vocab.size());
    std::printf("unigram baseline: %.3f nats/char on the validation text\n", unigram_loss(corpus));
    std::printf("device: %s%s\n", opt.device.is_cuda() ? "cuda" : "cpu",
                place.is_distributed() ? (", " + std::to_string(place.world_size) + " ranks").c_str() : "");
  }

  kiln::models::GPT2Config config;
  config.vocab_size = static_cast<long>(corpus.vocab.size());
  config.n_positions = opt.context, config.n_embd = opt.embd, config.n_layer = kLayers, config.n_head = kHeads;
  config.n_inner = 4 * opt.embd;
  const auto weights = Model::init(config, 1234);

  kiln::TrainingArguments args;
  args.output_dir = opt.out;
  args.max_steps = opt.steps, args.per_device_train_batch_size = opt.batch, args.per_device_eval_batch_size = 64;
  args.learning_rate = opt.lr, args.lr_scheduler_type = "cosine", args.warmup_steps = 100;
  args.weight_decay = 0.1, args.max_grad_norm = 1.0;
  args.logging_steps = 250, args.save_steps = 0, args.seed = 7;
  const auto context = static_cast<std::size_t>(opt.context);
  // The same validation characters whatever the context: the first 131072 (as 2048 windows of 64).
  const Windows train{&corpus.train, context, std::max<std::size_t>(1, context / 2)},
      valid{&corpus.valid, context, context, 131072 / context};

  // --compile picks the policies of the Trainer's type (torch.compile's mode, as a type).
  const auto trained = opt.compile == "none"              ? train_with<kiln::Eager>(opt, args, weights, train, valid)
                       : opt.compile == "reduce-overhead" ? train_with<kiln::ReduceOverhead>(opt, args, weights, train, valid)
                       : opt.compile == "max-autotune"    ? train_with<kiln::MaxAutotune>(opt, args, weights, train, valid)
                                                          : train_with<>(opt, args, weights, train, valid);

  if (place.rank != 0) return 0;  // rank 0 saves and samples for all
  // The weights as a Hugging Face checkpoint, loaded back for generation with a static KV cache.
  const std::string model_dir = opt.out + "/model";
  Model::save_pretrained(model_dir, config, trained);
  const auto lm = kiln::models::GPT2<float>::from_pretrained(model_dir, opt.device);
  auto fast = kiln::compile(lm);
  std::printf("saved %s; samples:\n", model_dir.c_str());
  for (const std::string prompt : {"A ", "The ", "Q:"}) {
    std::vector<long> ids;
    for (unsigned char c : prompt) ids.push_back(corpus.id[c]);
    const auto input =
        kiln::from_vector(std::vector<kiln::i64>(ids.begin(), ids.end()), kiln::Shape{1, ids.size()}, opt.device);
    kiln::models::GenerationConfig gen;
    gen.max_new_tokens = opt.context - static_cast<long>(ids.size()), gen.do_sample = true, gen.temperature = 0.8;
    gen.top_k = 0, gen.seed = 11;
    const auto tokens = fast.generate(input, gen).cpu();
    std::vector<long> all;
    for (std::size_t i = 0; i < tokens.numel(); ++i) all.push_back(tokens[i]);
    std::printf("---\n%s\n", corpus.decode(all).c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_gpt: %s\n", e.what());
  return 1;
}
