// transpose and reshape: views read through strides, copies only where a contiguous value is
// needed (a reshape of a transpose, an output that is a view or an input). Included by
// ops_layout.cpp and by cuda/cuda_broadcast_layout.cpp, which runs the same cases with the
// inputs on the GPU (on_device.hpp).
#pragma once
#include "on_device.hpp"

namespace layout_cases {

inline void transpose_feeds_pointwise_through_strides() {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto b = kiln::input<"b", 3>();
  auto f = kiln::compile(kiln::transpose(a) * 2 + b);
  CHECK(f.kernel_count() == 1);
  const auto at = cases::randn({3, 5, 7}, 71), bt = cases::randn({3, 7, 5}, 72);
  ref::check_close(f(a = at, b = bt).cpu(), ref::zip(ref::transpose(ref::from(at.cpu())), ref::from(bt.cpu()),
                                                     [](double p, double q) { return 2 * p + q; }));
}

inline void transpose_of_computed_value() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::exp(kiln::transpose(a + 1)));
  CHECK(f.kernel_count() == 2);  // a + 1 is materialised, the transpose is read by exp
  const auto at = cases::randn({40, 30}, 73);
  ref::check_close(f(a = at).cpu(), ref::map(ref::transpose(ref::from(at.cpu())), [](double v) { return std::exp(v + 1); }));
}

inline void reshape_with_inferred_extent() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::sum<1>(kiln::reshape(a * 3, {-1, 4})));
  const auto at = cases::randn({6, 8}, 74);
  auto out = f(a = at);
  CHECK(out.shape() == kiln::Shape{12});
  ref::Array r = ref::map(ref::from(at.cpu()), [](double v) { return 3 * v; });
  r.shape = {12, 4};
  ref::check_close(out.cpu(), ref::reduce(r, 1, ref::Red::Sum, false), 1e-5, 1e-5);
}

inline void reshape_of_transpose_copies_first() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::reshape(kiln::transpose(a), {-1}) + 1);
  CHECK(f.kernel_count() == 2);
  const auto at = cases::randn({5, 7}, 75);
  ref::Array r = ref::map(ref::transpose(ref::from(at.cpu())), [](double v) { return v + 1; });
  r.shape = {35};
  ref::check_close(f(a = at).cpu(), r);
}

inline void outputs_that_are_views_or_inputs_are_copied() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::outputs(a, kiln::transpose(a), kiln::reshape(a, {2, -1})));
  const auto at = cases::randn({4, 6}, 76);
  auto [same, t, r] = f(a = at);
  const auto host = at.cpu(), rh = r.cpu();
  ref::check_close(same.cpu(), ref::from(host));
  CHECK(same.data() != at.data());  // addresses on device(), compared there
  ref::check_close(t.cpu(), ref::transpose(ref::from(host)));
  CHECK(r.shape() == kiln::Shape{2, 12});
  for (std::size_t i = 0; i < host.numel(); ++i) CHECK(rh[i] == host[i]);
}

}  // namespace layout_cases
