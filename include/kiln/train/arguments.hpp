// kiln: kiln::TrainingArguments, the options of kiln::Trainer by the names, meanings and
// defaults of Hugging Face's TrainingArguments, and the learning-rate schedules they name.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "kiln/core/errors.hpp"

namespace kiln {

struct TrainingArguments {
  std::string output_dir = "trainer_output";  // checkpoints go to output_dir/checkpoint-<step>
  double num_train_epochs = 3;                // used when max_steps <= 0
  long max_steps = -1;                        // > 0: the number of updates, overriding the epochs
  long per_device_train_batch_size = 8;
  long per_device_eval_batch_size = 8;
  long gradient_accumulation_steps = 1;  // batches whose mean gradient makes one update
  bool dataloader_drop_last = false;     // drop each epoch's last, partial batch
  double learning_rate = 5e-5;
  std::string lr_scheduler_type = "linear";  // linear, cosine, constant, constant_with_warmup
  long warmup_steps = 0;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;  // 0 or less: no clipping
  long logging_steps = 500;    // 0: no logging during training
  long eval_steps = 0;         // 0: no evaluation during training (evaluate() runs one)
  long save_steps = 500;       // 0: no checkpoints during training
  long save_total_limit = -1;  // > 0: keep only the newest that many checkpoints
  std::uint64_t seed = 42;     // the data order of epoch e comes from seed and e
  bool bf16 = false;           // bf16 mixed precision: true exactly when the model computes in kiln::bf16
  bool disable_tqdm = false;   // no progress bar (there is one only when stdout is a terminal)
  bool print_logs = true;      // each logged record, and the run's summary, as a line on stdout
  std::string report_to = "jsonl";  // "jsonl": every record to output_dir/trainer_log.jsonl; "none"
  // Data-parallel runs (several processes: docs/distributed.md).
  std::string ddp_backend;         // "tcp" (CPU), "nccl" (CUDA), or "" for the one that fits the device
  double ddp_bucket_cap_mb = 25;   // the most MiB of gradients summed over the ranks in one call
  double ddp_timeout = 1800;       // seconds to wait for the other ranks before a DistributedError
};

// The learning rate of update `step` (0 for the first) out of `total`, as HF's schedulers
// (transformers.get_scheduler) give it, with w = warmup_steps:
//   warmup (step < w, every type but constant):  lr step / w
//   linear:                lr max(0, (total - step) / max(1, total - w))
//   cosine:                lr max(0, (1 + cos(pi (step - w) / max(1, total - w))) / 2)
//   constant, constant_with_warmup after the warmup:  lr
inline double learning_rate_at(const TrainingArguments& a, long step, long total) {
  const std::string& type = a.lr_scheduler_type;
  const double lr = a.learning_rate, w = static_cast<double>(a.warmup_steps), s = static_cast<double>(step);
  if (type == "constant") return lr;
  if (s < w) return lr * s / std::max(1.0, w);
  const double rest = std::max(1.0, static_cast<double>(total) - w);
  if (type == "linear") return lr * std::max(0.0, (static_cast<double>(total) - s) / rest);
  if (type == "cosine") return lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * (s - w) / rest)));
  if (type == "constant_with_warmup") return lr;
  throw ValueError("kiln::TrainingArguments: lr_scheduler_type \"" + type +
                   "\" is not one of linear, cosine, constant, constant_with_warmup");
}

// A ValueError naming the first option out of range or not implemented.
inline void check_arguments(const TrainingArguments& a) {
  auto fail = [](const std::string& why) { throw ValueError("kiln::TrainingArguments: " + why); };
  if (a.per_device_train_batch_size < 1 || a.per_device_eval_batch_size < 1) fail("the batch sizes must be at least 1");
  if (a.gradient_accumulation_steps < 1)
    fail("gradient_accumulation_steps is " + std::to_string(a.gradient_accumulation_steps) + "; it must be at least 1");
  if (a.report_to != "jsonl" && a.report_to != "none") fail("report_to \"" + a.report_to + "\" is not one of jsonl, none");
  if (!(a.learning_rate >= 0) || !(a.weight_decay >= 0)) fail("learning_rate and weight_decay must be at least 0");
  if (a.max_steps <= 0 && !(a.num_train_epochs > 0)) fail("give max_steps > 0 or num_train_epochs > 0");
  if (a.warmup_steps < 0 || a.logging_steps < 0 || a.eval_steps < 0 || a.save_steps < 0)
    fail("warmup_steps, logging_steps, eval_steps and save_steps must be at least 0");
  if (!a.ddp_backend.empty() && a.ddp_backend != "tcp" && a.ddp_backend != "nccl")
    fail("ddp_backend \"" + a.ddp_backend + "\" is not one of tcp, nccl (or empty: the one that fits the device)");
  if (!(a.ddp_bucket_cap_mb > 0 && a.ddp_bucket_cap_mb <= 1e9) || !(a.ddp_timeout > 0 && a.ddp_timeout <= 1e9))
    fail("ddp_bucket_cap_mb and ddp_timeout must be greater than 0 and at most 1e9 (MiB, seconds)");
  const std::string& t = a.lr_scheduler_type;
  if (t != "linear" && t != "cosine" && t != "constant" && t != "constant_with_warmup")
    fail("lr_scheduler_type \"" + t + "\" is not one of linear, cosine, constant, constant_with_warmup");
}

}  // namespace kiln
