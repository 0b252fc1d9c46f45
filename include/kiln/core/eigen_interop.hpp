// kiln: Eigen views of kiln tensors and kiln views of Eigen matrices, both without a copy.
//
//   Eigen::Map<RowMajorMatrix> m = t.as_eigen_matrix();    // rank 2, f32 or f64, on the CPU
//   auto e = t.as_eigen_tensor<3>();                        // Eigen::TensorMap, row-major
//   kiln::Tensor<float> v = kiln::from_eigen(a);            // a view over a's memory
//
// Tensors are row-major and contiguous. from_eigen accepts any Eigen object with its own
// memory (Matrix, Array, Map, Ref, a block or row of one) whose elements are row-major and
// contiguous: a row-major matrix, or a vector (a rank-1 view). A column-major matrix, Eigen's
// default, is rejected at compile time: its memory read row-major is its transpose, which
// from_eigen_transposed(m) gives, as a [cols, rows] view. Strided objects (a column of a
// row-major matrix, a block narrower than its matrix) are rejected at run time (ShapeError).
//
// Lifetime: a view does not own its memory. The Eigen object must outlive the view and every
// tensor the view is moved into, and must not be resized meanwhile; a copy of a view is a deep
// copy and owns its memory. A view of a const Eigen object must only be read (bind it as an
// input, not as an into() output, an assign() target or a copy_from destination).
// A temporary matrix (from_eigen(Eigen::MatrixXf(...))) is a compile error.
//
// Eigen's Tensor module is not included in a translation unit built by nvcc (as_eigen_tensor
// is then unavailable); matrix maps are.
#pragma once
#include <Eigen/Core>
#if !defined(__CUDACC__)
#include <unsupported/Eigen/CXX11/Tensor>
#endif

#include <string>
#include <type_traits>

#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln {

// The Eigen matrix type that as_eigen_matrix() maps.
template <class T>
using EigenRowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {
template <class T>
void check_eigen_map(const Tensor<T>& t, const char* what, int rank) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "kiln::Tensor::as_eigen_matrix / as_eigen_tensor: Eigen views of f32 and f64 tensors only; convert a "
                "16-bit tensor first, e.g. t.as<float>()");
  if (t.is_cuda())
    throw DeviceError(std::string("kiln::Tensor::") + what + ": the tensor is on " + t.device().str() +
                      "; Eigen maps host memory: copy it with .cpu() first");
  if (t.rank() != rank)
    throw ShapeError(std::string(what) + ": the tensor has shape " + t.shape().str() + " (rank " +
                     std::to_string(t.rank()) + "), the map needs rank " + std::to_string(rank));
}
#if !defined(__CUDACC__)
template <int R>
Eigen::DSizes<Eigen::Index, R> eigen_dims(const Shape& s) {
  Eigen::DSizes<Eigen::Index, R> d;
  for (int i = 0; i < R; ++i) d[i] = static_cast<Eigen::Index>(s[i]);
  return d;
}
#endif
}  // namespace detail

// What Tensor::as_eigen_matrix() and as_eigen_tensor<R>() return (found by argument-dependent
// lookup from tensor.hpp).
template <class T>
Eigen::Map<EigenRowMatrix<T>> eigen_matrix_map(Tensor<T>& t) {
  detail::check_eigen_map(t, "as_eigen_matrix", 2);
  return {t.data(), static_cast<Eigen::Index>(t.shape()[0]), static_cast<Eigen::Index>(t.shape()[1])};
}
template <class T>
Eigen::Map<const EigenRowMatrix<T>> eigen_matrix_map(const Tensor<T>& t) {
  detail::check_eigen_map(t, "as_eigen_matrix", 2);
  return {t.data(), static_cast<Eigen::Index>(t.shape()[0]), static_cast<Eigen::Index>(t.shape()[1])};
}
#if !defined(__CUDACC__)
template <int R, class T>
Eigen::TensorMap<Eigen::Tensor<T, R, Eigen::RowMajor>> eigen_tensor_map(Tensor<T>& t) {
  detail::check_eigen_map(t, "as_eigen_tensor", R);
  return {t.data(), detail::eigen_dims<R>(t.shape())};
}
template <int R, class T>
Eigen::TensorMap<const Eigen::Tensor<T, R, Eigen::RowMajor>> eigen_tensor_map(const Tensor<T>& t) {
  detail::check_eigen_map(t, "as_eigen_tensor", R);
  return {t.data(), detail::eigen_dims<R>(t.shape())};
}
#endif

namespace detail {
template <class E, bool Transposed>
auto eigen_view(E&& m) {
  using D = std::remove_cvref_t<E>;
  static_assert(std::is_base_of_v<Eigen::EigenBase<D>, D>,
                "kiln::from_eigen: the argument must be an Eigen matrix, array, Map or Ref");
  using S = typename D::Scalar;
  static_assert(std::is_same_v<S, float> || std::is_same_v<S, double>,
                "kiln::from_eigen: the Eigen scalar type must be float or double");
  static_assert(bool(Eigen::internal::traits<D>::Flags & Eigen::DirectAccessBit),
                "kiln::from_eigen: the argument is an Eigen expression without memory of its own (such as a * b); "
                "evaluate it into a matrix first");
  static_assert(!(std::is_base_of_v<Eigen::PlainObjectBase<D>, D> && std::is_rvalue_reference_v<E&&>),
                "kiln::from_eigen: the matrix is a temporary, which the view would outlive; keep it in a variable");
  constexpr bool vector = D::IsVectorAtCompileTime;
  static_assert(Transposed || vector || D::IsRowMajor,
                "kiln::from_eigen: the matrix is column-major (Eigen's default); kiln tensors are row-major. Use a "
                "row-major type (kiln::EigenRowMatrix<float>, or Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, "
                "Eigen::RowMajor>), or kiln::from_eigen_transposed(m), the [cols, rows] view of m's memory (m "
                "transposed)");
  static_assert(!Transposed || (!vector && !D::IsRowMajor),
                "kiln::from_eigen_transposed: for column-major matrices only; a row-major matrix or a vector is viewed "
                "as it is by kiln::from_eigen(m)");
  const auto rows = static_cast<std::size_t>(m.rows()), cols = static_cast<std::size_t>(m.cols());
  const char* fn = Transposed ? "from_eigen_transposed" : "from_eigen";
  const std::string dims = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  if (m.size() > 1 && m.innerStride() != 1)
    throw ShapeError(std::string(fn) + ": the Eigen object " + dims + " has inner stride " +
                     std::to_string(m.innerStride()) + " (a column of a row-major matrix, or a strided Map); a kiln "
                     "view needs contiguous elements: copy it into a matrix first");
  S* p = const_cast<S*>(m.data());
  if constexpr (vector) {
    return Tensor<S>::view(p, Shape{static_cast<std::size_t>(m.size())});
  } else {
    const std::size_t inner = D::IsRowMajor ? cols : rows, outer = D::IsRowMajor ? rows : cols;
    if (outer > 1 && static_cast<std::size_t>(m.outerStride()) != inner)
      throw ShapeError(std::string(fn) + ": the Eigen matrix " + dims + " has outer stride " +
                       std::to_string(m.outerStride()) + ", not " + std::to_string(inner) +
                       " (a block of a larger matrix, or a Map with an OuterStride); a kiln view needs contiguous "
                       "rows: copy it into a matrix first");
    return Transposed ? Tensor<S>::view(p, Shape{cols, rows}) : Tensor<S>::view(p, Shape{rows, cols});
  }
}
}  // namespace detail

// A tensor viewing the memory of a row-major Eigen matrix ([rows, cols]) or an Eigen vector
// ([size]); no copy. See the lifetime rule above.
template <class E>
auto from_eigen(E&& m) {
  return detail::eigen_view<E, false>(std::forward<E>(m));
}
// A column-major Eigen matrix's memory as a row-major [cols, rows] tensor: m transposed; no copy.
template <class E>
auto from_eigen_transposed(E&& m) {
  return detail::eigen_view<E, true>(std::forward<E>(m));
}

}  // namespace kiln
