// kiln's differential fuzzer, the runner: one generated graph (graph_gen.hpp) compiled in every
// mode and backend, called on several shapes, each result compared element by element with the
// float64 reference; and its gradient (reverse mode, in double) checked against central finite
// differences of the reference along a random direction.
//
// Tolerances. An element passes when |got - want| <= tol(T) (|want| + scale), scale being the
// largest magnitude of any value the reference computed for the graph (its intermediates
// included): an error made in an intermediate travels to the output in absolute terms, so a
// bound relative to the output alone would fail a correct kernel after a cancellation.
//   double 1e-9, float 1e-4, f16 2e-2, bf16 1.25e-1 (2^-11 and 2^-8 rounding per kernel
//   boundary, amplified by up to ~16 in the deepest graphs)
// The gradient passes when |<g, v> - fd| <= 1e-6 (|fd| + sum |g_i v_i|) + 1e-9, fd being the
// central difference of sum(graph * r) with step 1e-5 along v. Where two steps (1e-5 and
// 2.5e-6) disagree by more than that bound, a kink of relu/abs/max/where lies within the
// step: the check is counted as skipped, not passed.
#pragma once
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "graph_gen.hpp"

namespace fuzz {

template <class T>
inline constexpr double kTol = 0;
template <>
inline constexpr double kTol<double> = 1e-9;
template <>
inline constexpr double kTol<float> = 1e-4;
template <>
inline constexpr double kTol<kiln::f16> = 2e-2;
template <>
inline constexpr double kTol<kiln::bf16> = 1.25e-1;

// The element type's name in C++, for a regression line.
template <class T>
constexpr const char* type_name_cpp() {
  if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, kiln::f16>) return "kiln::f16";
  else return "kiln::bf16";
}

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, double>) return "f64";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, kiln::f16>) return "f16";
  else return "bf16";
}

struct Stats {
  long graphs = 0, runs = 0, values = 0, mismatches = 0, grad_checks = 0, grad_skipped = 0, errors = 0;
  double worst = 0;  // the largest error / tolerance seen
  std::string last_failure;
  void fail(const std::string& what) {
    ++mismatches;
    last_failure = what;
  }
};

// The leaves of one call, as float64 values rounded to T (the reference's inputs) and as
// tensors on the device.
template <class T>
struct Inputs {
  Env env;
  kiln::Tensor<T> x, y, row, row2, col, wn, wm, table;
  kiln::Tensor<kiln::i64> ids, pos, rng;
};

inline double round_to(double v, double*) { return v; }
inline double round_to(double v, float*) { return static_cast<float>(v); }
inline double round_to(double v, kiln::f16*) { return kiln::widen(kiln::f16(static_cast<float>(v))); }
inline double round_to(double v, kiln::bf16*) { return kiln::widen(kiln::bf16(static_cast<float>(v))); }

template <class T>
Inputs<T> make_inputs(std::size_t M, std::size_t N, std::uint64_t seed, kiln::Device dev) {
  Inputs<T> in;
  Env& e = in.env;
  e.M = M;
  e.N = N;
  std::uint64_t s = mix(seed);
  auto next = [&] { return s = mix(s); };
  auto draw = [&](std::vector<std::size_t> shape, double sd, ref::Array& a, kiln::Tensor<T>& t) {
    const auto r = kiln::randn<double>(kiln::Shape(shape), next());
    a = ref::zeros(shape);
    std::vector<T> v(a.numel());
    for (std::size_t i = 0; i < a.numel(); ++i) {
      a.data[i] = round_to(r[i] * sd, static_cast<T*>(nullptr));
      v[i] = static_cast<T>(a.data[i]);
    }
    t = kiln::from_vector(v, kiln::Shape(shape), dev);
  };
  const std::size_t V = 1 + next() % 40;
  draw({M, N}, 1.0, e.x, in.x);
  draw({M, N}, 1.0, e.y, in.y);
  draw({N}, 1.0, e.row, in.row);
  draw({N}, 1.0, e.row2, in.row2);
  draw({M, 1}, 1.0, e.col, in.col);
  draw({N, N}, 1.0 / std::sqrt(static_cast<double>(N)), e.wn, in.wn);
  draw({M, M}, 1.0 / std::sqrt(static_cast<double>(M)), e.wm, in.wm);
  draw({V, N}, 1.0, e.table, in.table);
  e.ids.resize(M);
  for (auto& i : e.ids) i = static_cast<std::int64_t>(next() % V);
  in.ids = kiln::from_vector(std::vector<kiln::i64>(e.ids.begin(), e.ids.end()), kiln::Shape{M}, dev);
  e.pos = static_cast<std::int64_t>(next() % N);
  in.pos = kiln::from_vector(std::vector<kiln::i64>{e.pos}, kiln::Shape{}, dev);
  e.seed = next();
  e.offset = next() % 1000;
  in.rng = kiln::from_vector(std::vector<kiln::i64>{static_cast<kiln::i64>(e.seed), static_cast<kiln::i64>(e.offset)},
                             kiln::Shape{2}, dev);
  return in;
}

// A binding of symbol s to tensor t when bit B of the graph's leaves is set, else nothing.
template <unsigned Uses, unsigned B, class S, class V>
constexpr auto bind_if(const S& s, const V& t) {
  if constexpr ((Uses & B) != 0) return std::tuple{s = t};
  else return std::tuple<>{};
}
template <unsigned U, class T>
auto bindings(const Inputs<T>& in) {
  using L = Leaves<T>;
  return std::tuple_cat(bind_if<U, kX>(L::x, in.x), bind_if<U, kY>(L::y, in.y), bind_if<U, kRow>(L::row, in.row),
                        bind_if<U, kRow2>(L::row2, in.row2), bind_if<U, kCol>(L::col, in.col),
                        bind_if<U, kWn>(L::wn, in.wn), bind_if<U, kWm>(L::wm, in.wm), bind_if<U, kIds>(L::ids, in.ids),
                        bind_if<U, kTable>(L::table, in.table), bind_if<U, kPos>(L::pos, in.pos),
                        bind_if<U, kRng>(L::rng, in.rng));
}

// A program of several graphs over one set of leaves, compiled as kiln::outputs(g...): each
// compile then plans and builds several graphs at once (so the cost of a mode is paid once per
// program), and the planner sees graphs that share their leaves.
template <class... Gs>
struct Program {
  static constexpr int size = sizeof...(Gs);
  static constexpr unsigned uses() { return (Gs::uses() | ...); }
  template <class L>
  static constexpr auto build() {
    return kiln::outputs(Gs::template build<L>()...);
  }
  // The sum of the graphs (one value to differentiate).
  template <class L>
  static constexpr auto sum() {
    return (Gs::template build<L>() + ...);
  }
  // Each graph's reference value, and the largest magnitude among its values.
  // Every graph must keep the [M, N] shape (the generator's invariant); one that does not is a
  // defect of the generator, reported as such.
  static std::vector<ref::Array> eval(const Env& e, std::vector<double>& scale) {
    std::vector<ref::Array> out;
    scale.clear();
    ((e.magnitude = 0, out.push_back(Gs::eval(e)), scale.push_back(e.magnitude)), ...);
    for (std::size_t k = 0; k < out.size(); ++k)
      if (out[k].shape != std::vector<std::size_t>{e.M, e.N})
        throw std::logic_error("the fuzzer's generator: graph " + str(static_cast<int>(k)) + " is not [M, N]; fix its op");
    return out;
  }
  static ref::Array eval_sum(const Env& e) {
    std::vector<double> scale;
    const auto all = eval(e, scale);
    ref::Array s = all[0];
    for (std::size_t k = 1; k < all.size(); ++k) s = r::add(s, all[k]);
    return s;
  }
  static std::string str(int k) {
    std::string names[] = {Gs::str()...};
    return names[k];
  }
};

template <class T>
void compare(Stats& st, const kiln::Tensor<T>& got_dev, const ref::Array& want, double scale, const std::string& what) {
  const kiln::Tensor<T> got = got_dev.cpu();
  ++st.runs;
  const std::vector<std::size_t> gs(got.shape().begin(), got.shape().end());
  if (gs != want.shape) return st.fail(what + ": shape " + got.shape().str());
  st.values += static_cast<long>(want.numel());
  const double tol = kTol<T>;
  for (std::size_t i = 0; i < want.numel(); ++i) {
    const double g = static_cast<double>(kiln::widen(got[i])), w = want.data[i];
    const double bound = tol * (std::abs(w) + scale);
    const double err = std::abs(g - w);
    if (std::isfinite(w) && std::isfinite(g)) st.worst = std::max(st.worst, err / bound);
    if (!(err <= bound)) {
      std::ostringstream o;
      o << what << ": element " << i << " got " << g << " want " << w << " (tolerance " << bound << ")";
      return st.fail(o.str());
    }
  }
}

template <class Tuple>
auto as_tuple(Tuple&& t) {
  if constexpr (requires { std::tuple_size<std::remove_cvref_t<Tuple>>::value; }) return std::forward<Tuple>(t);
  else return std::tuple{std::forward<Tuple>(t)};
}

struct Shape2 {
  std::size_t M, N;
};

// One compiled form of program P (policy Ps...) called on every shape, in order (the first shape
// again at the end, so persistent modes reuse a cached plan); every graph's output is compared.
template <class P, class T, class... Ps>
void run_mode(Stats& st, const std::vector<Shape2>& shapes, std::uint64_t seed, kiln::Device dev, const char* mode) {
  static constexpr auto y = P::template build<Leaves<T>>();
  static constexpr unsigned U = P::uses();
  auto f = kiln::compile<Ps...>(y);
  for (std::size_t k = 0; k <= shapes.size(); ++k) {
    const Shape2 s = shapes[k % shapes.size()];
    const std::string what = std::string(type_name<T>()) + " " + mode + " [" + std::to_string(s.M) + ", " +
                             std::to_string(s.N) + "]";
    try {
      const Inputs<T> in = make_inputs<T>(s.M, s.N, seed + k % shapes.size(), dev);
      std::vector<double> scale;
      const std::vector<ref::Array> want = P::eval(in.env, scale);
      const auto got = as_tuple(std::apply(f, bindings<U>(in)));
      std::size_t g = 0;
      std::apply([&](const auto&... t) { ((compare(st, t, want[g], scale[g], "graph " + std::to_string(g) + ", " + what), ++g), ...); },
                 got);
    } catch (const std::exception& ex) {
      ++st.errors;
      st.fail(what + ": threw " + ex.what());
    }
  }
}

// The symbols of the float leaves a program uses, in a tuple (its gradient's variables).
template <unsigned U, unsigned B, class S>
constexpr auto wrt_if(const S& s) {
  if constexpr ((U & B) != 0) return std::tuple{s};
  else return std::tuple<>{};
}
template <unsigned U>
constexpr auto float_leaves() {
  using L = Leaves<double>;
  return std::tuple_cat(wrt_if<U, kX>(L::x), wrt_if<U, kY>(L::y), wrt_if<U, kRow>(L::row), wrt_if<U, kRow2>(L::row2),
                        wrt_if<U, kCol>(L::col), wrt_if<U, kWn>(L::wn), wrt_if<U, kWm>(L::wm),
                        wrt_if<U, kTable>(L::table));
}
// The leaf arrays of an Env in the order of float_leaves<U>().
template <unsigned U>
std::vector<ref::Array*> float_arrays(Env& e) {
  std::vector<ref::Array*> v;
  for (auto [bit, a] : {std::pair{kX, &e.x}, {kY, &e.y}, {kRow, &e.row}, {kRow2, &e.row2}, {kCol, &e.col},
                        {kWn, &e.wn}, {kWm, &e.wm}, {kTable, &e.table}})
    if (U & bit) v.push_back(a);
  return v;
}

// Reverse mode against finite differences: <grad sum(s * r), v>, s the sum of the program's
// graphs, for a random direction v over every float leaf, in double.
template <class P>
void check_gradient(Stats& st, Shape2 s, std::uint64_t seed, kiln::Device dev) {
  using L = Leaves<double>;
  static constexpr unsigned U = P::uses();
  static constexpr auto r = kiln::input<"r", 2, double>();
  static constexpr auto loss = kiln::sum(P::template sum<L>() * r);
  static constexpr auto grads = std::apply([](auto... w) { return kiln::grad(loss, w...); }, float_leaves<U>());
  auto g = kiln::compile(std::apply([](auto... gs) { return kiln::outputs(gs...); }, grads));
  const std::string what = "f64 gradient [" + std::to_string(s.M) + ", " + std::to_string(s.N) + "]";
  try {
    Inputs<double> in = make_inputs<double>(s.M, s.N, seed, dev);
    in.env.smooth = true;
    const auto rt = kiln::randn<double>({s.M, s.N}, mix(seed ^ 0x1234));
    const ref::Array ra = ref::from(rt);
    const auto got = as_tuple(std::apply(g, std::tuple_cat(std::tuple{r = rt.to(dev)}, bindings<U>(in))));
    // The direction, one random array per leaf, and <g, v>.
    Env e = in.env;
    const auto leaves = float_arrays<U>(e);
    std::vector<ref::Array> dir;
    double dot = 0, abs_dot = 0;
    std::size_t k = 0;
    std::apply(
        [&](const auto&... gt) {
          (([&] {
             const auto gc = gt.cpu();
             ref::Array v = ref::zeros(leaves[k]->shape);
             const auto rv = kiln::randn<double>(kiln::Shape(v.shape), mix(seed + 77 * (k + 1)));
             for (std::size_t i = 0; i < v.numel(); ++i) {
               v.data[i] = rv[i];
               dot += gc[i] * v.data[i];
               abs_dot += std::abs(gc[i] * v.data[i]);
             }
             dir.push_back(std::move(v));
             ++k;
           }()),
           ...);
        },
        got);
    auto loss_at = [&](double h) {
      Env p = e;
      const auto shifted = float_arrays<U>(p);
      for (std::size_t l = 0; l < shifted.size(); ++l)
        for (std::size_t i = 0; i < dir[l].numel(); ++i) shifted[l]->data[i] += h * dir[l].data[i];
      const ref::Array out = P::eval_sum(p);
      double sum = 0;
      for (std::size_t i = 0; i < out.numel(); ++i) sum += out.data[i] * ra.data[i];
      return sum;
    };
    const double fd = (loss_at(1e-5) - loss_at(-1e-5)) / 2e-5;
    const double fd2 = (loss_at(2.5e-6) - loss_at(-2.5e-6)) / 5e-6;
    const double bound = 1e-6 * (std::abs(fd) + abs_dot) + 1e-9;
    ++st.runs;
    if (std::abs(fd - fd2) > bound) {
      ++st.grad_skipped;
      return;
    }
    ++st.grad_checks;
    st.worst = std::max(st.worst, std::abs(dot - fd) / bound);
    if (!(std::abs(dot - fd) <= bound)) {
      std::ostringstream o;
      o << what << ": <grad, v> " << dot << ", finite differences " << fd << " (tolerance " << bound << ")";
      st.fail(o.str());
    }
  } catch (const std::exception& ex) {
    ++st.errors;
    st.fail(what + ": threw " + ex.what());
  }
}

// Shapes for one program: one small, one middling, one larger; N even, M any.
inline std::vector<Shape2> shapes_for(std::uint64_t seed) {
  const std::uint64_t a = mix(seed ^ 0xabc), b = mix(a), c = mix(b);
  return {{1 + a % 4, 2 + 2 * (a / 7 % 3)}, {5 + b % 36, 8 + 2 * (b / 11 % 32)}, {41 + c % 90, 66 + 2 * (c / 13 % 64)}};
}

template <class P, class T>
void run_all_modes(Stats& st, const std::vector<Shape2>& shapes, std::uint64_t seed, kiln::Device dev) {
  run_mode<P, T, kiln::Default>(st, shapes, seed, dev, "Default");
  run_mode<P, T, kiln::ReduceOverhead>(st, shapes, seed, dev, "ReduceOverhead");
  run_mode<P, T, kiln::MaxAutotune>(st, shapes, seed, dev, "MaxAutotune");
  run_mode<P, T, kiln::MaxAutotuneNoCudaGraphs>(st, shapes, seed, dev, "MaxAutotuneNoCudaGraphs");
  run_mode<P, T, kiln::CudaGraphs>(st, shapes, seed, dev, "CudaGraphs backend");
  run_mode<P, T, kiln::Eager>(st, shapes, seed, dev, "Eager backend");
}

// Program P checked in element type T (every mode) and in f64 (its gradient), on the shapes and
// inputs drawn from seed. Returns whether it passed; prints what failed and the graphs.
template <class P, class T>
bool check_program(Stats& st, std::uint64_t seed, kiln::Device dev, const std::string& name) {
  const auto shapes = shapes_for(seed);
  const long before = st.mismatches;
  run_all_modes<P, T>(st, shapes, seed, dev);
  check_gradient<P>(st, shapes[1], seed, dev);
  st.graphs += P::size;
  if (st.mismatches == before) return true;
  std::printf("MISMATCH in %s (%s, input seed %llu): %s\n", name.c_str(), type_name<T>(),
              static_cast<unsigned long long>(seed), st.last_failure.c_str());
  for (int k = 0; k < P::size; ++k) std::printf("  graph %d = %s\n", k, P::str(k).c_str());
  return false;
}

// Program `index` (seed `seed`): its element type is drawn from the seed, f32 for 2 seeds in 5,
// else f64, f16 or bf16. Fn is called as fn.template operator()<T>().
template <class Fn>
decltype(auto) with_element_type(std::uint64_t seed, Fn&& fn) {
  switch (mix(seed ^ 0xd7) % 5) {
    case 0: return fn.template operator()<double>();
    case 1: return fn.template operator()<kiln::f16>();
    case 2: return fn.template operator()<kiln::bf16>();
    default: return fn.template operator()<float>();
  }
}

template <class P>
void run_program(Stats& st, long index, std::uint64_t seed, kiln::Device dev, bool list = false) {
  if (list) {
    for (int k = 0; k < P::size; ++k) std::printf("program %ld, graph %d = %s\n", index, k, P::str(k).c_str());
    return;
  }
  with_element_type(seed, [&]<class T>() { return check_program<P, T>(st, seed, dev, "program " + std::to_string(index)); });
}

// Minimising a failing program of one graph: every subtree of the graph (smallest first) checked
// as a program of its own, in the same element type on the same shapes and inputs. Prints each
// subtree that fails and, for the smallest, the line that makes it a regression test
// (tests/fuzz/regressions.inc). Returns whether any failed.
template <class T, class... Subtrees>
bool minimise(Stats& st, std::uint64_t seed, kiln::Device dev, TypeList<Subtrees...>) {
  std::string smallest;
  auto try_one = [&]<class S>() {
    if (!check_program<Program<S>, T>(st, seed, dev, "subtree " + S::str()) && smallest.empty())
      smallest = "KILN_FUZZ_REGRESSION(" + std::string(type_name_cpp<T>()) + ", " + std::to_string(seed) + "ull, " + S::spelling() + ")";
  };
  (try_one.template operator()<Subtrees>(), ...);
  if (!smallest.empty()) std::printf("regression: %s\n", smallest.c_str());
  return !smallest.empty();
}

template <std::uint64_t Seed, std::uint64_t... K>
auto program_of(std::integer_sequence<std::uint64_t, K...>)
    -> Program<G<mix(Seed + K), 1 + static_cast<int>(mix(Seed + K) / 3 % 3)>...>;

}  // namespace fuzz
