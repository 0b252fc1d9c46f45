// kiln: a Hugging Face model's config.json, and the checkpoint beside it.
//
// JsonConfig reads the file whole (a regular file of at most 1 MiB, so a FIFO or a device cannot
// block or exhaust the reader) and gives typed values by Hugging Face's key names, each with the
// default HF's configuration class has. A key that is absent or null takes the default; a value
// of the wrong type or out of range is a kiln::FileError naming the file and the key. Nothing
// else in the file is interpreted, so a config written by any transformers version reads.
//
// Checkpoint opens a model directory's weights: model.safetensors, or the shards that
// model.safetensors.index.json lists.
//
//   kiln::models::JsonConfig cfg("gpt2/config.json");
//   long width = cfg.integer("n_embd", 768);
//   kiln::models::Checkpoint ckpt("gpt2");
//   kiln::Tensor<float> wte = ckpt.get<float>("wte.weight");
#pragma once
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/errors.hpp"
#include "kiln/core/file.hpp"
#include "kiln/io/safetensors.hpp"

namespace kiln::models {

class JsonConfig {
 public:
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 20;

  // Reads and parses `path`: a FileError if it cannot be read, is not a regular file, is larger
  // than kMaxBytes, or is not a JSON object.
  explicit JsonConfig(const std::string& path) : what_("config " + path) {
    std::string why;
    const kiln::detail::RegularFile file(path.c_str(), why);
    if (!file.ok()) fail(file.error() ? "cannot open it: " + std::string(std::strerror(file.error())) : why);
    if (file.size() > kMaxBytes) fail("larger than 1 MiB");
    const std::optional<std::string> text = file.read_all();
    if (!text) fail("cannot read it: " + std::string(std::strerror(errno)));
    parse(*text);
  }
  // The same from text already read; `what` names it in errors ("config <what>").
  static JsonConfig from_text(const std::string& text, const std::string& what) {
    JsonConfig c;
    c.what_ = "config " + what;
    if (text.size() > kMaxBytes) c.fail("larger than 1 MiB");
    c.parse(text);
    return c;
  }

  const std::string& what() const { return what_; }
  // Whether `key` is present and not null.
  bool has(const std::string& key) const { return json_.contains(key) && !json_[key].is_null(); }

  // An integer in [min, max]; a float with an integral value counts (1.0 for 1).
  long integer(const std::string& key, long fallback, long min = std::numeric_limits<long>::min(),
               long max = std::numeric_limits<long>::max()) const {
    if (!has(key)) return fallback;
    const auto& v = json_[key];
    long n = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(max))
        fail_key(key, "is " + v.dump() + ", above " + std::to_string(max));
      n = v.is_number_unsigned() ? static_cast<long>(v.get<unsigned long long>()) : v.get<long>();
    } else if (v.is_number_float() && std::nearbyint(v.get<double>()) == v.get<double>() &&
               std::abs(v.get<double>()) < 9.2e18) {
      n = static_cast<long>(v.get<double>());
    } else {
      fail_key(key, "is " + v.dump() + ", not an integer");
    }
    if (n < min || n > max)
      fail_key(key, "is " + std::to_string(n) + ", not in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return n;
  }
  // A finite number in [min, max].
  double number(const std::string& key, double fallback, double min = -std::numeric_limits<double>::max(),
                double max = std::numeric_limits<double>::max()) const {
    if (!has(key)) return fallback;
    const auto& v = json_[key];
    if (!v.is_number()) fail_key(key, "is " + v.dump() + ", not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || x > max)
      fail_key(key, "is " + v.dump() + ", not in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return x;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& v = json_[key];
    if (!v.is_boolean()) fail_key(key, "is " + v.dump() + ", not true or false");
    return v.get<bool>();
  }
  // An integer or a list of integers (HF's eos_token_id may be either), each in [min, max].
  std::vector<long> integers(const std::string& key, std::vector<long> fallback, long min = std::numeric_limits<long>::min(),
                             long max = std::numeric_limits<long>::max()) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_array()) return {integer(key, 0, min, max)};
    std::vector<long> out;
    for (std::size_t i = 0; i < json_[key].size(); ++i) {
      const JsonConfig item = element(key, i);
      out.push_back(item.integer(key, 0, min, max));
    }
    return out;
  }
  // A number or a list of numbers (an image processor's image_mean, say), each in [min, max].
  std::vector<double> numbers(const std::string& key, std::vector<double> fallback,
                              double min = -std::numeric_limits<double>::max(),
                              double max = std::numeric_limits<double>::max()) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_array()) return {number(key, 0, min, max)};
    std::vector<double> out;
    for (std::size_t i = 0; i < json_[key].size(); ++i) out.push_back(element(key, i).number(key, 0, min, max));
    return out;
  }
  // The object under key as a configuration of its own (its errors name "key.inner"); absent or
  // null, an empty one.
  JsonConfig object(const std::string& key) const {
    JsonConfig c;
    c.what_ = what_ + " \"" + key + "\"";
    c.json_ = has(key) ? json_[key] : nlohmann::json::object();
    if (!c.json_.is_object()) fail_key(key, "is " + json_[key].dump() + ", not an object");
    return c;
  }
  // The number of entries of an object or array (HF's id2label, say).
  long entries(const std::string& key, long fallback) const {
    if (!has(key)) return fallback;
    const auto& v = json_[key];
    if (!v.is_object() && !v.is_array()) fail_key(key, "is " + v.dump() + ", not an object or a list");
    return static_cast<long>(v.size());
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& v = json_[key];
    if (!v.is_string()) fail_key(key, "is " + v.dump() + ", not a string");
    return v.get<std::string>();
  }

  [[noreturn]] void fail(const std::string& why) const { throw FileError(what_ + ": " + why); }
  [[noreturn]] void fail_key(const std::string& key, const std::string& why) const {
    throw FileError(what_ + ": \"" + key + "\" " + why);
  }

 private:
  JsonConfig() = default;
  // Element i of the array under key, as the only value of a config (so that integer() reads it
  // with its checks and names the key).
  JsonConfig element(const std::string& key, std::size_t i) const {
    JsonConfig c;
    c.what_ = what_;
    c.json_ = nlohmann::json::object();
    c.json_[key] = json_[key][i];
    return c;
  }
  void parse(const std::string& text) {
    try {
      json_ = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("not valid JSON (") + e.what() + ")");
    }
    if (!json_.is_object()) fail("not a JSON object");
  }
  std::string what_;
  nlohmann::json json_;
};

// The special tokens generation reads from a model's configuration: eos_token_id (one id or a
// list; none if absent) and pad_token_id (-1 if absent).
struct SpecialTokens {
  std::vector<long> eos_token_ids;
  long pad_token_id = -1;
  void read(const JsonConfig& c) {
    eos_token_ids = c.integers("eos_token_id", {}, 0);
    pad_token_id = c.integer("pad_token_id", -1, 0);
  }
};

// A model directory's weights: dir/model.safetensors, or else the shards listed by
// dir/model.safetensors.index.json. A FileError if neither is there.
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir) : dir_(dir) {
    const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
    if (exists(single)) file_ = std::make_unique<io::SafetensorsFile>(single);
    else if (exists(index)) shards_ = std::make_unique<io::ShardedSafetensors>(index);
    else throw FileError("checkpoint " + dir + ": no model.safetensors or model.safetensors.index.json in it");
  }
  const std::string& dir() const { return dir_; }
  bool contains(const std::string& name) const { return file_ ? file_->contains(name) : shards_->contains(name); }
  // The tensor converted to T on `device`; a FileError naming it if the checkpoint lacks it.
  template <class T>
  Tensor<T> get(const std::string& name, Device device = Device::cpu()) const {
    if (!contains(name)) throw FileError("checkpoint " + dir_ + ": no tensor named \"" + name + "\"");
    return file_ ? file_->template get<T>(name, device) : shards_->template get<T>(name, device);
  }

 private:
  static bool exists(const std::string& path) {
    std::string why;
    const kiln::detail::RegularFile f(path.c_str(), why);
    return f.ok();
  }
  std::string dir_;
  std::unique_ptr<io::SafetensorsFile> file_;
  std::unique_ptr<io::ShardedSafetensors> shards_;
};

}  // namespace kiln::models
