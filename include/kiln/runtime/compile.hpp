// kiln: the entry points: compile, eager, explain.
#pragma once
#include <string>

#include "kiln/runtime/compiled.hpp"
#include "kiln/runtime/segments.hpp"

namespace kiln {
// In the backend's inline namespace (core/config.hpp) like the types they return, so that
// translation units with and without the CUDA backend never share these symbols.
inline namespace KILN_BACKEND_NS {

template <class R>
concept Compilable = Expression<R> || runtime::root_outputs<R>::multi;

// kiln::compile<Policies...>(expr): the fused program (see runtime/policy.hpp for policies).
template <class... Policies, Compilable Root>
auto compile(const Root& root) {
  using P = runtime::Policy<Policies...>;
  static_assert(!(P::fullgraph && has_host<Root>::value),
                "kiln::FullGraph: this expression contains kiln::host, a graph break (a host function runs between "
                "compiled segments); remove the break or compile without kiln::FullGraph");
  return runtime::program_t<Root, P, 0>(root);
}

// kiln::eager(expr): the uncompiled baseline, one kernel per node, every value materialised.
template <Compilable Root>
auto eager(const Root& root) {
  return runtime::program_t<Root, runtime::Policy<Eager>, 0>(root);
}

// The plan of expr, as compile(expr).explain() gives it.
template <class... Policies, Compilable Root>
std::string explain(const Root& root) {
  return compile<Policies...>(root).explain();
}

}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln
