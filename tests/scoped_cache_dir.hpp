// A fresh, empty autotune cache for one test: sets KILN_CACHE_DIR to a new directory under the
// temporary directory (named by the tag and the process id), and on destruction removes it and
// puts the previous setting back. A MaxAutotune test that checks what tuning reports (the
// candidates it timed) needs one: with an earlier run's cache the choice is read back instead,
// and only the choice is described.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace test_support {

class ScopedCacheDir {
 public:
  explicit ScopedCacheDir(const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() / ("kiln-" + tag + "-" + std::to_string(::getpid()))) {
    if (const char* before = std::getenv("KILN_CACHE_DIR")) {
      had_before_ = true;
      before_ = before;
    }
    std::filesystem::remove_all(dir_);
    setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
  }
  ~ScopedCacheDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    if (had_before_) setenv("KILN_CACHE_DIR", before_.c_str(), 1);
    else unsetenv("KILN_CACHE_DIR");
  }
  ScopedCacheDir(const ScopedCacheDir&) = delete;
  ScopedCacheDir& operator=(const ScopedCacheDir&) = delete;

 private:
  std::filesystem::path dir_;
  bool had_before_ = false;
  std::string before_;
};

}  // namespace test_support
