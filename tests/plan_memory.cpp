// The arena plan: buffers whose lifetimes overlap never share bytes; disjoint ones may.
#include "plan_cases.hpp"
#include "reference.hpp"

using kiln::runtime::ArenaRequest;

TEST_CASE("overlapping lifetimes get disjoint bytes, disjoint ones reuse them") {
  std::vector<ArenaRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  const std::size_t total = kiln::runtime::plan_memory(r);
  auto overlap = [](const ArenaRequest& a, const ArenaRequest& b) {
    return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
  };
  for (std::size_t i = 0; i < r.size(); ++i)
    for (std::size_t j = i + 1; j < r.size(); ++j)
      if (r[i].first <= r[j].last && r[j].first <= r[i].last) CHECK_FALSE(overlap(r[i], r[j]));
  CHECK(total == 2 * 1024);  // a chain needs two buffers, not four
  for (const auto& q : r) CHECK(q.offset % kiln::runtime::kArenaAlignment == 0);
}

TEST_CASE("random requests never overlap while alive") {
  std::uint64_t s = 1;
  auto next = [&] { return (s = kiln::detail::splitmix64(s)) % 1000; };
  std::vector<ArenaRequest> r;
  for (int i = 0; i < 200; ++i) {
    const int a = static_cast<int>(next() % 50), len = static_cast<int>(next() % 10);
    r.push_back({next() * 8 + 1, a, a + len});
  }
  const std::size_t total = kiln::runtime::plan_memory(r);
  for (std::size_t i = 0; i < r.size(); ++i) {
    CHECK(r[i].offset + r[i].bytes <= total);
    for (std::size_t j = i + 1; j < r.size(); ++j) {
      const bool live = r[i].first <= r[j].last && r[j].first <= r[i].last;
      const bool disjoint = r[i].offset + r[i].bytes <= r[j].offset || r[j].offset + r[j].bytes <= r[i].offset;
      if (live) CHECK(disjoint);
    }
  }
}

TEST_CASE("an eager chain reuses its intermediates' memory and stays correct") {
  plan_cases::eager_chain_reuses_memory();
}
