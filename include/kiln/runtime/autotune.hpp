// kiln: the on-disk autotune cache of MaxAutotune. One small text file per (kernel structure,
// shapes and strides, element type, machine) key, named by the key's FNV-1a hash, in
// $KILN_CACHE_DIR (default: $XDG_CACHE_HOME/kiln, else ~/.cache/kiln).
//
// A file that is missing is tuned and written; one that is truncated, corrupt or written for
// another key (a hash collision, another machine's copy) is ignored with a warning and
// rewritten. So is an entry that is not a regular file (a FIFO, a device, a link to one) or is
// larger than kAutotuneFileLimit: it is never opened, so a read neither blocks nor allocates
// more than the limit. Writes go to a temporary file that is renamed over the target, so
// concurrent processes never see half a file. Neither load nor store throws: a failure is a
// warning and a choice tuned again (load) or not kept (store).
#pragma once
#if defined(__unix__) || defined(__APPLE__)
#include "kiln/core/file.hpp"
#define KILN_AUTOTUNE_POSIX 1
#else
#define KILN_AUTOTUNE_POSIX 0
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/core/fixed_string.hpp"

namespace kiln::runtime {

namespace fs = std::filesystem;

inline void warn(const std::string& message) { std::fprintf(stderr, "kiln: %s\n", message.c_str()); }

// The machine part of every key: the CPU model and the thread count.
inline std::string machine_id() {
  static const std::string model = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model = "unknown cpu";
    while (std::getline(f, line))
      if (line.rfind("model name", 0) == 0) {
        model = line.substr(line.find(':') + 2);
        break;
      }
    return model;
  }();
  return model + "; " + std::to_string(cpu::max_threads()) + " threads";
}

inline fs::path cache_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "kiln";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "kiln";
  return fs::temp_directory_path() / "kiln-cache";
}

// A type's spelling, from the compiler: the structure of a lowered kernel.
template <class T>
constexpr std::string_view type_name() {
  return __PRETTY_FUNCTION__;
}

inline std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

struct TuneRecord {
  lower::LaunchConfig config;
  double ms = 0;
};

// The file format's version, raised when a stored config's meaning changes (2: a CUDA GEMM's
// variant 0 is kiln's choice and kLtAlgo + i cuBLASLt's algorithm i; a CUDA row kernel's chunks
// 1 asks for element loads; 3: a CUDA row reduction's chunks 0 is the register path and 2 the
// streamed 16-byte one; 4: Default's configuration is kept unless a candidate beats it by
// kTuneMargin, so choices stored by the fastest-wins rule are tuned again), so that an older
// cache is tuned again rather than misread.
inline constexpr const char* kAutotuneVersion = "4";

inline std::string encode_body(const std::string& key, const TuneRecord& r) {
  std::ostringstream s;
  s << "kiln-autotune " << kAutotuneVersion << "\nkey " << key << "\nconfig " << r.config.threads << ' ' << r.config.chunks << ' '
    << r.config.variant << ' ' << r.config.panel_bytes << "\nms " << r.ms << '\n';
  return s.str();
}

// The largest cache file read: a valid one is a few hundred bytes.
inline constexpr std::uintmax_t kAutotuneFileLimit = std::uintmax_t{1} << 20;

class AutotuneCache {
 public:
  explicit AutotuneCache(fs::path dir = cache_dir()) : dir_(std::move(dir)) {}

  fs::path path_for(const std::string& key) const { return dir_ / (hex(fnv1a(key)) + ".tune"); }

  // The stored choice for key, or nothing (missing: silently; unusable: with a warning).
  std::optional<TuneRecord> load(const std::string& key) const noexcept {
    try {
      return load_checked(key);
    } catch (const std::exception& e) {
      quiet_warn("cannot read the autotune cache; the kernel is tuned again", e.what());
    } catch (...) {
      quiet_warn("cannot read the autotune cache; the kernel is tuned again", "unknown error");
    }
    return std::nullopt;
  }

  // Writes atomically: a temporary file in the same folder, renamed over the target (a FIFO,
  // a link or an oversized file there is replaced, not written through).
  void store(const std::string& key, const TuneRecord& r) const noexcept {
    try {
      store_checked(key, r);
    } catch (const std::exception& e) {
      quiet_warn("cannot write the autotune cache; the choice is kept for this process only", e.what());
    } catch (...) {
      quiet_warn("cannot write the autotune cache; the choice is kept for this process only", "unknown error");
    }
  }

 private:
  // A warning that allocates nothing (for a failed allocation).
  static void quiet_warn(const char* what, const char* why) noexcept { std::fprintf(stderr, "kiln: %s (%s)\n", what, why); }

  // The file's bytes, at most kAutotuneFileLimit of them, or nothing with the reason in why.
  static std::optional<std::string> read_small_regular_file(const fs::path& p, std::string& why) {
#if KILN_AUTOTUNE_POSIX
    // Non-blocking: a FIFO put there between the check and the open does not block the open.
    const detail::RegularFile f(p.c_str(), why);
    if (!f.ok()) return std::nullopt;
    if (f.size() > kAutotuneFileLimit) {
      why = "larger than 1 MiB";
      return std::nullopt;
    }
    auto text = f.read_all();
    if (!text) why = "read error";
    return text;
#else
    std::ifstream f(p, std::ios::binary);
    if (!f) {
      why = "cannot be opened";
      return std::nullopt;
    }
    std::string text(static_cast<std::size_t>(kAutotuneFileLimit), '\0');
    f.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(f.gcount()));
    return text;
#endif
  }

  std::optional<TuneRecord> load_checked(const std::string& key) const {
    const fs::path p = path_for(key);
    const auto bad = [&](const std::string& why) {
      warn("ignoring autotune cache file " + p.string() + " (" + why + "); it will be tuned again and rewritten");
      return std::nullopt;
    };
    // Examined before it is opened: only a regular file (a link to one included) below the
    // size limit is read.
    std::error_code ec;
    const fs::file_status status = fs::status(p, ec);
    if (status.type() == fs::file_type::not_found) return std::nullopt;
    if (ec) return bad("cannot be examined: " + ec.message());
    if (!fs::is_regular_file(status)) return bad("not a regular file");
    const std::uintmax_t size = fs::file_size(p, ec);
    if (ec) return bad("cannot be examined: " + ec.message());
    if (size > kAutotuneFileLimit) return bad("larger than 1 MiB");
    std::string why;
    const std::optional<std::string> read = read_small_regular_file(p, why);
    if (!read) return bad(why);
    const std::string& text = *read;
    if (text.empty()) return bad("empty");
    const std::size_t check = text.rfind("check ");
    if (check == std::string::npos || text.back() != '\n') return bad("truncated");
    const std::string body = text.substr(0, check);
    if (text.substr(check) != "check " + hex(fnv1a(body)) + "\n") return bad("checksum mismatch");
    std::istringstream s(body);
    std::string magic, version, word, stored_key;
    s >> magic >> version;
    if (magic != "kiln-autotune" || version != kAutotuneVersion) return bad("not a kiln autotune file of this version");
    s >> word;
    s.get();
    std::getline(s, stored_key);
    if (word != "key" || stored_key != key) return bad("written for another kernel or machine");
    TuneRecord r;
    s >> word >> r.config.threads >> r.config.chunks >> r.config.variant >> r.config.panel_bytes;
    if (word != "config" || !s) return bad("unreadable configuration");
    s >> word >> r.ms;
    if (word != "ms" || !s) return bad("unreadable timing");
    return r;
  }

  void store_checked(const std::string& key, const TuneRecord& r) const {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) {
      warn("cannot create the autotune cache folder " + dir_.string() + ": " + ec.message());
      return;
    }
    const std::string body = encode_body(key, r);
    const fs::path target = path_for(key);
    std::random_device rd;
    const fs::path tmp = target.string() + ".tmp." + hex((std::uint64_t{rd()} << 32) ^ rd());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << body << "check " << hex(fnv1a(body)) << '\n';
      if (!f.flush()) {
        warn("cannot write the autotune cache file " + tmp.string());
        fs::remove(tmp, ec);
        return;
      }
    }
    fs::rename(tmp, target, ec);
    if (ec) {
      warn("cannot rename " + tmp.string() + " to " + target.string() + ": " + ec.message());
      fs::remove(tmp, ec);
    }
  }

  fs::path dir_;
};

// Whether a cached configuration is one the kernel offers: Default's, or one of its candidates
// for these arguments. Any other (a file edited by hand, or written when the candidates were
// other ones) is ignored as a corrupt file is, so no configuration reaches a kernel that its
// candidates() would not have produced.
inline bool offered(const lower::LaunchConfig& c, const std::vector<lower::LaunchConfig>& candidates) {
  return c == lower::LaunchConfig{} || std::find(candidates.begin(), candidates.end(), c) != candidates.end();
}
inline void warn_not_offered(const lower::LaunchConfig& c) {
  warn("ignoring an autotune cache entry: its configuration (threads " + std::to_string(c.threads) + ", chunks " +
       std::to_string(c.chunks) + ", variant " + std::to_string(c.variant) + ", panel bytes " + std::to_string(c.panel_bytes) +
       ") is not one this kernel offers; it will be tuned again and rewritten");
}

// How many kernels a compiled function tuned, and how many it read from the cache.
struct AutotuneStats {
  int tuned = 0;
  int from_cache = 0;
};

// MaxAutotune's choice. Default's launch configuration (lower::LaunchConfig{}, what Default and
// ReduceOverhead run) is timed first as the incumbent; a candidate replaces it only when it is
// faster by more than kTuneMargin of the incumbent's time, and then the fastest candidate wins.
// Without the margin the choice follows the timing's noise: on the H200, a 2^28-element
// pointwise kernel chose 128 threads at 0.1458 ms against Default's 256 at 0.1501 (3% apart) and
// then ran at 0.153 against 0.148 in the calls (docs/design-decisions.md), so a tuned program
// could be slower than the untuned one.
inline constexpr double kTuneMargin = 0.05;

struct TuneChoice {
  TuneRecord incumbent{{}, -1};  // Default's configuration and its time; ms < 0 before it is timed
  TuneRecord fastest{{}, 1e300};  // the fastest other candidate
  void offer_default(double ms) { incumbent = {lower::LaunchConfig{}, ms}; }
  void offer(const lower::LaunchConfig& c, double ms) {
    if (ms < fastest.ms) fastest = {c, ms};
  }
  bool kept_default() const { return incumbent.ms >= 0 && !(fastest.ms < incumbent.ms * (1 - kTuneMargin)); }
  TuneRecord chosen() const { return kept_default() ? incumbent : fastest; }
};

template <class F>
double time_ms(F&& f, int repeats = 3) {
  f();  // warm-up
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto a = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  return best;
}

inline std::string describe(const lower::LaunchConfig& c) {
  std::string s = "threads=" + (c.threads ? std::to_string(c.threads) : std::string("auto"));
  if (c.chunks) s += " chunks=" + std::to_string(c.chunks);
  if (c.variant) s += std::string(" path=") + (c.variant == 1 ? "row-panels" : c.variant == 2 ? "column-panels" : "rows-loop");
  if (c.panel_bytes) s += " panel=" + std::to_string(c.panel_bytes >> 10) + "KiB";
  return s;
}

}  // namespace kiln::runtime
