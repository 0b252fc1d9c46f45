// kiln: the memory plan. Every intermediate buffer gets an offset in one arena; two buffers
// share bytes only when their lifetimes (first to last kernel that touches them) are disjoint,
// so peak memory is planned before anything runs.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kiln/core/errors.hpp"

namespace kiln::runtime {

struct ArenaRequest {
  std::size_t bytes = 0;
  int first = 0, last = 0;  // kernel indices, inclusive
  std::size_t offset = 0;   // the result
};

inline constexpr std::size_t kArenaAlignment = 64;

// a + b, or a ShapeError when the sum wraps around: each buffer is below 2^62 bytes (the bound
// on sizes in shape.hpp), but an arena holds many.
inline std::size_t arena_add(std::size_t a, std::size_t b) {
  std::size_t s = 0;
  if (__builtin_add_overflow(a, b, &s)) throw ShapeError("memory plan: the arena needs more bytes than an index can address");
  return s;
}
// bytes rounded up to kArenaAlignment.
inline std::size_t arena_size(std::size_t bytes) { return arena_add(bytes, kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// First fit by start time: each buffer takes the lowest offset that does not overlap a buffer
// alive at the same time. Returns the arena size.
inline std::size_t plan_memory(std::vector<ArenaRequest>& reqs) {
  std::vector<std::size_t> order(reqs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return reqs[a].first != reqs[b].first ? reqs[a].first < reqs[b].first : reqs[a].bytes > reqs[b].bytes;
  });
  std::vector<std::size_t> placed;
  std::size_t total = 0;
  for (std::size_t i : order) {
    ArenaRequest& r = reqs[i];
    const std::size_t size = arena_size(r.bytes);
    std::vector<std::pair<std::size_t, std::size_t>> busy;  // [begin, end) of live buffers
    for (std::size_t j : placed) {
      const ArenaRequest& q = reqs[j];
      if (q.first <= r.last && r.first <= q.last) busy.emplace_back(q.offset, arena_add(q.offset, arena_size(q.bytes)));
    }
    std::sort(busy.begin(), busy.end());
    std::size_t offset = 0;
    for (auto [b, e] : busy) {
      if (offset <= b && size <= b - offset) break;  // offset + size <= b, without wrapping
      offset = std::max(offset, e);
    }
    r.offset = offset;
    total = std::max(total, arena_add(offset, size));
    placed.push_back(i);
  }
  return total;
}

}  // namespace kiln::runtime
