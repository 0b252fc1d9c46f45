// libFuzzer target: the autotune cache reader (kiln::runtime::AutotuneCache::load) on arbitrary
// bytes in an entry's file. With the first byte odd, the rest gets the checksum line kiln
// writes, so the fuzzer reaches the parser behind the checksum; otherwise the bytes are the file
// as they are. load must return (a record, or nothing with a warning) and never throw, crash or
// leak; a record's configuration then passes through offered(), as an executor's would. Each
// rejected input prints load's one-line warning (scripts/fuzz.sh closes the target's stderr).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/runtime/autotune.hpp"

namespace {
namespace rt = kiln::runtime;
const rt::fs::path& scratch_dir() {
  static const rt::fs::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    rt::fs::path d = rt::fs::path(tmp && *tmp ? tmp : "/tmp") / ("kiln-autotune-fuzz-" + std::to_string(::getpid()));
    rt::fs::create_directories(d);
    return d;
  }();
  return dir;
}
constexpr const char* kKey = "row kernel f32 rows 4 len 8 inner 1 outer 8";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const rt::AutotuneCache cache(scratch_dir());
  std::string text(reinterpret_cast<const char*>(data), size);
  if (!text.empty() && (text[0] & 1)) {
    text.erase(0, 1);
    text += "check " + rt::hex(kiln::fnv1a(text)) + "\n";
  }
  if (std::FILE* f = std::fopen(cache.path_for(kKey).c_str(), "wb")) {
    if (!text.empty()) std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  } else {
    std::abort();
  }
  const auto record = cache.load(kKey);
  if (record) (void)rt::offered(record->config, {{1, 0, 0, 0}, {2, 0, 0, 0}});
  return 0;
}
