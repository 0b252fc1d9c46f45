// kiln: the safetensors format (Hugging Face's checkpoints), read and written.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON, then one byte buffer:
//   {"name": {"dtype": "BF16", "shape": [768, 3072], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// Offsets are relative to the buffer, tensors are row-major, and the buffer holds exactly the
// tensors, without holes or overlaps.
//
// SafetensorsFile maps the file read-only (mmap) and checks the whole header before anything is
// read: the JSON's form, each dtype, that every shape's byte count equals its offsets' span, that
// the spans tile the buffer, and that the buffer is the rest of the file. Any breach is a
// kiln::FileError naming the file and the entry; nothing past the file is ever read. Only
// regular files are opened (not FIFOs or devices, which could block or never end).
//
//   kiln::io::SafetensorsFile f("model.safetensors");
//   kiln::Tensor<float> w = f.get<float>("h.0.attn.c_attn.weight");      // converted, a copy
//   kiln::Tensor<float> v = f.view<float>("h.0.attn.c_attn.weight");     // the mapped bytes, no copy
//   kiln::io::save_safetensors("out.safetensors", {{"w", w}, {"b", b}}, {{"format", "pt"}});
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/file.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln::io {

// One entry of the header.
struct TensorInfo {
  std::string name;
  std::string dtype;  // as the file names it: "F32", "BF16", "I64", ...
  Shape shape;
  std::size_t begin = 0, end = 0;  // byte offsets in the buffer
};

namespace detail {
// Bytes per element of each safetensors dtype; 0 for a name the format does not have.
inline std::size_t dtype_size(const std::string& d) {
  static const std::map<std::string, std::size_t> sizes{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},  {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  const auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}
template <class T>
constexpr const char* dtype_of() {
  if constexpr (std::is_same_v<T, float>) return "F32";
  else if constexpr (std::is_same_v<T, double>) return "F64";
  else if constexpr (std::is_same_v<T, bf16>) return "BF16";
  else if constexpr (std::is_same_v<T, f16>) return "F16";
  else if constexpr (std::is_same_v<T, i32>) return "I32";
  else return "I64";
}
// Read a value of a little-endian file (kiln supports little-endian hosts only, as x86-64 and
// the GPUs' hosts are).
template <class V>
V load(const unsigned char* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
}  // namespace detail

class SafetensorsFile {
 public:
  // Largest header accepted (the format's reference reader's limit).
  static constexpr std::size_t kMaxHeaderBytes = 100u << 20;

  explicit SafetensorsFile(const std::string& path) : path_(path) {
    {
      std::string why;
      const kiln::detail::RegularFile file(path.c_str(), why);
      if (!file.ok()) fail(file.error() ? "cannot open it: " + std::string(std::strerror(file.error())) : why);
      size_ = file.size();
      if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
        if (p == MAP_FAILED) fail("cannot map it: " + std::string(std::strerror(errno)));
        bytes_ = static_cast<const unsigned char*>(p);
      }
    }  // the mapping outlives the descriptor
    try {
      parse();
    } catch (...) {
      unmap();
      throw;
    }
  }
  ~SafetensorsFile() { unmap(); }
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // The entries in buffer order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const {
    const auto it = index_.find(name);
    if (it == index_.end()) fail("no tensor named \"" + name + "\"");
    return tensors_[it->second];
  }

  // The tensor as T, converted from a float type of the file (F64, F32, BF16, F16; rounding to
  // nearest even where T is narrower), on `device`. Integer dtypes: get_integers.
  template <class T>
  Tensor<T> get(const std::string& name, Device device = Device::cpu()) const {
    static_assert(is_float_element_v<T>,
                  "kiln::io::SafetensorsFile::get: T must be float, double, kiln::bf16 or kiln::f16; read integer "
                  "tensors with get_integers, or view an I32 or I64 tensor as kiln::i32 or kiln::i64");
    const TensorInfo& e = info(name);
    const unsigned char* p = data(e);
    Tensor<T> t(e.shape);
    const std::size_t n = e.shape.numel();
    auto convert = [&]<class S>(S) {
      for (std::size_t i = 0; i < n; ++i) t[i] = kiln::detail::element_from<T>(widen(detail::load<S>(p + i * sizeof(S))));
    };
    if (e.dtype == "F32") convert(float{});
    else if (e.dtype == "F64") convert(double{});
    else if (e.dtype == "BF16") convert(bf16{});
    else if (e.dtype == "F16") convert(f16{});
    else fail("tensor \"" + name + "\" has dtype " + e.dtype + ", not a float type; read it with get_integers");
    return device.is_cpu() ? t : t.to(device);
  }

  // The mapped bytes as a Tensor<T> view, no copy: valid while this object lives. The file's
  // dtype must be T's and the data aligned for T (as the format's writers align it).
  template <class T>
  Tensor<T> view(const std::string& name) const {
    static_assert(is_element_type_v<T>,
                  "kiln::io::SafetensorsFile::view: T must be float, double, kiln::bf16, kiln::f16, kiln::i32 or kiln::i64");
    const TensorInfo& e = info(name);
    if (e.dtype != detail::dtype_of<T>())
      fail("tensor \"" + name + "\" is " + e.dtype + ", so it cannot be viewed as " + detail::dtype_of<T>() + "; use get");
    const unsigned char* p = data(e);
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
      fail("tensor \"" + name + "\" is not aligned for a view; use get");
    // The mapping is read-only: a view is for reading (writing through it faults).
    return Tensor<T>::view(reinterpret_cast<T*>(const_cast<unsigned char*>(p)), e.shape);
  }

  // An integer tensor's values (I64, I32, I16, I8, U8, U16, U32, BOOL), widened to int64, with
  // its shape in info(name).shape. U64 values above 2^63 - 1 are a FileError.
  std::vector<std::int64_t> get_integers(const std::string& name) const {
    const TensorInfo& e = info(name);
    const unsigned char* p = data(e);
    const std::size_t n = e.shape.numel();
    std::vector<std::int64_t> out(n);
    auto widen_all = [&]<class S>(S) {
      for (std::size_t i = 0; i < n; ++i) {
        const S v = detail::load<S>(p + i * sizeof(S));
        if constexpr (std::is_same_v<S, std::uint64_t>)
          if (v > static_cast<std::uint64_t>(INT64_MAX)) fail("tensor \"" + name + "\" holds a U64 value above 2^63 - 1");
        out[i] = static_cast<std::int64_t>(v);
      }
    };
    if (e.dtype == "I64") widen_all(std::int64_t{});
    else if (e.dtype == "I32") widen_all(std::int32_t{});
    else if (e.dtype == "I16") widen_all(std::int16_t{});
    else if (e.dtype == "I8") widen_all(std::int8_t{});
    else if (e.dtype == "U8" || e.dtype == "BOOL") widen_all(std::uint8_t{});
    else if (e.dtype == "U16") widen_all(std::uint16_t{});
    else if (e.dtype == "U32") widen_all(std::uint32_t{});
    else if (e.dtype == "U64") widen_all(std::uint64_t{});
    else fail("tensor \"" + name + "\" has dtype " + e.dtype + ", not an integer type; read it with get");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw FileError("safetensors file " + path_ + ": " + what); }
  void unmap() {
    if (bytes_) ::munmap(const_cast<unsigned char*>(bytes_), size_);
    bytes_ = nullptr;
  }
  const unsigned char* data(const TensorInfo& e) const { return bytes_ + buffer_at_ + e.begin; }

  void parse() {
    if (size_ < 8) fail("shorter than the 8-byte header length");
    const std::uint64_t n = detail::load<std::uint64_t>(bytes_);
    if (n > kMaxHeaderBytes || n > size_ - 8)
      fail("the header length " + std::to_string(n) + " exceeds the file (" + std::to_string(size_) + " bytes) or 100 MiB");
    buffer_at_ = 8 + static_cast<std::size_t>(n);
    const std::size_t buffer_bytes = size_ - buffer_at_;
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(bytes_ + 8, bytes_ + buffer_at_);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("the header is not valid JSON (") + e.what() + ")");
    }
    if (!header.is_object()) fail("the header is not a JSON object");
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) fail("__metadata__ is not an object");
        for (const auto& [k, v] : entry.items()) {
          if (!v.is_string()) fail("__metadata__ value \"" + k + "\" is not a string");
          metadata_[k] = v.get<std::string>();
        }
        continue;
      }
      const std::string where = "tensor \"" + name + "\": ";
      if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
        fail(where + "needs dtype, shape and data_offsets");
      const auto &dt = entry["dtype"], &sh = entry["shape"], &off = entry["data_offsets"];
      if (!dt.is_string()) fail(where + "dtype is not a string");
      TensorInfo e;
      e.name = name;
      e.dtype = dt.get<std::string>();
      const std::size_t elem = detail::dtype_size(e.dtype);
      if (elem == 0) fail(where + "unknown dtype " + e.dtype);
      if (!sh.is_array() || sh.size() > static_cast<std::size_t>(kMaxRank))
        fail(where + "shape is not an array of at most " + std::to_string(kMaxRank) + " extents");
      std::vector<std::size_t> dims;
      std::size_t count = 1;
      bool zero = false, over = false;
      for (const auto& d : sh) {
        if (!d.is_number_unsigned()) fail(where + "an extent is not a non-negative integer");
        const auto v = d.get<std::uint64_t>();
        zero = zero || v == 0;
        over = over || v > kMaxElements || __builtin_mul_overflow(count, static_cast<std::size_t>(v), &count) ||
               count > kMaxElements;
        dims.push_back(static_cast<std::size_t>(v));
      }
      if (over && !zero) fail(where + "the shape has more elements than an index can address");
      e.shape = Shape(dims);
      const std::size_t bytes = zero ? 0 : count * elem;
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        fail(where + "data_offsets is not a pair of non-negative integers");
      const auto b = off[0].get<std::uint64_t>(), f = off[1].get<std::uint64_t>();
      if (b > f || f > buffer_bytes)
        fail(where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(f) + ") lie outside the " +
             std::to_string(buffer_bytes) + "-byte buffer");
      if (f - b != bytes)
        fail(where + "data_offsets span " + std::to_string(f - b) + " bytes, but " + e.dtype + " " + e.shape.str() +
             " needs " + std::to_string(bytes));
      e.begin = static_cast<std::size_t>(b);
      e.end = static_cast<std::size_t>(f);
      tensors_.push_back(std::move(e));
    }
    // The spans tile the buffer: in order, each begins where the last ended, and the last ends
    // at the buffer's end.
    std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::size_t at = 0;
    for (const TensorInfo& e : tensors_) {
      if (e.begin != at)
        fail("tensor \"" + e.name + "\" begins at byte " + std::to_string(e.begin) + " of the buffer, where " +
             std::to_string(at) + " was expected (the tensors must fill the buffer without holes or overlaps)");
      at = e.end;
    }
    if (at != buffer_bytes)
      fail("the tensors end at byte " + std::to_string(at) + " of a " + std::to_string(buffer_bytes) + "-byte buffer");
    for (std::size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  }

  std::string path_;
  const unsigned char* bytes_ = nullptr;
  std::size_t size_ = 0, buffer_at_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint split over several files, as Hugging Face saves large models: an index,
// model.safetensors.index.json, maps each tensor name to its file in the same directory
// ({"metadata": {...}, "weight_map": {"name": "model-00001-of-00002.safetensors", ...}}).
// Each shard is opened (and its header checked) the first time one of its tensors is asked for.
//   kiln::io::ShardedSafetensors ckpt("gemma/model.safetensors.index.json");
//   kiln::Tensor<float> w = ckpt.get<float>("model.layers.0.mlp.up_proj.weight");
class ShardedSafetensors {
 public:
  explicit ShardedSafetensors(const std::string& index_path) : index_path_(index_path) {
    const auto slash = index_path.find_last_of('/');
    dir_ = slash == std::string::npos ? "." : index_path.substr(0, slash);
    std::string why;
    const kiln::detail::RegularFile file(index_path.c_str(), why);
    if (!file.ok()) fail(file.error() ? "cannot open it: " + std::string(std::strerror(file.error())) : why);
    if (file.size() > SafetensorsFile::kMaxHeaderBytes) fail("larger than 100 MiB");
    const std::optional<std::string> text = file.read_all();
    if (!text) fail("cannot read it: " + std::string(std::strerror(errno)));
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("not valid JSON (") + e.what() + ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("no \"weight_map\" object");
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) fail("the file of \"" + name + "\" is not a string");
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        fail("the file of \"" + name + "\" is not a file name in the index's directory: \"" + shard + "\"");
      weight_map_[name] = shard;
    }
  }

  // Every tensor name and the file that holds it.
  const std::map<std::string, std::string>& weight_map() const { return weight_map_; }
  bool contains(const std::string& name) const { return weight_map_.count(name) != 0; }
  // The shard holding `name`, opened on first use.
  const SafetensorsFile& shard_of(const std::string& name) {
    const auto it = weight_map_.find(name);
    if (it == weight_map_.end()) fail("no tensor named \"" + name + "\"");
    auto& file = shards_[it->second];
    if (!file) file = std::make_unique<SafetensorsFile>(dir_ + "/" + it->second);
    if (!file->contains(name)) fail("\"" + name + "\" is not in " + it->second + ", where the index puts it");
    return *file;
  }
  template <class T>
  Tensor<T> get(const std::string& name, Device device = Device::cpu()) {
    return shard_of(name).template get<T>(name, device);
  }
  std::vector<std::int64_t> get_integers(const std::string& name) { return shard_of(name).get_integers(name); }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError("safetensors index " + index_path_ + ": " + what);
  }
  std::string index_path_, dir_;
  std::map<std::string, std::string> weight_map_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;
};

// One tensor to save: a name and any float tensor (a CUDA tensor is copied to the host).
struct NamedTensor {
  std::string name;
  std::string dtype;
  Shape shape;
  std::vector<unsigned char> bytes;
  template <class T>
  NamedTensor(std::string n, const Tensor<T>& t) : name(std::move(n)), dtype(detail::dtype_of<T>()), shape(t.shape()) {
    const Tensor<T> host = t.device().is_cpu() ? Tensor<T>() : t.cpu();
    const Tensor<T>& src = t.device().is_cpu() ? t : host;
    bytes.resize(src.numel() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), src.data(), bytes.size());
  }
};

// Writes the tensors with the metadata to a temporary file beside `path` that is then renamed
// over it: a reader never sees half a file. The header is padded with spaces to a multiple of
// 8 bytes and the buffer ordered by element size, so every tensor is aligned for a view. Two
// tensors of one name are a ValueError; a file that cannot be written, a FileError.
inline void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                             const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  // The buffer holds the tensors by element size, largest first (as Hugging Face's writer
  // orders them): each then starts at a multiple of its element size.
  std::vector<const NamedTensor*> order;
  for (const NamedTensor& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const NamedTensor* a, const NamedTensor* b) {
    return detail::dtype_size(a->dtype) > detail::dtype_size(b->dtype);
  });
  std::size_t at = 0;
  for (const NamedTensor* t : order) {
    if (t->name == "__metadata__" || header.contains(t->name))
      throw ValueError("kiln::io::save_safetensors: the name \"" + t->name + "\" is used twice (or is __metadata__)");
    std::vector<std::size_t> dims(t->shape.begin(), t->shape.end());
    header[t->name] = {{"dtype", t->dtype}, {"shape", dims}, {"data_offsets", {at, at + t->bytes.size()}}};
    at += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw FileError("safetensors file " + path + ": cannot write " + tmp + ": " + std::strerror(errno));
  const std::uint64_t n = text.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const NamedTensor* t : order)
    ok = ok && (t->bytes.empty() || std::fwrite(t->bytes.data(), 1, t->bytes.size(), f) == t->bytes.size());
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw FileError("safetensors file " + path + ": writing it failed: " + std::strerror(errno));
  }
}

}  // namespace kiln::io
