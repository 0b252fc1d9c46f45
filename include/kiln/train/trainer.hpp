// kiln: kiln::Trainer, the training loop of Hugging Face's Trainer around kiln's compiled
// training step (train/step.hpp): batches, the learning-rate schedule, logging, evaluation and
// checkpoints that resume bit for bit.
//
//   struct Mlp {                                   // a model the Trainer can train
//     using element = float;
//     static constexpr auto parameters() { return std::tuple{w1, b1, w2, b2}; }  // kiln::param symbols
//     static constexpr auto loss() { return kiln::nn::cross_entropy(logits, y); } // a scalar
//   };
//   kiln::Trainer<Mlp, kiln::ReduceOverhead> trainer(args, initial_weights, kiln::Device::cpu());
//   trainer.train(train_data, eval_data);          // datasets: see kiln::train::Dataset
//   double loss = trainer.evaluate(eval_data);
//
// The compile switch, backend and mode are the Policies (kiln::Eager for no compilation), as
// kiln::compile takes them. For such a model one call of the compiled step runs forward,
// backward, gradient clipping and AdamW on every parameter (train/step.hpp). A model that
// declares its layers instead (train::StackedModel: embed(), layer(), head_loss(), ...) is
// trained region by region, each region compiled once (train/stacked.hpp).
//
// Data. A dataset has size() and batch(rows), rows being sample indices; a batch's bindings()
// binds the loss's inputs to tensors the batch owns (x = its pixels, y = its labels). Epoch e
// visits the samples in an order shuffled by std::mt19937_64(seed + e), so where a run stands
// is (epoch, batches done in it), and a resumed run sees the data the uninterrupted one would.
// Each batch is copied into tensors on the trainer's device that stay put from step to step, so
// that a CUDA-graph policy replays one graph per batch shape instead of capturing again.
//
// Gradient accumulation. With gradient_accumulation_steps K, an update takes the next K batches
// of the epoch (fewer at its end) and applies the mean of their gradients; its logged loss is the
// mean of their losses. max_steps and the schedule count updates, as HF's do.
//
// Output. Each record of the log history (training: mean loss, learning rate, gradient norm, steps
// and samples per second since the last record; evaluation: eval_loss) is a JSON line of
// output_dir/trainer_log.jsonl (report_to "jsonl"), followed by the run's summary (runtime,
// throughput, mean loss), and a line of text on stdout (print_logs). On a terminal a progress bar
// shows the step, steps/s, the time left and the loss (disable_tqdm turns it off).
// scripts/plot_loss.py draws the log as a PNG.
//
// Mixed precision. A model whose element type is kiln::bf16 (args.bf16 must say so) or kiln::f16
// computes in it and is trained on float master weights (train/mixed.hpp): its weights are
// given, kept, returned by parameters() and saved in float, and so are AdamW's moments.
//
// Checkpoints. output_dir/checkpoint-<step> holds model.safetensors (the parameters, by their
// names), optimizer.safetensors (AdamW's exp_avg.<name> and exp_avg_sq.<name>) and
// trainer_state.json (the step, the epoch and the batch in it, the log history). It is written
// to checkpoint-<step>.tmp and renamed, so a killed run leaves the last complete checkpoint and
// no half-written one. train(data, eval, path) resumes from one: the same steps then follow, to
// the bit, as if the run had not stopped.
//
// Data-parallel training (docs/distributed.md). Started as several processes (scripts/launch.sh
// -n N, or torchrun), each with RANK and WORLD_SIZE in its environment, the Trainer of each
// process joins the others (distributed/connect.hpp: over TCP for the CPU, NCCL for CUDA; the
// ranks must train the same model with the same arguments, which the rendezvous checks), starts
// from rank 0's weights, and trains on its share of every batch: the epoch's order (the same on
// every rank) padded to a multiple of WORLD_SIZE by repeating its first samples, rank r taking
// samples r, r + W, r + 2W, ... as torch's DistributedSampler does. The gradients are summed over
// the ranks in buckets as the backward finishes them (distributed/buckets.hpp) and scaled by
// 1 / W, so every rank applies the same update and keeps the same weights: one rank's batch of B
// is a global batch of B W. Logged losses are the ranks' mean; evaluation splits the batches
// among the ranks; only rank 0 logs, prints and writes checkpoints.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/io/safetensors.hpp"
#include "kiln/runtime/compile.hpp"
#include "kiln/train/arguments.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/loop.hpp"
#include "kiln/train/mixed.hpp"
#include "kiln/train/ranks.hpp"
#include "kiln/train/stacked.hpp"
#include "kiln/train/step.hpp"

namespace kiln {
namespace train {

// A data set: size() samples, and batch(rows) the batch of those sample indices, whose
// bindings() is a tuple of bindings (x = tensor, ...) of tensors the batch holds.
template <class D>
concept Dataset = requires(const D& d, std::span<const std::size_t> rows) {
  { d.size() } -> std::convertible_to<std::size_t>;
  d.batch(rows).bindings();
};

// A dataset of no samples: train(data) without evaluation.
struct NoData {
  struct Batch {
    std::tuple<> bindings() const { return {}; }
  };
  std::size_t size() const { return 0; }
  Batch batch(std::span<const std::size_t>) const { return {}; }
};

// What Trainer::predict returns: the predictions of every sample, in the data's order (each
// batch's concatenated along the first axis), and the mean loss, as evaluate() gives it.
template <class U>
struct PredictionOutput {
  Tensor<U> predictions;
  double loss = 0;
};

struct TrainOutput {
  long global_step = 0;
  double training_loss = 0;             // the mean loss of the steps this call ran
  double train_runtime = 0;             // seconds
  double train_steps_per_second = 0;    // updates per second
  double train_samples_per_second = 0;  // samples per second (each update's samples: its batches')
};

}  // namespace train

template <class Model, class... Policies>
class Trainer {
  using Trained = train::trained_t<Model>;  // the model, or for a 16-bit one its float masters (train/mixed.hpp)

 public:
  using T = typename Trained::element;  // the weights': Model::element, or float for a bf16 or f16 model
  using Parameters = train::Parameters<T>;
  using LogRecord = train::LogRecord;

  // Checks the arguments (a ValueError names the first bad one) and that `weights` holds every
  // parameter of the model with its rank (a ValueError names a missing one, a ShapeError a
  // wrong rank); copies them to `device`, with AdamW's moments at zero. In a run of several
  // processes (`env`, by default read from the environment: distributed/environment.hpp) it
  // then joins the other ranks, waiting up to ddp_timeout for them, and takes rank 0's weights.
  Trainer(TrainingArguments args, const Parameters& weights, Device device = Device::cpu(),
          const distributed::Environment& env = distributed::Environment::from_env())
      : Trainer(std::move(args), weights, device, nullptr, &env) {}
  // The same with a communicator of the caller's (one per rank), for ranks that are not
  // processes of their own (threads, a test's recording communicator). It is used even when it
  // has one rank (sums that change nothing), so one GPU can run a data-parallel step's NCCL calls.
  Trainer(TrainingArguments args, const Parameters& weights, Device device, std::shared_ptr<distributed::Communicator> comm)
      : Trainer(std::move(args), weights, device, std::move(comm), nullptr) {}

 private:
  Trainer(TrainingArguments args, const Parameters& weights, Device device, std::shared_ptr<distributed::Communicator> comm,
          const distributed::Environment* env)
      : args_(std::move(args)), device_(device), ranks_(std::move(comm)) {
    check_arguments(args_);
    if (args_.bf16 != std::is_same_v<typename Model::element, bf16>)
      throw ValueError(std::string("kiln::TrainingArguments: bf16 is ") + (args_.bf16 ? "true" : "false") +
                       " but the model computes in " + dtype_name<typename Model::element>() +
                       ": the model's element type says what it computes in (kiln::bf16 for bf16 mixed precision, "
                       "whose master weights stay float), and bf16 must agree with it");
    std::vector<std::pair<std::string, Shape>> parts;
    Engine::for_each_parameter([&](auto w, const std::string& name) {
      const auto it = weights.find(name);
      if (it == weights.end()) throw ValueError("kiln::Trainer: the weights have no tensor named \"" + name + "\"");
      if (it->second.rank() != decltype(w)::rank)
        throw ShapeError("kiln::Trainer: the weight \"" + name + "\" has shape " + it->second.shape().str() +
                         ", the model's parameter has rank " + std::to_string(decltype(w)::rank));
      parts.emplace_back(name, it->second.shape());
    });
    // The parameters and moments are views of one buffer each (train/flat.hpp), the moments zero.
    flat_ = std::make_shared<train::FlatState<T>>(parts, device_);
    using F = train::FlatState<T>;
    params_ = flat_->views(F::kParam);
    for (auto& [name, t] : params_) t.copy_from(weights.at(name));
    moments_ = flat_->views(F::kExpAvg, "exp_avg."), moments_.merge(flat_->views(F::kExpAvgSq, "exp_avg_sq."));
    engine_.use_flat(flat_);
    // Fixed for the run; lr, the step count and the gradients' scale are set at every step.
    hyper_.max_grad_norm_value = args_.max_grad_norm > 0 ? args_.max_grad_norm : std::numeric_limits<double>::infinity();
    hyper_.weight_decay_value = args_.weight_decay;
    if (env && env->is_distributed()) ranks_ = train::Ranks<T>(train::Ranks<T>::connect(*env, args_, device_, parts));
    ranks_.join(*flat_, args_.ddp_bucket_cap_mb, device_);
  }

 public:
  // This process's rank and the number of ranks (HF's process_index and world_size): 0 and 1
  // when the run is not distributed.
  int process_index() const { return ranks_.rank(); }
  int world_size() const { return ranks_.size(); }
  // Whether this is rank 0, the one that logs and saves (HF's is_world_process_zero).
  bool is_world_process_zero() const { return process_index() == 0; }
  // The gradient buckets summed over the ranks (none when the run is not distributed).
  std::vector<distributed::Bucket> gradient_buckets() const { return ranks_.buckets(); }

  const TrainingArguments& args() const { return args_; }
  // The current parameters (on the trainer's device), by name.
  const Parameters& parameters() const { return params_; }
  long global_step() const { return global_step_; }
#if KILN_WITH_CUDA
  // The CUDA graphs of the training steps (a policy with graphs, on a CUDA device): how many
  // were captured and how many steps replayed one. A stacked model's whole step is one graph,
  // a one-program model's step is its program's graph.
  long graph_captures() const { return engine_.graph_captures(); }
  long graph_replays() const { return engine_.graph_replays(); }
#endif
  const std::vector<LogRecord>& log_history() const { return log_; }
  // The compiled training step's plan (kiln::Compiled::explain); after profile(), with each
  // kernel's mean time per call over the steps since.
  std::string explain() const { return engine_.explain(); }
  // Times every kernel of the step's programs from now on (kiln::Compiled::profile), at the
  // cost of a synchronisation per kernel; profile(false) stops.
  void profile(bool on = true) { engine_.profile(on); }

  // Trains for max_steps updates, or num_train_epochs passes over `data` (the last one partial
  // where the count is fractional), evaluating on `eval` every eval_steps, logging every
  // logging_steps and saving every save_steps; resume_from_checkpoint: a checkpoint directory
  // to continue from.
  template <train::Dataset D, train::Dataset E = train::NoData>
  train::TrainOutput train(const D& data, const E& eval = {}, const std::string& resume_from_checkpoint = "") {
    // This rank's samples per epoch: all of them, or in a run of W ranks its share of the order
    // padded to a multiple of W (see the top of this file).
    const std::size_t all = data.size(), W = static_cast<std::size_t>(world_size());
    ranks_.check_same_size(all, "kiln::Trainer::train");
    const std::size_t n = (all + W - 1) / W, B = static_cast<std::size_t>(args_.per_device_train_batch_size);
    const std::size_t K = static_cast<std::size_t>(args_.gradient_accumulation_steps);
    const std::size_t per_epoch = args_.dataloader_drop_last ? n / B : (n + B - 1) / B;  // batches
    if (per_epoch == 0)
      throw ValueError("kiln::Trainer: the training data has " + std::to_string(n) + " samples" +
                       (W > 1 ? " per rank" : "") + ", no batch of " + std::to_string(B));
    const std::size_t updates_per_epoch = (per_epoch + K - 1) / K;
    total_ = args_.max_steps > 0
                 ? args_.max_steps
                 : static_cast<long>(std::ceil(args_.num_train_epochs * static_cast<double>(updates_per_epoch)));
    if (!resume_from_checkpoint.empty()) {
      load_checkpoint(resume_from_checkpoint);
      if (step_in_epoch_ > per_epoch)
        throw ValueError("kiln::Trainer: checkpoint " + resume_from_checkpoint + " stopped after batch " +
                         std::to_string(step_in_epoch_) + " of its epoch, which has " + std::to_string(per_epoch) +
                         " batches with this data and batch size: resume with the data and batch size it was saved with");
      epoch_fraction_ = epoch_now(per_epoch);
    }
    open_log();
    train::StaticBatch<D> batch(device_);
    std::vector<std::size_t> order = ranks_.share(epoch_order(all));
    train::Prefetch<D> prefetch(data, n, B);  // after `order`, which its thread reads
    train::Parameters<T> grads;
    double run_loss = 0;
    long run_steps = 0;
    const long first_step = global_step_;
    progress_.start(global_step_, total_, !args_.disable_tqdm && is_world_process_zero());
    // Batch b of the epoch on the trainer's device; the next one of the epoch is made meanwhile.
    const auto load = [&](std::size_t b) { return batch.load(prefetch.take(order, b, b + 1 < per_epoch)); };
    while (global_step_ < total_) {
      if (step_in_epoch_ == per_epoch) {
        ++epoch_, step_in_epoch_ = 0;
        order = ranks_.share(epoch_order(all));
      }
      const double lr = learning_rate_at(args_, global_step_, total_);
      // One update from the next K batches of the epoch (fewer at its end): the mean of their
      // losses and of their gradients.
      const std::size_t take = std::min(K, per_epoch - step_in_epoch_);
      double loss = 0, norm = 0, samples = 0;
      for (std::size_t j = 0; j < take; ++j) samples += static_cast<double>(W * std::min(B, n - (step_in_epoch_ + j) * B));
      if (K == 1) {
        std::tie(loss, norm) = run_step(load(step_in_epoch_), lr);
      } else {
        hyper_.set(lr, static_cast<double>(global_step_ + 1), 1.0 / static_cast<double>(take * W));
        grads.clear();
        for (std::size_t j = 0; j < take; ++j)
          loss += engine_.accumulate(load(step_in_epoch_ + j), params_, grads, j + 1 == take ? ranks_.reducer() : nullptr);
        loss /= static_cast<double>(take);
        norm = engine_.update(grads, params_, moments_, hyper_);
      }
      loss = ranks_.mean(loss);
      ++global_step_, step_in_epoch_ += take, ++run_steps;
      run_loss += loss;
      pending_.add(loss, lr, norm);
      progress_.count(samples);
      const double epoch = epoch_fraction_ = epoch_now(per_epoch);
      if (args_.logging_steps > 0 && (global_step_ % args_.logging_steps == 0 || global_step_ == total_)) {
        LogRecord r = pending_.record(global_step_, epoch);
        std::tie(r.steps_per_second, r.samples_per_second) = progress_.rates();
        record(r);
        pending_ = {};
      }
      if constexpr (!std::is_same_v<E, train::NoData>)
        if (args_.eval_steps > 0 && global_step_ % args_.eval_steps == 0) evaluate(eval);
      if (args_.save_steps > 0 && global_step_ % args_.save_steps == 0) save_checkpoint();
      progress_.update(global_step_, loss);
    }
    progress_.finish();
    train::TrainOutput out{global_step_, run_steps > 0 ? run_loss / static_cast<double>(run_steps) : 0.0};
    out.train_runtime = progress_.seconds();
    out.train_steps_per_second = static_cast<double>(global_step_ - first_step) / std::max(out.train_runtime, 1e-9);
    out.train_samples_per_second = progress_.samples() / std::max(out.train_runtime, 1e-9);
    summarise(out);
    return out;
  }

  // The model's predictions over `data` in order, in batches of per_device_eval_batch_size, on the
  // host: the value of the model's predictions() (one program) or head_predictions() (a stack
  // of layers; a static_assert says which is missing) for each batch, concatenated along the
  // first axis; with the mean loss (HF's predict(): predictions and test_loss). Not logged.
  template <train::Dataset D>
  auto predict(const D& data) {
    using Bound = decltype(std::declval<train::StaticBatch<D>&>().load(data.batch(std::span<const std::size_t>{})));
    using U = typename std::remove_cvref_t<decltype(engine_.predict(std::declval<Bound>(), params_).first)>::value_type;
    std::vector<Tensor<U>> parts;
    double total = 0;
    in_order(data, "kiln::Trainer::predict", [&](const auto& bound, std::size_t count) {
      auto [p, loss] = engine_.predict(bound, params_);
      parts.push_back(p.cpu());
      total += loss * static_cast<double>(count);
    });
    return train::PredictionOutput<U>{train::concat_rows(parts, "kiln::Trainer::predict"),
                                      total / static_cast<double>(data.size())};
  }

  // The mean loss over `data` in order, in batches of per_device_eval_batch_size (each batch's
  // loss weighted by its size, as HF's evaluation loop averages); logged as an eval_loss record
  // at the current step, as HF's evaluate() logs it.
  template <train::Dataset D>
  double evaluate(const D& data) {
    const double loss = evaluation_loss(data);
    record({.step = global_step_, .epoch = epoch_fraction_, .eval_loss = loss});
    return loss;
  }

 private:
  template <train::Dataset D>
  double evaluation_loss(const D& data) {
    double total = 0;
    const auto W = static_cast<std::size_t>(world_size()), r = static_cast<std::size_t>(process_index());
    ranks_.check_same_size(data.size(), "kiln::Trainer::evaluate");
    in_order(data, "kiln::Trainer::evaluate", [&](const auto& bound, std::size_t count) {
      total += engine_.loss(bound, params_) * static_cast<double>(count);
    }, W, r);
    total = ranks_.sum(total);  // every rank's batches: the sum of all of them
    return total / static_cast<double>(data.size());
  }
  // f(batch bound on the device, its sample count) for the batches of per_device_eval_batch_size
  // samples of `data` in order (of those, batches first, first + every, ...); a ValueError
  // naming `who` when there are none.
  template <train::Dataset D, class F>
  void in_order(const D& data, const char* who, F&& f, std::size_t every = 1, std::size_t first_batch = 0) {
    const std::size_t n = data.size(), B = static_cast<std::size_t>(args_.per_device_eval_batch_size);
    if (n == 0) throw ValueError(std::string(who) + ": the data has no samples");
    std::vector<std::size_t> rows(n);
    std::iota(rows.begin(), rows.end(), std::size_t{0});
    train::StaticBatch<D> batch(device_);
    for (std::size_t first = first_batch * B; first < n; first += every * B) {
      const std::size_t count = std::min(B, n - first);
      f(batch.load(data.batch(std::span(rows).subspan(first, count))), count);
    }
  }

 public:

  // Writes output_dir/checkpoint-<global_step> now (atomically; see the top of this file) and
  // removes the oldest beyond save_total_limit. Returns its path. In a data-parallel run only
  // rank 0 writes (every rank holds the same state).
  std::string save_checkpoint() {
    const std::filesystem::path dir = std::filesystem::path(args_.output_dir) / ("checkpoint-" + std::to_string(global_step_));
    if (!is_world_process_zero()) return dir.string();
    nlohmann::json state = {{"global_step", global_step_},
                            {"epoch", epoch_},
                            {"step_in_epoch", step_in_epoch_},
                            {"max_steps", total_},
                            {"seed", args_.seed},
                            {"world_size", world_size()},
                            {"pending_log", {pending_.steps, pending_.loss, pending_.learning_rate, pending_.grad_norm}},
                            {"log_history", nlohmann::json::array()}};
    for (const LogRecord& r : log_) state["log_history"].push_back(train::to_json(r));
    train::write_checkpoint<T>(dir, {{"model.safetensors", &params_}, {"optimizer.safetensors", &moments_}}, state);
    train::rotate_checkpoints(args_.output_dir, args_.save_total_limit);
    return dir.string();
  }

 private:
  // How a step is computed: one program for a model with a loss() (train/step.hpp), one program
  // per region for a stack of layers (train/stacked.hpp).
  template <class M, class = void>
  struct EngineOf {
    using type = train::OneProgramStep<M, Policies...>;
  };
  template <train::StackedModel M>
  struct EngineOf<M, void> {
    using type = train::StackedStep<M, Policies...>;
  };
  using Engine = typename EngineOf<Trained>::type;

  // One update: the step with the batch and the hyper-parameters of this step; returns the
  // loss and the gradient norm before clipping.
  template <class Bound>
  std::pair<double, double> run_step(const Bound& batch, double lr) {
    hyper_.set(lr, static_cast<double>(global_step_ + 1), 1.0 / static_cast<double>(world_size()));
    return engine_.step(batch, params_, moments_, hyper_, ranks_.reducer());
  }

  std::vector<std::size_t> epoch_order(std::size_t n) const {
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 rng(args_.seed + static_cast<std::uint64_t>(epoch_));
    std::shuffle(order.begin(), order.end(), rng);
    return order;
  }
  double epoch_now(std::size_t per_epoch) const {
    return static_cast<double>(epoch_) + static_cast<double>(step_in_epoch_) / static_cast<double>(per_epoch);
  }

  // The log: a record is kept, written to output_dir/trainer_log.jsonl (report_to "jsonl") and
  // printed (print_logs) as a line of text.
  void open_log() {
    log_file_.reset();
    if (args_.report_to != "jsonl" || !is_world_process_zero()) return;
    std::error_code ec;
    std::filesystem::create_directories(args_.output_dir, ec);
    const std::string path = (std::filesystem::path(args_.output_dir) / "trainer_log.jsonl").string();
    log_file_.emplace(path, std::ios::trunc);
    if (!*log_file_) throw FileError("kiln::Trainer: cannot write " + path);
    for (const LogRecord& r : log_) *log_file_ << train::to_json(r).dump() << "\n";  // a resumed run's history
    log_file_->flush();
  }
  void record(const LogRecord& r) {
    log_.push_back(r);
    if (log_file_) *log_file_ << train::to_json(r).dump() << "\n" << std::flush;
    if (!args_.print_logs || !is_world_process_zero()) return;
    char line[320];
    int at = std::snprintf(line, sizeof line, "step %ld/%ld  epoch %.2f", r.step, total_, r.epoch);
    const auto add = [&](const char* format, double v) {
      if (!std::isnan(v) && at < static_cast<int>(sizeof line)) at += std::snprintf(line + at, sizeof line - static_cast<std::size_t>(at), format, v);
    };
    add("  loss %.4f", r.loss), add("  lr %.3g", r.learning_rate), add("  grad_norm %.3g", r.grad_norm);
    add("  eval_loss %.4f", r.eval_loss), add("  %.2f steps/s", r.steps_per_second), add("  %.0f samples/s", r.samples_per_second);
    progress_.print(line);
  }
  void summarise(const train::TrainOutput& out) {
    const nlohmann::json j = {{"train_runtime", out.train_runtime}, {"train_steps_per_second", out.train_steps_per_second},
                              {"train_samples_per_second", out.train_samples_per_second}, {"train_loss", out.training_loss},
                              {"global_step", out.global_step}};
    if (log_file_) *log_file_ << j.dump() << "\n" << std::flush;
    if (!args_.print_logs || !is_world_process_zero()) return;
    char line[256];
    std::snprintf(line, sizeof line, "trained to step %ld in %.1f s: %.2f steps/s, %.0f samples/s, mean loss %.4f", out.global_step,
                  out.train_runtime, out.train_steps_per_second, out.train_samples_per_second, out.training_loss);
    progress_.print(line);
  }
  // Reads a checkpoint written by save_checkpoint: every tensor must be there with its shape
  // (a FileError or ShapeError names the first that is not), then the loop's position.
  void load_checkpoint(const std::string& dir) {
    // Where the data stands is counted in batches per rank: resume with as many ranks (checked
    // before anything is read into the trainer; a missing state file is named by the reads below).
    if (std::filesystem::exists(dir + "/trainer_state.json"))
      train::read_checkpoint_state(dir, [&](const nlohmann::json& state) {
        const int saved_world = state.contains("world_size") ? state.at("world_size").get<int>() : 1;
        if (saved_world != world_size())
          throw ValueError("kiln::Trainer: checkpoint " + dir + " was saved by a run of " + std::to_string(saved_world) +
                           " rank(s); this run has " + std::to_string(world_size()) + ": resume with as many ranks");
      });
    train::read_checkpoint_tensors(dir, "model.safetensors", params_, device_);
    train::read_checkpoint_tensors(dir, "optimizer.safetensors", moments_, device_);
    train::read_checkpoint_state(dir, [&](const nlohmann::json& state) {
      global_step_ = state.at("global_step").get<long>();
      epoch_ = state.at("epoch").get<long>();
      step_in_epoch_ = state.at("step_in_epoch").get<std::size_t>();
      const auto& p = state.at("pending_log");
      pending_ = {p.at(0).get<long>(), p.at(1).get<double>(), p.at(2).get<double>(), p.at(3).get<double>()};
      log_.clear();
      for (const auto& r : state.at("log_history")) log_.push_back(train::log_record_from_json(r));
    });
  }

  TrainingArguments args_;
  Device device_;
  train::Ranks<T> ranks_;  // the ranks of a data-parallel run, or one
  std::shared_ptr<train::FlatState<T>> flat_;  // the memory of params_, moments_ and the gradients
  Parameters params_, moments_;                 // views of flat_'s parts
  train::Hyper<T> hyper_{device_};
  Engine engine_;
  long global_step_ = 0, epoch_ = 0, total_ = 0;
  double epoch_fraction_ = 0;  // epochs done, with the fraction of the current one
  std::size_t step_in_epoch_ = 0;
  std::vector<LogRecord> log_;
  std::optional<std::ofstream> log_file_;
  train::Progress progress_;
  // The sums of the steps since the last training record (kept in checkpoints, so that a resumed
  // run logs the means the uninterrupted one does).
  struct Pending {
    long steps = 0;
    double loss = 0, learning_rate = 0, grad_norm = 0;
    void add(double l, double lr, double norm) { ++steps, loss += l, learning_rate += lr, grad_norm += norm; }
    LogRecord record(long step, double epoch) const {
      const double k = static_cast<double>(steps);
      return {.step = step, .epoch = epoch, .loss = loss / k, .learning_rate = learning_rate / k, .grad_norm = grad_norm / k};
    }
  } pending_;
};

}  // namespace kiln
