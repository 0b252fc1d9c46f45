// kiln: transformers' ViTImageProcessor, read from preprocessor_config.json: 8-bit RGB pixels
// to the pixel_values a ViT takes, with the same values transformers computes.
//
//   auto processor = kiln::models::ImageProcessor::from_pretrained("vit-base");
//   kiln::Tensor<float> pixels = processor(rgb, height, width);   // [1, 3, size, size]
//
// For an image of height x width pixels, rgb[(y * width + x) * 3 + c]:
//   resize (do_resize) to size.height x size.width with Pillow's bilinear filter, as
//     transformers does through PIL: separable, horizontal then vertical; along an axis scaled by
//     s = in / out, output pixel i is centred at (i + 0.5) s and weighs input pixel j by the
//     triangle max(0, 1 - |j + 0.5 - centre| / max(s, 1)), the weights normalised, then held as
//     integers of 22 fractional bits; each pass sums in integers from one half and keeps 8
//     bits (rounding, clamped to [0, 255]);
//   rescale (do_rescale): v * rescale_factor, in double, then float;
//   normalize (do_normalize): (v - image_mean[c]) / image_std[c], in float.
// Only resample 2 (bilinear, ViT's) and a size given as {"height", "width"} are read; other
// processors' settings are a FileError naming the file and the key.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/models/config.hpp"

namespace kiln::models {

// Pillow's 8-bit resampling with a bilinear filter (the maths at the top of this file).
namespace pil {
inline constexpr int kPrecisionBits = 32 - 8 - 2;

// For each of out pixels along an axis of in pixels: the first input pixel, the count, and the
// integer weights (ksize per output pixel).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<std::int32_t> weights;
};
inline Coefficients bilinear_coefficients(int in, int out) {
  const double scale = static_cast<double>(in) / out;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<std::size_t>(out));
  c.count.resize(static_cast<std::size_t>(out));
  c.weights.assign(static_cast<std::size_t>(out) * static_cast<std::size_t>(c.ksize), 0);
  std::vector<double> k(static_cast<std::size_t>(c.ksize));
  for (int i = 0; i < out; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int n = std::min(static_cast<int>(center + support + 0.5), in) - lo;
    double total = 0;
    const double ss = 1.0 / filterscale;
    for (int x = 0; x < n; ++x) {
      const double d = std::abs((x + lo - center + 0.5) * ss);
      total += k[static_cast<std::size_t>(x)] = d < 1.0 ? 1.0 - d : 0.0;
    }
    for (int x = 0; x < n; ++x) {
      const double w = total != 0.0 ? k[static_cast<std::size_t>(x)] / total : k[static_cast<std::size_t>(x)];
      c.weights[static_cast<std::size_t>(i * c.ksize + x)] =
          static_cast<std::int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[static_cast<std::size_t>(i)] = lo;
    c.count[static_cast<std::size_t>(i)] = n;
  }
  return c;
}
inline std::uint8_t clip8(std::int64_t v) {
  const std::int64_t x = v >> kPrecisionBits;
  return static_cast<std::uint8_t>(x < 0 ? 0 : x > 255 ? 255 : x);
}

// One pass along an axis: src [outer, in, inner] to [outer, out, inner].
inline std::vector<std::uint8_t> resample_axis(const std::vector<std::uint8_t>& src, std::size_t outer, int in, int out,
                                               std::size_t inner) {
  const Coefficients c = bilinear_coefficients(in, out);
  const auto n_in = static_cast<std::size_t>(in), n_out = static_cast<std::size_t>(out);
  std::vector<std::uint8_t> dst(outer * n_out * inner);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < n_out; ++i) {
      const std::size_t first = static_cast<std::size_t>(c.first[i]), count = static_cast<std::size_t>(c.count[i]);
      const std::int32_t* w = &c.weights[i * static_cast<std::size_t>(c.ksize)];
      for (std::size_t e = 0; e < inner; ++e) {
        std::int64_t acc = std::int64_t{1} << (kPrecisionBits - 1);
        for (std::size_t x = 0; x < count; ++x) acc += static_cast<std::int64_t>(src[(o * n_in + first + x) * inner + e]) * w[x];
        dst[(o * n_out + i) * inner + e] = clip8(acc);
      }
    }
  return dst;
}

// rgb [height, width, 3] resized to [out_h, out_w, 3]: the horizontal pass, then the vertical.
inline std::vector<std::uint8_t> resize_bilinear(const std::uint8_t* rgb, int height, int width, int out_h, int out_w) {
  std::vector<std::uint8_t> px(rgb, rgb + static_cast<std::size_t>(height) * static_cast<std::size_t>(width) * 3);
  if (out_w != width) px = resample_axis(px, static_cast<std::size_t>(height), width, out_w, 3);
  if (out_h != height) px = resample_axis(px, 1, height, out_h, static_cast<std::size_t>(out_w) * 3);
  return px;
}
}  // namespace pil

class ImageProcessor {
 public:
  bool do_resize = true, do_rescale = true, do_normalize = true;
  long height = 224, width = 224;
  double rescale_factor = 1.0 / 255;
  std::vector<double> image_mean{0.5, 0.5, 0.5}, image_std{0.5, 0.5, 0.5};

  // Reads dir/preprocessor_config.json with transformers' ViTImageProcessor defaults.
  static ImageProcessor from_pretrained(const std::string& dir) {
    return from(JsonConfig(dir + "/preprocessor_config.json"));
  }
  static ImageProcessor from(const JsonConfig& c) {
    ImageProcessor p;
    p.do_resize = c.boolean("do_resize", true);
    p.do_rescale = c.boolean("do_rescale", true);
    p.do_normalize = c.boolean("do_normalize", true);
    if (c.integer("resample", 2) != 2)
      c.fail_key("resample", "is " + std::to_string(c.integer("resample", 2)) + "; kiln resizes with bilinear (2) only");
    const JsonConfig size = c.object("size");
    if (c.has("size") && (!size.has("height") || !size.has("width")))
      c.fail_key("size", "has no \"height\" and \"width\"; kiln reads only a size given so");
    p.height = size.integer("height", 224, 1, 1 << 16);
    p.width = size.integer("width", 224, 1, 1 << 16);
    p.rescale_factor = c.number("rescale_factor", 1.0 / 255);
    p.image_mean = c.numbers("image_mean", {0.5, 0.5, 0.5});
    p.image_std = c.numbers("image_std", {0.5, 0.5, 0.5});
    if (p.image_mean.size() != 3 || p.image_std.size() != 3)
      c.fail("image_mean and image_std must have 3 values, one per channel of RGB");
    for (double s : p.image_std)
      if (s == 0) c.fail_key("image_std", "holds 0");
    return p;
  }

  // pixel_values [1, 3, out_h, out_w] for 8-bit RGB rgb [height, width, 3] (row-major), on the
  // CPU; out_h x out_w is the configured size, or the image's own without do_resize. An empty
  // image is a ShapeError.
  Tensor<float> operator()(const std::uint8_t* rgb, std::size_t image_height, std::size_t image_width) const {
    if (image_height == 0 || image_width == 0 || image_height > (1u << 16) || image_width > (1u << 16))
      throw ShapeError("ImageProcessor: an image of " + std::to_string(image_height) + " x " + std::to_string(image_width) +
                       " pixels; each side must be in [1, 65536]");
    const int h = static_cast<int>(image_height), w = static_cast<int>(image_width);
    const int oh = do_resize ? static_cast<int>(height) : h, ow = do_resize ? static_cast<int>(width) : w;
    const std::vector<std::uint8_t> px =
        do_resize ? pil::resize_bilinear(rgb, h, w, oh, ow) : std::vector<std::uint8_t>(rgb, rgb + static_cast<std::size_t>(h) * w * 3);
    Tensor<float> out({1, 3, static_cast<std::size_t>(oh), static_cast<std::size_t>(ow)});
    const std::size_t plane = static_cast<std::size_t>(oh) * static_cast<std::size_t>(ow);
    for (std::size_t c = 0; c < 3; ++c) {
      const float mean = static_cast<float>(image_mean[c]), std = static_cast<float>(image_std[c]);
      for (std::size_t i = 0; i < plane; ++i) {
        float v = px[i * 3 + c];
        if (do_rescale) v = static_cast<float>(px[i * 3 + c] * rescale_factor);
        if (do_normalize) v = (v - mean) / std;
        out.data()[c * plane + i] = v;
      }
    }
    return out;
  }
};

}  // namespace kiln::models
