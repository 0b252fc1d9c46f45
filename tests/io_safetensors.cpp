// The safetensors reader and writer: a file written by Hugging Face's own library, round trips
// of every float type, zero-copy views, and every kind of corrupt file, each a FileError that
// names the file and the fault.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <kiln/io/safetensors.hpp>
#include <kiln/kiln.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

// A fresh directory for one test's files, removed afterwards.
struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("kiln_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

// A file of the given header text and buffer bytes, in the format's layout.
std::string write_raw(const TempDir& t, const std::string& header, std::size_t buffer_bytes,
                      std::uint64_t header_length = ~std::uint64_t{0}) {
  const std::string path = t.file("raw.safetensors");
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t n = header_length == ~std::uint64_t{0} ? header.size() : header_length;
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  f << std::string(buffer_bytes, '\0');
  return path;
}

void check_fails(const std::string& path, const std::string& fault) {
  INFO("expected fault: " << fault);
  CHECK_THROWS_WITH_AS(kiln::io::SafetensorsFile{path}, doctest::Contains(fault.c_str()), kiln::FileError);
}

}  // namespace

// tests/data/reference.safetensors was written by Hugging Face's safetensors 0.8.0 (its numpy
// interface) from these arrays:
//   weight = arange(6, float32).reshape(2, 3) * 0.5 - 1,  half = float16 [1.5, -2, 0.099975586, 65504]
//   double = [[pi]] float64,  ids = int64 [[50256, 0, 7], [1, 2, 3]],  mask = int32 [1, 0, 1]
//   scalar = float32 2.5 (shape []),  metadata {"format": "np", "note": "kiln test fixture"}
TEST_CASE("a file written by Hugging Face's safetensors library") {
  kiln::io::SafetensorsFile f(KILN_TEST_DATA_DIR "/reference.safetensors");
  CHECK(f.tensors().size() == 6);
  CHECK(f.metadata().at("format") == "np");
  CHECK(f.metadata().at("note") == "kiln test fixture");
  const auto w = f.get<float>("weight");
  REQUIRE(w.shape() == kiln::Shape{2, 3});
  for (std::size_t i = 0; i < 6; ++i) CHECK(w[i] == static_cast<float>(i) * 0.5f - 1.0f);
  const auto h = f.get<float>("half");
  CHECK(h[0] == 1.5f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 0.0999755859375f);  // the f16 nearest 0.1
  CHECK(h[3] == 65504.0f);
  CHECK(f.get<double>("double")[0] == 3.141592653589793);
  CHECK(f.get<float>("double")[0] == static_cast<float>(3.141592653589793));
  CHECK(f.info("ids").shape == kiln::Shape{2, 3});
  CHECK(f.get_integers("ids") == std::vector<std::int64_t>{50256, 0, 7, 1, 2, 3});
  CHECK(f.get_integers("mask") == std::vector<std::int64_t>{1, 0, 1});
  CHECK(f.get<float>("scalar").shape() == kiln::Shape{});
  CHECK(f.get<float>("scalar")[0] == 2.5f);
  const auto v = f.view<float>("weight");  // the mapped bytes
  CHECK(v.is_view());
  CHECK(v[5] == 1.5f);
  CHECK_THROWS_WITH_AS(f.get<float>("ids"), doctest::Contains("has dtype I64, not a float type"), kiln::FileError);
  CHECK_THROWS_WITH_AS(f.get_integers("weight"), doctest::Contains("not an integer type"), kiln::FileError);
  CHECK_THROWS_WITH_AS(f.view<double>("weight"), doctest::Contains("is F32, so it cannot be viewed as F64"), kiln::FileError);
  CHECK_THROWS_WITH_AS(f.get<float>("bias"), doctest::Contains("no tensor named \"bias\""), kiln::FileError);
}

TEST_CASE("save and load every float type, with metadata, and views of the saved file") {
  TempDir t;
  const auto a = kiln::randn<float>({3, 5}, 1);
  const auto b = kiln::randn<float>({7}, 2).as<kiln::bf16>();
  const auto c = kiln::randn<float>({2, 2, 2}, 3).as<kiln::f16>();
  const auto d = kiln::randn<double>({4, 1}, 4);
  const auto empty = kiln::zeros<float>({0, 3});
  const std::string path = t.file("model.safetensors");
  kiln::io::save_safetensors(path, {{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"empty", empty}}, {{"format", "pt"}});
  CHECK_FALSE(fs::exists(path + ".tmp"));
  kiln::io::SafetensorsFile f(path);
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.info("b").dtype == "BF16");
  CHECK(f.info("c").dtype == "F16");
  const auto ra = f.get<float>("a");
  for (std::size_t i = 0; i < a.numel(); ++i) CHECK(ra[i] == a[i]);
  const auto rb = f.get<kiln::bf16>("b");
  const auto rb32 = f.get<float>("b");
  for (std::size_t i = 0; i < b.numel(); ++i) {
    CHECK(rb[i].bits == b[i].bits);
    CHECK(rb32[i] == static_cast<float>(b[i]));
  }
  const auto rc = f.view<kiln::f16>("c");  // aligned: the header is padded to 8 bytes
  for (std::size_t i = 0; i < c.numel(); ++i) CHECK(rc[i].bits == c[i].bits);
  const auto rd = f.view<double>("d");
  for (std::size_t i = 0; i < d.numel(); ++i) CHECK(rd[i] == d[i]);
  CHECK(f.get<float>("empty").shape() == kiln::Shape{0, 3});
  // A float tensor narrowed on reading: f64 to f32 rounds to nearest.
  CHECK(f.get<float>("d")[2] == static_cast<float>(d[2]));
  CHECK_THROWS_AS(kiln::io::save_safetensors(path, {{"a", a}, {"a", a}}), kiln::ValueError);
  CHECK_THROWS_AS(kiln::io::save_safetensors(t.file("no/such/dir/x.safetensors"), {{"a", a}}), kiln::FileError);
}

TEST_CASE("corrupt files are FileErrors naming the fault, never a read past the file") {
  TempDir t;
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(kiln::io::SafetensorsFile(write_raw(t, ok, 8)).get<float>("x").numel() == 2);

  check_fails(t.file("missing.safetensors"), "cannot open it");
  check_fails(t.dir.string(), "not a regular file");
  check_fails("/dev/zero", "not a regular file");
  {
    std::ofstream(t.file("short.safetensors")) << "abc";
    check_fails(t.file("short.safetensors"), "shorter than the 8-byte header length");
  }
  check_fails(write_raw(t, ok, 8, std::uint64_t{1} << 40), "the header length 1099511627776 exceeds the file");
  check_fails(write_raw(t, "{\"x\": [1, 2", 0), "the header is not valid JSON");
  check_fails(write_raw(t, "[1, 2]", 0), "the header is not a JSON object");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[2]}})", 8), "tensor \"x\": needs dtype, shape and data_offsets");
  check_fails(write_raw(t, R"({"x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype F33");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "not a non-negative integer");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[1,1,1,1,1,1,1],"data_offsets":[0,4]}})", 4),
              "shape is not an array of at most 6 extents");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
              "more elements than an index can address");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})", 8),
              "data_offsets [0, 800) lie outside the 8-byte buffer");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
              "data_offsets span 8 bytes, but F32 [3] needs 12");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                        16),
              "tensor \"y\" begins at byte 12 of the buffer, where 8 was expected");
  check_fails(write_raw(t, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        8),
              "where 8 was expected");
  check_fails(write_raw(t, ok, 12), "the tensors end at byte 8 of a 12-byte buffer");
  check_fails(write_raw(t, R"({"__metadata__":{"k":1}})", 0), "__metadata__ value \"k\" is not a string");
}

// Random damage to a valid file: byte flips, truncations and lying header lengths. Each copy is
// read in full or rejected with a FileError; nothing else may happen (under the sanitizers, no
// read past the mapping either).
TEST_CASE("damaged copies of a valid file are read or rejected") {
  TempDir t;
  std::ifstream in(KILN_TEST_DATA_DIR "/reference.safetensors", std::ios::binary);
  const std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(base.size() > 16);
  std::mt19937_64 rng(20261203);
  int read = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string b = base;
    switch (i % 3) {
      case 0:
        for (int k = 0, n = 1 + static_cast<int>(rng() % 8); k < n; ++k) b[rng() % b.size()] = static_cast<char>(rng());
        break;
      case 1:
        b.resize(rng() % b.size());
        break;
      default: {
        const std::uint64_t lies[] = {0, 1, 7, 9, b.size(), b.size() - 8, std::uint64_t{1} << 63, rng()};
        std::memcpy(b.data(), &lies[rng() % 8], 8);
      }
    }
    const std::string path = t.file("damaged.safetensors");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
    try {
      kiln::io::SafetensorsFile f(path);
      for (const auto& e : f.tensors()) {
        if (e.dtype[0] == 'F' || e.dtype == "BF16") CHECK(f.get<double>(e.name).numel() == e.shape.numel());
        else CHECK(f.get_integers(e.name).size() == e.shape.numel());
      }
      ++read;
    } catch (const kiln::FileError&) {
      ++rejected;
    }
  }
  CHECK(read + rejected == 2000);
  CHECK(rejected > 1000);  // most damage is caught; flips inside the data are not damage the format can see
}

TEST_CASE("a sharded checkpoint through its index") {
  TempDir t;
  const auto a = kiln::randn<float>({4, 3}, 5);
  const auto b = kiln::randn<float>({3}, 6).as<kiln::bf16>();
  kiln::io::save_safetensors(t.file("model-00001-of-00002.safetensors"), {{"layer.0.w", a}});
  kiln::io::save_safetensors(t.file("model-00002-of-00002.safetensors"), {{"layer.1.b", b}});
  const auto write = [&](const std::string& text) {
    std::ofstream(t.file("model.safetensors.index.json")) << text;
    return t.file("model.safetensors.index.json");
  };
  kiln::io::ShardedSafetensors ckpt(write(R"({"metadata": {"total_size": 54}, "weight_map": {
      "layer.0.w": "model-00001-of-00002.safetensors", "layer.1.b": "model-00002-of-00002.safetensors",
      "layer.2.w": "model-00003-of-00002.safetensors", "layer.3.w": "model-00001-of-00002.safetensors"}})"));
  CHECK(ckpt.weight_map().size() == 4);
  const auto ra = ckpt.get<float>("layer.0.w");
  for (std::size_t i = 0; i < a.numel(); ++i) CHECK(ra[i] == a[i]);
  CHECK(ckpt.get<float>("layer.1.b")[2] == static_cast<float>(b[2]));
  CHECK_THROWS_WITH_AS(ckpt.get<float>("layer.2.w"), doctest::Contains("cannot open it"), kiln::FileError);
  CHECK_THROWS_WITH_AS(ckpt.get<float>("layer.3.w"), doctest::Contains("is not in model-00001-of-00002.safetensors"),
                       kiln::FileError);
  CHECK_THROWS_WITH_AS(ckpt.get<float>("layer.4.w"), doctest::Contains("no tensor named"), kiln::FileError);
  CHECK_THROWS_WITH_AS(kiln::io::ShardedSafetensors(write(R"({"weight_map": {"w": "../secret.safetensors"}})")),
                       doctest::Contains("not a file name in the index's directory"), kiln::FileError);
  CHECK_THROWS_WITH_AS(kiln::io::ShardedSafetensors(write(R"({"metadata": {}})")), doctest::Contains("no \"weight_map\""),
                       kiln::FileError);
  CHECK_THROWS_AS(kiln::io::ShardedSafetensors(write("{")), kiln::FileError);
  CHECK_THROWS_AS(kiln::io::ShardedSafetensors(t.file("none.json")), kiln::FileError);
  REQUIRE(::mkfifo(t.file("fifo.json").c_str(), 0600) == 0);  // opening it for reading must not wait for a writer
  CHECK_THROWS_WITH_AS(kiln::io::ShardedSafetensors(t.file("fifo.json")), doctest::Contains("not a regular file"),
                       kiln::FileError);
}
