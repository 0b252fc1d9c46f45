// Multiple outputs (schedule/plan.hpp, merge_outputs): a pointwise kernel whose value a later
// pointwise kernel reads first runs inside it where the shapes agree, and on its own where they
// do not (a broadcast). Run on cases::device(): the CPU (plan_fusion.cpp) and the GPU
// (cuda/cuda_modes.cpp), in Default and ReduceOverhead, against float64.
#pragma once
#include <string>

#include "on_device.hpp"

namespace merge_cases {

namespace sym {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto r = kiln::input<"r", 2>();
constexpr auto p = kiln::param<"p", 2>();
constexpr auto q = kiln::param<"q", 2>();
}  // namespace sym

// a is an output and c's kernel reads it: c's kernel writes a too (an extra output) and a's own
// kernel is not run. With x [1, n] broadcast against r [m, n] their shapes differ: a's kernel
// runs, and c's kernel evaluates a again from x. n = 37 takes the element path on the GPU,
// n = 64 the 16-byte one.
template <class Policy>
void merged_outputs_in() {
  using namespace sym;
  constexpr auto a = kiln::shared<"a">(kiln::exp(x) * 2.0f);  // one node, read twice
  constexpr auto c = a * r + 1.0f;
  auto f = kiln::compile<Policy>(kiln::outputs(a, c, kiln::sum<1>(c)));
  CHECK(f.kernel_count() == 3);
  CHECK(f.explain().find("merged into kernel 1 where the shapes agree") != std::string::npos);
  for (std::size_t n : {std::size_t{37}, std::size_t{64}})
    for (std::size_t rows : {std::size_t{5}, std::size_t{1}}) {
      CAPTURE(n);
      CAPTURE(rows);
      const auto xt = cases::randn({rows, n}, 11), rt = cases::randn({5, n}, 12);
      for (int call = 0; call < 2; ++call) {  // ReduceOverhead: the second call replays a graph
        auto [ta, tc, ts] = f(x = xt, r = rt);
        const ref::Array ra = ref::map(ref::from(xt.cpu()), [](double v) { return std::exp(v) * 2.0; });
        const ref::Array rc = ref::zip(ra, ref::from(rt.cpu()), [](double u, double v) { return u * v + 1.0; });
        ref::check_close(ta.cpu(), ra);
        ref::check_close(tc.cpu(), rc);
        ref::check_close(ts.cpu(), ref::reduce(rc, 1, ref::Red::Sum, false));
      }
      CHECK((f.explain().find("runs inside kernel 1") != std::string::npos) == (rows == 5));
    }
}
inline void merged_outputs() {
  merged_outputs_in<kiln::Default>();
  merged_outputs_in<kiln::ReduceOverhead>();
}

// p <- p / 2 + x and q <- q - 2 p_new: one kernel writes both in place where p and q have one
// shape. With p [1, n] against q [m, n], p's kernel runs on its own and q's kernel evaluates
// p_new from the old p, so p's update must not be written before q's kernel: it is copied.
template <class Policy>
void merged_in_place_updates_in() {
  using namespace sym;
  constexpr auto pn = kiln::shared<"pn">(p * 0.5f + x);
  auto f = kiln::compile<Policy>(kiln::outputs(kiln::assign(p, pn), kiln::assign(q, q - pn * 2.0f)));
  CHECK(f.explain().find("merged into kernel 1") != std::string::npos);
  for (std::size_t n : {std::size_t{33}, std::size_t{64}})
    for (std::size_t rows : {std::size_t{4}, std::size_t{1}}) {
      CAPTURE(n);
      CAPTURE(rows);
      auto pt = cases::randn({rows, n}, 21), qt = cases::randn({4, n}, 22);
      const auto xt = cases::randn({rows, n}, 23);
      ref::Array rp = ref::from(pt.cpu()), rq = ref::from(qt.cpu());
      for (int call = 0; call < 2; ++call) {  // each call updates the state again
        rp = ref::zip(rp, ref::from(xt.cpu()), [](double u, double v) { return u * 0.5 + v; });
        rq = ref::zip(rq, rp, [](double u, double v) { return u - 2.0 * v; });
        f(p = pt, q = qt, x = xt);
        ref::check_close(pt.cpu(), rp);
        ref::check_close(qt.cpu(), rq);
      }
      const std::string plan = f.explain();
      CHECK((plan.find("runs inside kernel 1") != std::string::npos) == (rows == 4));
      CHECK((plan.find(" p (kernel 1)") != std::string::npos) == (rows == 4));  // in place only when merged
      CHECK(plan.find(" q (kernel 1)") != std::string::npos);
    }
}
inline void merged_in_place_updates() {
  merged_in_place_updates_in<kiln::Default>();
  merged_in_place_updates_in<kiln::ReduceOverhead>();
}

}  // namespace merge_cases
