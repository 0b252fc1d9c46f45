// An image classifier from Hugging Face (config.json, model.safetensors and
// preprocessor_config.json of a ViTForImageClassification in one directory) on a PNG file: the
// picture is decoded with libpng, prepared as transformers' ViTImageProcessor prepares it, and
// the model, compiled with CUDA graphs and static memory, gives the five most likely labels.
//
//   classify_image <checkpoint dir> <image.png>
//
// On a CUDA build with a GPU the model runs there in bf16; otherwise on the CPU in float.
#include <kiln/kiln.hpp>
#include <kiln/models/image_processor.hpp>
#include <kiln/models/vit.hpp>

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <numeric>
#include <string>
#include <vector>

namespace {

// The picture as 8-bit RGB, [height, width, 3] row-major (alpha dropped, grey widened).
std::vector<std::uint8_t> read_png(const std::string& path, std::size_t& height, std::size_t& width) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) throw kiln::FileError(path + ": " + image.message);
  image.format = PNG_FORMAT_RGB;
  std::vector<std::uint8_t> rgb(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, rgb.data(), 0, nullptr)) {
    png_image_free(&image);
    throw kiln::FileError(path + ": " + image.message);
  }
  height = image.height, width = image.width;
  return rgb;
}

template <class T>
int run(const std::string& dir, const std::string& png, kiln::Device dev) {
  std::size_t height = 0, width = 0;
  const std::vector<std::uint8_t> rgb = read_png(png, height, width);
  const auto processor = kiln::models::ImageProcessor::from_pretrained(dir);
  const kiln::Tensor<float> pixels = processor(rgb.data(), height, width);
  auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(kiln::models::ViT<T>::from_pretrained(dir, dev));
  const auto logits = fast(pixels.as<T>().to(dev)).cpu();  // [1, labels]
  // Probabilities by softmax, and the labels' names from config.json's id2label.
  const std::size_t n = logits.numel();
  const double top = *std::max_element(logits.data(), logits.data() + n);
  std::vector<double> p(n);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  const auto names = kiln::models::JsonConfig(dir + "/config.json").object("id2label");
  std::printf("%s (%zu x %zu) on %s:\n", png.c_str(), width, height, dev.str().c_str());
  for (std::size_t r = 0; r < std::min<std::size_t>(5, n); ++r) {
    const std::size_t i = order[r];
    std::printf("  %5.1f%%  %s\n", 100 * p[i] / total, names.string(std::to_string(i), "LABEL_" + std::to_string(i)).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: classify_image <checkpoint dir> <image.png>\n"), 2;
  try {
#if KILN_WITH_CUDA
    if (kiln::cuda::device_count() > 0) return run<kiln::bf16>(argv[1], argv[2], kiln::Device::cuda());
#endif
    return run<float>(argv[1], argv[2], kiln::Device::cpu());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classify_image: %s\n", e.what());
    return 1;
  }
}
