// kiln: printing tensors, in the style of PyTorch.
//
//   std::cout << t;                                  // kiln::to_string(t) with the defaults
//   kiln::to_string(t, {.precision = 2, .threshold = 100, .edgeitems = 2});
//
// The text is "tensor(" + the values + the suffix + ")": the values in brackets, one level per
// axis, rows of a matrix on their own lines; a rank-0 tensor is its value alone. When the
// tensor has more than `threshold` elements it is summarised: along every axis longer than
// 2 * edgeitems only the first and last `edgeitems` entries are shown, with "..." between
// them. Numbers are fixed-point with `precision` digits after the point, or, when a shown
// value's magnitude is 1e8 or more or a nonzero one is below 1e-4, scientific with `precision`
// digits; all are right-aligned to one width. The suffix always names the element type
// (", dtype=f32"); it adds the shape when the values are summarised or empty
// (", shape=[1000, 1000]") and the device when it is not the CPU (", device=cuda:0").
// A CUDA tensor is copied to the host to be printed.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/core/tensor.hpp"

namespace kiln {

struct PrintOptions {
  int precision = 4;              // digits after the decimal point
  std::size_t threshold = 1000;   // more elements than this: summarised
  std::size_t edgeitems = 3;      // entries shown at each end of a summarised axis
};

namespace detail {
// The positions shown along each axis; kSkip stands for the "..." between the two ends.
inline constexpr std::size_t kSkip = static_cast<std::size_t>(-1);

template <class T>
class TensorPrinter {
 public:
  TensorPrinter(const T* v, const Shape& shape, const PrintOptions& o, bool summarise) : v_(v), shape_(shape), o_(o) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      std::vector<std::size_t> idx;
      const std::size_t n = shape[d], e = o.edgeitems;
      if (summarise && n > 2 * e) {
        for (std::size_t i = 0; i < e; ++i) idx.push_back(i);
        idx.push_back(kSkip);
        for (std::size_t i = n - e; i < n; ++i) idx.push_back(i);
      } else {
        for (std::size_t i = 0; i < n; ++i) idx.push_back(i);
      }
      shown_.push_back(std::move(idx));
    }
    // Choose the notation and width from the values shown.
    double max_abs = 0, min_nonzero = std::numeric_limits<double>::infinity();
    visit(0, 0, [&](double x) {
      if (!std::isfinite(x)) return;
      max_abs = std::max(max_abs, std::abs(x));
      if (x != 0) min_nonzero = std::min(min_nonzero, std::abs(x));
    });
    scientific_ = max_abs >= 1e8 || min_nonzero < 1e-4;
    visit(0, 0, [&](double x) { width_ = std::max(width_, number(x).size()); });
  }

  std::string values() const {
    if (shape_.size() == 0) return number(at(0));
    std::string s;
    block(s, 0, 0, 7);  // 7: the width of "tensor("
    return s;
  }

 private:
  double at(std::size_t i) const { return static_cast<double>(widen(v_[i])); }
  std::string number(double x) const {
    if constexpr (is_index_element_v<T>) return std::to_string(static_cast<long long>(x));
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[64];
    std::snprintf(buf, sizeof buf, scientific_ ? "%.*e" : "%.*f", std::max(0, o_.precision), x);
    return buf;
  }
  std::string padded(double x) const {
    std::string s = number(x);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }
  template <class F>
  void visit(std::size_t d, std::size_t offset, F&& f) const {
    if (d == shape_.size()) {
      f(at(offset));
      return;
    }
    std::size_t stride = 1;
    for (std::size_t k = d + 1; k < shape_.size(); ++k) stride *= shape_[k];
    for (std::size_t i : shown_[d])
      if (i != kSkip) visit(d + 1, offset + i * stride, f);
  }
  void block(std::string& s, std::size_t d, std::size_t offset, std::size_t indent) const {
    std::size_t stride = 1;
    for (std::size_t k = d + 1; k < shape_.size(); ++k) stride *= shape_[k];
    const bool last = d + 1 == shape_.size();
    // Between the blocks of axis d: ", " in a row; a new line (and a blank line per axis
    // below the next one) between rows and matrices.
    const std::string sep = last ? ", " : "," + std::string(shape_.size() - d - 1, '\n') + std::string(indent + d + 1, ' ');
    s += '[';
    bool first = true;
    for (std::size_t i : shown_[d]) {
      if (!first) s += sep;
      first = false;
      if (i == kSkip) s += "...";
      else if (last) s += padded(at(offset + i));
      else block(s, d + 1, offset + i * stride, indent);
    }
    s += ']';
  }

  const T* v_;
  const Shape& shape_;
  const PrintOptions& o_;
  std::vector<std::vector<std::size_t>> shown_;
  bool scientific_ = false;
  std::size_t width_ = 0;
};

template <class T>
std::string tensor_text(const Tensor<T>& t, const PrintOptions& options, Device device) {
  const std::size_t n = t.numel();
  const bool summarise = n > options.threshold;
  std::string s = "tensor(";
  if (n == 0) {
    s += "[]";
  } else {
    s += TensorPrinter<T>(t.data(), t.shape(), options, summarise).values();
  }
  if (summarise || n == 0) s += ", shape=" + t.shape().str();
  s += std::string(", dtype=") + dtype_name<T>();
  if (!device.is_cpu()) s += ", device=" + device.str();
  return s + ")";
}
}  // namespace detail

template <class T>
std::string to_string(const Tensor<T>& t, const PrintOptions& options = {}) {
  if (t.is_cuda()) return detail::tensor_text(t.cpu(), options, t.device());  // values from a host copy
  return detail::tensor_text(t, options, t.device());
}

template <class T>
std::ostream& operator<<(std::ostream& os, const Tensor<T>& t) {
  return os << to_string(t);
}

}  // namespace kiln
