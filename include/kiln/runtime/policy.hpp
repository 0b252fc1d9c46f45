// kiln: policy types for compile<...>(), mirroring torch.compile's modes and backends
// (DESIGN.md, Modes). This issue implements Default and the Eager backend; the other modes
// arrive with the modes issue and are rejected with a message until then.
#pragma once
#include <type_traits>

namespace kiln {

struct Default {};  // fused kernels, memory planned per call shape
struct Fused {};    // the default backend
struct Eager {};    // one kernel per node, every intermediate materialised

namespace runtime {

template <class P>
inline constexpr bool is_known_policy = std::is_same_v<P, Default> || std::is_same_v<P, Fused> || std::is_same_v<P, Eager>;

template <class... Ps>
struct Policy {
  static_assert((is_known_policy<Ps> && ...),
                "kiln::compile: unknown policy; use kiln::Default, kiln::Fused or kiln::Eager");
  static constexpr int backends = (0 + ... + (std::is_same_v<Ps, Fused> || std::is_same_v<Ps, Eager>));
  static constexpr int modes = (0 + ... + std::is_same_v<Ps, Default>);
  static_assert(backends <= 1, "kiln::compile: give at most one backend (kiln::Fused or kiln::Eager)");
  static_assert(modes <= 1, "kiln::compile: give at most one mode");
  static constexpr bool eager = (false || ... || std::is_same_v<Ps, Eager>);
};

}  // namespace runtime
}  // namespace kiln
