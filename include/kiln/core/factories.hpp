// kiln: tensors made from values: zeros, ones, full, arange, from_vector. Each takes the
// element type as its template argument (float by default) and a device (the CPU by default;
// a CUDA tensor is filled on the host and copied, which needs the CUDA runtime in the program,
// core/device.hpp). Seeded random tensors are in core/random.hpp (randn, rand).
#pragma once
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln {

namespace detail {
// A value converted to the element type T through T's compute type (16-bit types: rounded to
// nearest even), as Tensor::as converts.
template <class T, class V>
T element_from(V v) {
  if constexpr (std::is_same_v<T, V>) return v;
  else return static_cast<T>(static_cast<compute_t<T>>(v));
}
template <class T>
Tensor<T> on_device(Tensor<T> host, Device device) {
  if (device.is_cpu()) return host;
  return host.to(device);
}
}  // namespace detail

// A tensor of `shape` whose elements are all `value`. The element type is value's type unless
// given: kiln::full({2, 3}, 1.5f) is f32, kiln::full<kiln::bf16>({2, 3}, 1.5f) is bf16.
template <class T = void, class V>
auto full(const Shape& shape, V value, Device device = Device::cpu()) {
  using E = std::conditional_t<std::is_void_v<T>, V, T>;
  static_assert(is_element_type_v<E> && (!std::is_void_v<T> || !std::is_integral_v<V>),
                "kiln::full: the element type must be float, double, kiln::bf16 or kiln::f16 (or an index type, "
                "named: kiln::full<kiln::i64>(shape, 1)); write the value as 1.0f, or name the type: "
                "kiln::full<float>(shape, 1)");
  Tensor<E> t(shape);
  t.fill(detail::element_from<E>(value));
  return detail::on_device(std::move(t), device);
}

template <class T = float>
Tensor<T> zeros(const Shape& shape, Device device = Device::cpu()) {
  return full<T>(shape, 0.0f, device);
}
template <class T = float>
Tensor<T> ones(const Shape& shape, Device device = Device::cpu()) {
  return full<T>(shape, 1.0f, device);
}
// Tensors of another tensor's shape and device (and element type, unless given).
template <class T = void, class U>
auto zeros_like(const Tensor<U>& t) {
  return zeros<std::conditional_t<std::is_void_v<T>, U, T>>(t.shape(), t.device());
}
template <class T = void, class U>
auto ones_like(const Tensor<U>& t) {
  return ones<std::conditional_t<std::is_void_v<T>, U, T>>(t.shape(), t.device());
}

// Rank 1: start, start + step, ... up to end (excluded), as numpy.arange and torch.arange:
// ceil((end - start) / step) elements, each computed as start + i * step in double.
template <class T = float>
Tensor<T> arange(double start, double end, double step = 1.0, Device device = Device::cpu()) {
  if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw ShapeError("arange: start " + std::to_string(start) + ", end " + std::to_string(end) + ", step " +
                     std::to_string(step) + ": the step must be nonzero and all three finite");
  const double count = std::ceil((end - start) / step);
  const std::size_t n = count > 0 ? static_cast<std::size_t>(count) : 0;
  Tensor<T> t({n});
  for (std::size_t i = 0; i < n; ++i) t[i] = detail::element_from<T>(start + static_cast<double>(i) * step);
  return detail::on_device(std::move(t), device);
}
// 0, 1, ..., end - 1 (rank 1).
template <class T = float>
Tensor<T> arange(double end, Device device = Device::cpu()) {
  return arange<T>(0.0, end, 1.0, device);
}

// A tensor holding `values` (copied), row-major; their count must be the shape's element count
// (ShapeError otherwise). Without a shape: rank 1.
template <class T>
Tensor<T> from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu()) {
  static_assert(is_element_type_v<T>,
                "kiln::from_vector: the values must be float, double, kiln::bf16, kiln::f16, kiln::i32 or kiln::i64 "
                "(a std::vector<float>, not std::vector<int>)");
  if (values.size() != shape.numel())
    throw ShapeError("from_vector: " + std::to_string(values.size()) + " values for shape " + shape.str() + ", which has " +
                     std::to_string(shape.numel()) + " elements");
  Tensor<T> t(shape);
  std::copy(values.begin(), values.end(), t.data());
  return detail::on_device(std::move(t), device);
}
template <class T>
Tensor<T> from_vector(const std::vector<T>& values, Device device = Device::cpu()) {
  return from_vector(values, Shape{values.size()}, device);
}

}  // namespace kiln
