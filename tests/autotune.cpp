// MaxAutotune's on-disk cache: a second process reuses the choices; corrupt, truncated or
// foreign files are ignored with a warning and rewritten; concurrent writers leave valid files.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "reference.hpp"

namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kiln-autotune-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// Runs the probe with KILN_CACHE_DIR=dir; returns its output line.
std::string probe(const fs::path& dir, const std::string& extra = "") {
  const fs::path out = dir.string() + ".out" + extra;
  const std::string cmd = "KILN_CACHE_DIR='" + dir.string() + "' '" KILN_PROBE_PATH "' > '" + out.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  std::stringstream s;
  s << f.rdbuf();
  INFO("probe output: " << s.str());
  CHECK(rc == 0);
  return s.str();
}

std::vector<fs::path> cache_files(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("a second process with the same cache does not retune") {
  const fs::path dir = fresh_dir("second");
  CHECK(probe(dir).find("tuned=2 cached=0 same") != std::string::npos);
  CHECK(cache_files(dir).size() == 2);
  CHECK(probe(dir).find("tuned=0 cached=2 same") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("corrupt, truncated and foreign cache files are ignored, reported and rewritten") {
  const fs::path dir = fresh_dir("corrupt");
  probe(dir);
  const auto files = cache_files(dir);
  REQUIRE(files.size() == 2);
  const std::string good0 = read(files[0]);
  {  // truncated
    std::ofstream(files[0], std::ios::binary | std::ios::trunc) << good0.substr(0, good0.size() / 2);
  }
  {  // garbage in place of the other
    std::ofstream(files[1], std::ios::binary | std::ios::trunc) << "\x01\x02 not a cache file";
  }
  std::string out = probe(dir, "1");
  CHECK(out.find("tuned=2 cached=0 same") != std::string::npos);
  CHECK(out.find("ignoring autotune cache file") != std::string::npos);
  CHECK(out.find("truncated") != std::string::npos);
  CHECK(probe(dir, "2").find("tuned=0 cached=2 same") != std::string::npos);  // rewritten and valid

  // A well-formed file whose key is another kernel's: copy one file over the other.
  const auto again = cache_files(dir);
  fs::copy_file(again[0], again[1], fs::copy_options::overwrite_existing);
  out = probe(dir, "3");
  CHECK(out.find("tuned=1 cached=1 same") != std::string::npos);
  CHECK(out.find("written for another kernel or machine") != std::string::npos);
  // A checksum that does not match the text (one changed digit in the timing).
  std::string text = read(again[0]);
  const auto ms = text.find("\nms ");
  text[ms + 4] = text[ms + 4] == '9' ? '8' : '9';
  std::ofstream(again[0], std::ios::binary | std::ios::trunc) << text;
  out = probe(dir, "4");
  CHECK(out.find("checksum mismatch") != std::string::npos);
  CHECK(out.find("same") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("concurrent processes writing one cache leave valid files") {
  const fs::path dir = fresh_dir("concurrent");
  std::string cmd;
  for (int i = 0; i < 4; ++i)
    cmd += "KILN_CACHE_DIR='" + dir.string() + "' '" KILN_PROBE_PATH "' > /dev/null 2>&1 & ";
  cmd += "wait";
  CHECK(std::system(cmd.c_str()) == 0);
  const auto files = cache_files(dir);
  CHECK(files.size() == 2);  // no temporary files left behind
  CHECK(probe(dir).find("tuned=0 cached=2 same") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("MaxAutotune reports its choice and the candidates' times") {
  const fs::path dir = fresh_dir("explain");
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  constexpr auto x = kiln::input<"x", 2>();
  auto f = kiln::compile<kiln::MaxAutotune>(kiln::exp(x) * 2.0f);
  const auto xt = kiln::randn<float>({64, 300}, 1);
  ref::check_close(f(x = xt), ref::map(ref::from(xt), [](double v) { return 2 * std::exp(v); }));
  const std::string e = f.explain();
  CHECK(e.find("autotune: chose ") != std::string::npos);
  CHECK(e.find("candidates: Default's configuration (threads=auto) ") != std::string::npos);
  CHECK(e.find("; threads=1 ") != std::string::npos);
  CHECK(f.autotune_stats().tuned == 1);
  auto g = kiln::compile<kiln::MaxAutotune>(kiln::exp(x) * 2.0f);
  g(x = xt);
  CHECK(g.autotune_stats().from_cache == 1);
  CHECK(g.explain().find("from the cache") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("MaxAutotune keeps Default's configuration unless a candidate beats it by the margin") {
  using kiln::runtime::kTuneMargin;
  using kiln::runtime::TuneChoice;
  const kiln::cpu::LaunchConfig one{1, 0, 0, 0}, two{2, 0, 0, 0};
  TuneChoice near;  // 3% faster: within the timing's noise, Default stays
  near.offer_default(1.0);
  near.offer(one, 0.97);
  CHECK(near.kept_default());
  CHECK(near.chosen().config.threads == 0);
  CHECK(near.chosen().ms == 1.0);
  TuneChoice far;  // the fastest of the candidates that beat the margin
  far.offer_default(1.0);
  far.offer(one, 0.90);
  far.offer(two, 0.80);
  far.offer(one, 0.85);
  CHECK(!far.kept_default());
  CHECK(far.chosen().config.threads == 2);
  CHECK(far.chosen().ms == 0.80);
  TuneChoice edge;  // exactly the margin is not more than it
  edge.offer_default(1.0);
  edge.offer(one, 1.0 - kTuneMargin);
  CHECK(edge.kept_default());
  TuneChoice none;  // no other candidate ran
  none.offer_default(2.0);
  CHECK(none.kept_default());
}
