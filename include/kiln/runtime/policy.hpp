// kiln: policy types for compile<...>(), mirroring torch.compile's modes, backends and
// fullgraph (DESIGN.md, Modes). They compose in any order: compile<MaxAutotune, FullGraph>(y).
#pragma once
#include <type_traits>

namespace kiln {

// Modes.
struct Default {};                  // fused kernels, memory planned per call shape
struct ReduceOverhead {};           // cached plans and arenas per shape, no allocation per call
struct MaxAutotune {};              // benchmark launch candidates at the first call, cache on disk
struct MaxAutotuneNoCudaGraphs {};  // the same, with memory planned per call as in Default
// Backends.
struct Fused {};       // the default backend: fused kernels
struct CudaGraphs {};  // no fusion, one kernel per node, static memory (on CPU: a persistent arena)
struct Eager {};       // no fusion, one kernel per node, every intermediate materialised
// A graph break (kiln::host) is a compile error.
struct FullGraph {};

namespace runtime {

template <class P, class... Ps>
inline constexpr int count_of = (0 + ... + std::is_same_v<P, Ps>);

template <class P>
inline constexpr bool is_mode = std::is_same_v<P, Default> || std::is_same_v<P, ReduceOverhead> ||
                                std::is_same_v<P, MaxAutotune> || std::is_same_v<P, MaxAutotuneNoCudaGraphs>;
template <class P>
inline constexpr bool is_backend = std::is_same_v<P, Fused> || std::is_same_v<P, CudaGraphs> || std::is_same_v<P, Eager>;

template <class... Ps>
struct Policy {
  static_assert(((is_mode<Ps> || is_backend<Ps> || std::is_same_v<Ps, FullGraph>) && ...),
                "kiln::compile: unknown policy; modes are kiln::Default, kiln::ReduceOverhead, kiln::MaxAutotune, "
                "kiln::MaxAutotuneNoCudaGraphs; backends kiln::Fused, kiln::CudaGraphs, kiln::Eager; and kiln::FullGraph");
  static_assert((0 + ... + is_mode<Ps>) <= 1, "kiln::compile: give at most one mode (Default, ReduceOverhead, MaxAutotune, MaxAutotuneNoCudaGraphs)");
  static_assert((0 + ... + is_backend<Ps>) <= 1, "kiln::compile: give at most one backend (Fused, CudaGraphs or Eager)");
  static_assert(count_of<FullGraph, Ps...> <= 1, "kiln::compile: kiln::FullGraph is given twice");

  static constexpr bool fuse = count_of<Eager, Ps...> + count_of<CudaGraphs, Ps...> == 0;
  static constexpr bool autotune = count_of<MaxAutotune, Ps...> + count_of<MaxAutotuneNoCudaGraphs, Ps...> > 0;
  // Plans and arenas persist per shape signature ("graphs": on CPU, static memory).
  static constexpr bool persistent =
      count_of<ReduceOverhead, Ps...> + count_of<MaxAutotune, Ps...> + count_of<CudaGraphs, Ps...> > 0;
  static constexpr bool fullgraph = count_of<FullGraph, Ps...> > 0;

  static constexpr const char* mode_name = count_of<ReduceOverhead, Ps...>            ? "ReduceOverhead"
                                           : count_of<MaxAutotune, Ps...>             ? "MaxAutotune"
                                           : count_of<MaxAutotuneNoCudaGraphs, Ps...> ? "MaxAutotuneNoCudaGraphs"
                                                                                      : "Default";
  static constexpr const char* backend_name = count_of<Eager, Ps...>        ? "Eager"
                                              : count_of<CudaGraphs, Ps...> ? "CudaGraphs"
                                                                            : "Fused";
};

}  // namespace runtime
}  // namespace kiln
