// libFuzzer target: a Hugging Face config.json on arbitrary bytes, read as kiln reads GPT-2's
// (kiln::models::JsonConfig, then GPT2Config::from). A bad file must be a kiln::FileError, or a
// kiln::ValueError for a configuration kiln does not implement; a crash, a sanitizer report, a
// leak or any other exception is a finding. A configuration that is accepted must be one kiln
// can build: extents positive, n_embd a multiple of n_head.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kiln/core/errors.hpp"
#include "kiln/models/gpt2_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto json = kiln::models::JsonConfig::from_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    const auto c = kiln::models::GPT2Config::from(json);
    if (c.vocab_size < 1 || c.n_positions < 1 || c.n_embd < 1 || c.n_head < 1 || c.n_inner < 1 || c.n_layer < 0 ||
        c.n_embd % c.n_head != 0 || !(c.layer_norm_epsilon >= 0))
      std::abort();
    (void)json.string("model_type", "gpt2");
    (void)json.boolean("use_cache", true);
  } catch (const kiln::FileError&) {
  } catch (const kiln::ValueError&) {
  }
  return 0;
}
