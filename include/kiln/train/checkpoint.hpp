// kiln: the files of kiln::Trainer's checkpoints and log (trainer.hpp says what they hold): a
// checkpoint directory written atomically (checkpoint-<step>.tmp, then renamed), its tensor files
// read back with their shapes checked, the oldest checkpoints removed beyond a limit, and the
// log history's records as JSON.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/errors.hpp"
#include "kiln/io/safetensors.hpp"

namespace kiln::train {

// Named parameter tensors (a model's weights), by their kiln::param names.
template <class T>
using Parameters = std::map<std::string, Tensor<T>>;

// One line of the log history: a training record (loss, learning rate, gradient norm, each the
// mean over the steps since the last record) or an evaluation (eval_loss); NaN where absent.
struct LogRecord {
  long step = 0;
  double epoch = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
  double learning_rate = std::numeric_limits<double>::quiet_NaN();
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  double eval_loss = std::numeric_limits<double>::quiet_NaN();
  double steps_per_second = std::numeric_limits<double>::quiet_NaN();    // since the last record
  double samples_per_second = std::numeric_limits<double>::quiet_NaN();  // since the last record
};

namespace detail {
inline constexpr const char* kLogFields[] = {"loss", "learning_rate", "grad_norm", "eval_loss", "steps_per_second",
                                             "samples_per_second"};
inline std::array<double*, 6> log_fields(LogRecord& r) {
  return {&r.loss, &r.learning_rate, &r.grad_norm, &r.eval_loss, &r.steps_per_second, &r.samples_per_second};
}
}  // namespace detail

// A record as HF's log history writes it: step, epoch and the fields present (not NaN).
inline nlohmann::json to_json(LogRecord r) {
  nlohmann::json j = {{"step", r.step}, {"epoch", r.epoch}};
  const auto values = detail::log_fields(r);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isnan(*values[i])) j[detail::kLogFields[i]] = *values[i];
  return j;
}
inline LogRecord log_record_from_json(const nlohmann::json& j) {
  LogRecord r{.step = j.at("step").get<long>(), .epoch = j.at("epoch").get<double>()};
  const auto values = detail::log_fields(r);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (j.contains(detail::kLogFields[i])) *values[i] = j.at(detail::kLogFields[i]).template get<double>();
  return r;
}

// Writes directory `dir`: each tensor file (a name and the tensors it holds) as safetensors,
// and trainer_state.json. Written to dir.tmp and renamed, so a killed run leaves either the
// complete directory or none (a previous dir of that name is replaced).
template <class T>
void write_checkpoint(const std::filesystem::path& dir, const std::vector<std::pair<std::string, const Parameters<T>*>>& files,
                      const nlohmann::json& state) {
  namespace fs = std::filesystem;
  const fs::path tmp = dir.string() + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw FileError("kiln::Trainer: cannot create " + tmp.string() + ": " + ec.message());
  for (const auto& [file, tensors] : files) {
    std::vector<io::NamedTensor> named;
    for (const auto& [name, t] : *tensors) named.emplace_back(name, t);
    io::save_safetensors((tmp / file).string(), named);
  }
  {
    std::ofstream out(tmp / "trainer_state.json");
    out << state.dump(2) << "\n";
    if (!out) throw FileError("kiln::Trainer: cannot write " + (tmp / "trainer_state.json").string());
  }
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec) throw FileError("kiln::Trainer: cannot rename " + tmp.string() + " to " + dir.string() + ": " + ec.message());
}

// Reads tensor file `file` of checkpoint `dir` into `into`: every tensor of `into` must be there
// with its shape (a FileError or ShapeError names the first that is not).
template <class T>
void read_checkpoint_tensors(const std::string& dir, const std::string& file, Parameters<T>& into, Device device) {
  const io::SafetensorsFile f(dir + "/" + file);
  for (auto& [name, t] : into) {
    Tensor<T> v = f.get<T>(name, device);
    if (!(v.shape() == t.shape()))
      throw ShapeError("kiln::Trainer: checkpoint " + dir + ": \"" + name + "\" has shape " + v.shape().str() +
                       ", the trainer's " + t.shape().str());
    t.copy_from(v);
  }
}

// The trainer_state.json of checkpoint `dir`, parsed by read(json) (a FileError names the
// checkpoint where the file is missing or read() finds it malformed).
template <class Read>
void read_checkpoint_state(const std::string& dir, Read&& read) {
  std::ifstream in(dir + "/trainer_state.json");
  if (!in) throw FileError("kiln::Trainer: checkpoint " + dir + " has no readable trainer_state.json");
  try {
    read(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw FileError("kiln::Trainer: checkpoint " + dir + ": trainer_state.json: " + e.what());
  }
}

// Removes the oldest checkpoint-<step> directories of output_dir beyond the newest `limit`
// (none where limit <= 0).
inline void rotate_checkpoints(const std::string& output_dir, long limit) {
  namespace fs = std::filesystem;
  if (limit <= 0) return;
  std::vector<std::pair<long, fs::path>> found;
  for (const auto& e : fs::directory_iterator(output_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0) continue;
    const std::string digits = name.substr(11);
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stol(digits), e.path());
  }
  std::sort(found.begin(), found.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(limit) < found.size(); ++i) fs::remove_all(found[i].second);
}

}  // namespace kiln::train
