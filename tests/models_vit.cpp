// ViT loaded from a Hugging Face checkpoint and compiled, against what transformers computes.
// tests/data/vit_tiny was written by tests/data/make_model_fixtures.py (transformers 4.40.2,
// torch 1.13): ViTForImageClassification for 32 x 32 images of 3 channels in 8 x 8 patches,
// hidden size 48, 4 heads, 2 layers, 10 labels, random weights; reference.safetensors holds
// pixel_values [2, 3, 32, 32] and the logits transformers computes for them in float64.
#include "kiln/models/image_processor.hpp"
#include "kiln/models/vit.hpp"
#include "model_cases.hpp"

#include <algorithm>
#include <cstring>

namespace {
const std::string kTiny = model_cases::fixture("vit_tiny");

struct Reference {
  kiln::Tensor<double> pixels, logits;
};
Reference reference() {
  kiln::io::SafetensorsFile f(kTiny + "/reference.safetensors");
  Reference r{f.get<double>("pixel_values"), f.get<double>("logits")};
  REQUIRE(r.pixels.shape() == kiln::Shape{2, 3, 32, 32});
  REQUIRE(r.logits.shape() == kiln::Shape{2, 10});
  return r;
}

template <class T, class... Policies>
double error_of(const Reference& r) {
  const auto vit = kiln::models::ViT<T>::from_pretrained(kTiny, cases::device());
  auto fast = kiln::compile<Policies...>(vit);
  const auto x = r.pixels.as<T>().to(cases::device());
  const double first = model_cases::relative_error(fast(x), r.logits);
  CHECK(model_cases::relative_error(fast(x), r.logits) == first);
  return first;
}
}  // namespace

DEVICE_CASE("ViT from a Hugging Face checkpoint gives HF's logits", {
  const Reference r = reference();
  // Relative to the largest logit. Measured on the CPU: float 7.4e-7, bf16 1.4e-2 (the images
  // rounded to bf16 too).
  CHECK(error_of<float>(r) < 4e-6);
  CHECK(error_of<float, kiln::ReduceOverhead, kiln::FullGraph>(r) < 4e-6);
  CHECK(error_of<kiln::bf16>(r) < 6e-2);
})

DEVICE_CASE("ViT under CUDA graphs: one graph per batch size, replayed with the same results", {
  const Reference r = reference();
  const auto vit = kiln::models::ViT<float>::from_pretrained(kTiny, cases::device());
  auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(vit);
  auto x = r.pixels.as<float>().to(cases::device());
  const auto first = fast(x).cpu();
  for (int i = 0; i < 3; ++i) {
    // A new input tensor each call: its values are copied into the graph's own buffer.
    x = r.pixels.as<float>().to(cases::device());
    const auto again = fast(x).cpu();
    CHECK(std::memcmp(again.data(), first.data(), first.numel() * sizeof(float)) == 0);
  }
  // One image: another shape, another graph; its logits are the first image's.
  kiln::Tensor<double> one({1, 3, 32, 32});
  std::copy_n(r.pixels.data(), one.numel(), one.data());
  const auto single = fast(one.as<float>().to(cases::device())).cpu();
  for (std::size_t k = 0; k < 10; ++k) CHECK(single[k] == doctest::Approx(first[k]).epsilon(1e-5));
  const bool gpu = cases::device().is_cuda();
  CHECK(fast.graph_captures() == (gpu ? 1 : 0));
  CHECK(fast.graph_replays() == (gpu ? 2 : 0));
  // Profiling runs the three programs one by one, with the same logits, and explain() shows
  // each kernel's time.
  fast.profile();
  const auto profiled = fast(x).cpu();
  CHECK(std::memcmp(profiled.data(), first.data(), first.numel() * sizeof(float)) == 0);
  CHECK(fast.graph_replays() == (gpu ? 2 : 0));
  CHECK(fast.explain().find(" ms per call (") != std::string::npos);
})

TEST_CASE("ViT in float64 agrees with HF's float64 logits to rounding") {
  CHECK(error_of<double>(reference()) < 1e-13);  // measured 1.8e-15
}

TEST_CASE("ViT's configuration and inputs: what kiln refuses") {
  const auto vit = kiln::models::ViT<float>::from_pretrained(kTiny);
  CHECK(vit.config().num_labels == 10);  // from id2label, as transformers counts them
  CHECK(vit.config().patches() == 16);
  auto fast = kiln::compile(vit);
  CHECK_THROWS_WITH_AS(fast(kiln::zeros<float>({1, 3, 64, 64})), doctest::Contains("pixel_values must be [batch, 3, 32, 32]"),
                       kiln::ShapeError);
  using model_cases::edited_copy;
  using model_cases::replace;
  auto refused = [](const std::string& d) { return kiln::models::ViT<float>::from_pretrained(d); };
  CHECK_THROWS_WITH_AS(refused(edited_copy(kTiny, "vit_act", [](auto s) { return replace(s, "\"hidden_act\": \"gelu\"", "\"hidden_act\": \"relu\""); })),
                       doctest::Contains("\"hidden_act\" is \"relu\""), kiln::ValueError);
  CHECK_THROWS_WITH_AS(refused(edited_copy(kTiny, "vit_patch", [](auto s) { return replace(s, "\"patch_size\": 8", "\"patch_size\": 5"); })),
                       doctest::Contains("\"image_size\" (32) is not a multiple of \"patch_size\" (5)"), kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(edited_copy(kTiny, "vit_size", [](auto s) { return replace(s, "\"image_size\": 32", "\"image_size\": 64"); })),
                       doctest::Contains("\"vit.embeddings.position_embeddings\" has shape [1, 17, 48], the configuration gives [1, 65, 48]"),
                       kiln::ShapeError);
}

// tests/data/vit_image (tests/data/make_image_fixture.py): a 75 x 50 picture and a 13 x 9 one,
// and the pixel_values transformers' ViTImageProcessor (through Pillow's bilinear resize) makes
// of them at 32 x 32; then vit_tiny's float64 logits for the first.
TEST_CASE("ImageProcessor gives transformers' pixel_values, Pillow's bilinear resize to the bit, and ViT its logits") {
  const auto processor = kiln::models::ImageProcessor::from_pretrained(kTiny);
  CHECK(processor.height == 32);
  CHECK(processor.width == 32);
  kiln::io::SafetensorsFile f(model_cases::fixture("vit_image") + "/reference.safetensors");
  for (const std::string name : {"large", "small"}) {
    INFO(name);
    const auto rgb = f.get_integers(name + "_rgb");
    const kiln::Shape s = f.info(name + "_rgb").shape;
    REQUIRE(s.rank() == 3);
    const std::vector<std::uint8_t> bytes(rgb.begin(), rgb.end());
    const kiln::Tensor<float> got = processor(bytes.data(), s[0], s[1]);
    const kiln::Tensor<float> want = f.get<float>(name + "_pixel_values");
    REQUIRE(got.shape() == want.shape());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < want.numel(); ++i) differ += got[i] != want[i];
    CHECK(differ == 0);
    if (name == "large") {
      auto fast = kiln::compile(kiln::models::ViT<float>::from_pretrained(kTiny));
      CHECK(model_cases::relative_error(fast(got), f.get<double>("large_logits")) < 4e-6);
    }
  }
  CHECK_THROWS_AS(processor(nullptr, 0, 5), kiln::ShapeError);
  auto refused = [](const std::string& text) {
    return kiln::models::ImageProcessor::from(kiln::models::JsonConfig::from_text(text, "test"));
  };
  CHECK_THROWS_WITH_AS(refused(R"({"resample": 3})"), doctest::Contains("kiln resizes with bilinear (2) only"), kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(R"({"size": {"shortest_edge": 224}})"), doctest::Contains("no \"height\" and \"width\""),
                       kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(R"({"image_mean": [0.5, 0.5]})"), doctest::Contains("3 values"), kiln::FileError);
}
