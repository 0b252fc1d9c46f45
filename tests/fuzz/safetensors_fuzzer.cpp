// libFuzzer target: kiln::io::SafetensorsFile on arbitrary bytes. The input is written to a file
// (the reader maps files), opened, and every tensor it lists is read: as float where its dtype is
// a float one, through get_integers otherwise, and as a view where kiln has its type. A bad file
// must be a kiln::FileError (or kiln::ShapeError for a shape past kiln's limits); a crash, a
// sanitizer report, a leak or any other exception is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/core/errors.hpp"
#include "kiln/io/safetensors.hpp"

namespace {
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/kiln-safetensors-fuzz-" + std::to_string(::getpid());
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    std::abort();
  }
  try {
    const kiln::io::SafetensorsFile file(path);
    for (const auto& t : file.tensors()) {
      if (t.dtype == "F32" || t.dtype == "F64" || t.dtype == "BF16" || t.dtype == "F16") {
        (void)file.get<float>(t.name);
        if (t.dtype == "F32") (void)file.view<float>(t.name);
      } else {
        (void)file.get_integers(t.name);
        if (t.dtype == "I64") (void)file.view<kiln::i64>(t.name);
      }
    }
    (void)file.metadata();
  } catch (const kiln::FileError&) {
  } catch (const kiln::ShapeError&) {
  }
  return 0;
}
