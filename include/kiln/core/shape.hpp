// kiln: Shape, a small fixed-capacity list of extents (row-major, last axis fastest).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/core/config.hpp"
#include "kiln/core/errors.hpp"

namespace kiln {

// The bound on sizes: the product of a shape's extents, each zero counted as 1, is at most
// kMaxElements = 2^59. Then every element count and every row-major stride fits in index_t,
// the signed type kernels index with, and so does every byte count (at most 8 bytes an
// element: 2^62), with room left for rounding up to an alignment. An extent above
// PTRDIFF_MAX is a negative count converted to std::size_t, and is refused as negative.
inline constexpr std::size_t kMaxElements = std::size_t{1} << 59;

class Shape {
 public:
  constexpr Shape() = default;
  constexpr Shape(std::initializer_list<std::size_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(const std::vector<std::size_t>& dims) { assign(dims.begin(), dims.end()); }

  constexpr std::size_t size() const { return rank_; }
  constexpr int rank() const { return static_cast<int>(rank_); }
  constexpr std::size_t operator[](std::size_t i) const { return dims_[i]; }
  constexpr std::size_t& operator[](std::size_t i) { return dims_[i]; }
  constexpr const std::size_t* begin() const { return dims_; }
  constexpr const std::size_t* end() const { return dims_ + rank_; }

  // The number of elements; a ShapeError when the shape breaks the bound above.
  constexpr std::size_t numel() const {
    require_addressable("Shape::numel: shape");
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];  // <= kMaxElements: checked above
    return n;
  }

  // Why the shape breaks the bound above, or nullptr when it keeps it. Rank multiplications,
  // no allocation: cheap enough for every call.
  constexpr const char* size_problem() const noexcept {
    for (std::size_t i = 0; i < rank_; ++i)
      if (dims_[i] > static_cast<std::size_t>(PTRDIFF_MAX)) return "has a negative extent";
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i)
      if (__builtin_mul_overflow(n, dims_[i] == 0 ? 1 : dims_[i], &n) || n > kMaxElements)
        return "has more elements than an index can address";
    return nullptr;
  }
  // Throws ShapeError("<what> [2, -3] has a negative extent") when the shape breaks the bound;
  // `what` names the op and the role of the shape, e.g. "matmul: the result shape".
  constexpr void require_addressable(const char* what) const {
    if (const char* why = size_problem()) throw ShapeError(std::string(what) + " " + str() + " " + why);
  }
  constexpr void push_back(std::size_t d) {
    if (rank_ == kMaxRank) throw std::length_error("kiln::Shape: rank above kiln::kMaxRank");
    dims_[rank_++] = d;
  }
  constexpr bool operator==(const Shape& o) const {
    return rank_ == o.rank_ && std::equal(begin(), end(), o.begin());
  }

  // "[64, 768]", the form every error message uses. An extent above PTRDIFF_MAX is shown as
  // the negative count it came from.
  std::string str() const {
    std::string s = "[";
    for (std::size_t i = 0; i < rank_; ++i)
      s += (i ? ", " : "") + (dims_[i] > static_cast<std::size_t>(PTRDIFF_MAX)
                                  ? std::to_string(static_cast<std::int64_t>(dims_[i]))
                                  : std::to_string(dims_[i]));
    return s + "]";
  }

 private:
  template <class It>
  constexpr void assign(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }
  std::size_t dims_[kMaxRank] = {};
  std::size_t rank_ = 0;
};

}  // namespace kiln
