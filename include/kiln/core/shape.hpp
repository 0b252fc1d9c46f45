// kiln: Shape, a small fixed-capacity list of extents (row-major, last axis fastest).
#pragma once
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/core/config.hpp"

namespace kiln {

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

  constexpr std::size_t numel() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  constexpr void push_back(std::size_t d) {
    if (rank_ == kMaxRank) throw std::length_error("kiln::Shape: rank above kiln::kMaxRank");
    dims_[rank_++] = d;
  }
  constexpr bool operator==(const Shape& o) const {
    return rank_ == o.rank_ && std::equal(begin(), end(), o.begin());
  }

  // "[64, 768]", the form every error message uses.
  std::string str() const {
    std::string s = "[";
    for (std::size_t i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
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
