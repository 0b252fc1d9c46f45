// kiln: the compiled function object. kiln::compile(expr) instantiates the program of expr
// (graph, plan, lowered kernels) at compile time; a call binds tensors to symbols, infers and
// checks every shape, plans strides and memory for that shape signature (cached until the
// input shapes change), allocates fresh outputs and runs the kernels in order.
//
// A Compiled object is not reentrant: it keeps the plan and arena of its last call shape.
// Use one per thread.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/backend/cpu/gemm_kernel.hpp"
#include "kiln/backend/cpu/reduce_kernel.hpp"
#include "kiln/backend/cpu/row_kernel.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/lower/lower.hpp"
#include "kiln/runtime/explain.hpp"
#include "kiln/runtime/memory.hpp"
#include "kiln/runtime/params.hpp"
#include "kiln/runtime/policy.hpp"
#include "kiln/runtime/shapes.hpp"

namespace kiln::runtime {

template <class Desc>
struct cpu_kernel;
template <class T, class O, class S, int NL, int NC>
struct cpu_kernel<lower::RowKernel<T, O, S, NL, NC>> {
  using type = cpu::RowKernelCpu<lower::RowKernel<T, O, S, NL, NC>>;
};
template <class T, class E, int A, int NL, int NC>
struct cpu_kernel<lower::GemmKernel<T, E, A, NL, NC>> {
  using type = cpu::GemmKernelCpu<lower::GemmKernel<T, E, A, NL, NC>>;
};
template <class T, ReduceKind K, class Tr, bool Tot, int NL, int NC>
struct cpu_kernel<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>> {
  using type = cpu::ReduceKernelCpu<lower::ReduceKernel<T, K, Tr, Tot, NL, NC>>;
};

// One kernel's backend arguments, with the buffer each pointer is taken from at call time.
template <class Desc>
struct Prepared {
  using Kernel = typename cpu_kernel<Desc>::type;
  typename Kernel::Args args{};
  int load_buffer[Desc::nloads > 0 ? Desc::nloads : 1] = {};
  int out_buffer = -1, a_buffer = -1, b_buffer = -1, acc_buffer = -1;

  auto& row_args() {
    if constexpr (requires { args.epilogue; }) return args.epilogue;
    else return static_cast<cpu::RowArgs<typename Desc::value_type, Desc::nloads, Desc::nconsts, Desc::nstages>&>(args);
  }
};

template <class X>
struct symbol_not_bound {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0, "kiln: this call leaves a symbol unbound (its type is shown in the instantiation below); "
                       "bind every input and param of the expression, e.g. f(x = xt, w = wt)");
};
template <class X>
struct symbol_bound_twice {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0, "kiln: this call binds one symbol twice; bind each symbol once");
};
template <class X>
struct symbol_not_in_expression {
  static constexpr bool value = false;
  static_assert(sizeof(X) == 0, "kiln: this call binds a symbol that the compiled expression does not use");
};

template <class Root>
struct root_outputs {
  static constexpr bool multi = false;
};
template <class... Es>
struct root_outputs<Outputs<Es...>> {
  static constexpr bool multi = true;
};

template <class Root, bool Fuse>
class Compiled {
 public:
  using program = lower::Program<Root, Fuse>;
  using graph_type = typename program::graph_type;
  static constexpr int N = program::size;
  static constexpr int NOut = graph_type::noutputs;
  static constexpr int nkernels = program::nkernels;

  explicit Compiled(const Root& root) : params_(node_params<graph_type>(root)) {}

  // Runs the program: f(x = xt, w = wt, ...). Returns a Tensor, or a std::tuple of tensors
  // for kiln::outputs(...).
  template <class... Bs>
  auto operator()(const Bs&... bs) {
    check_bindings<Bs...>();
    std::array<const void*, kSymbols + 1> data{};
    std::array<Shape, kSymbols + 1> shapes{};
    ((data[symbol_index(Bs::id)] = bs.tensor->data(), shapes[symbol_index(Bs::id)] = bs.tensor->shape()), ...);
    for (int s = 0; s < kSymbols; ++s) {
      const auto& n = graph().nodes[kSymbolNodes[s]];
      if (shapes[s].rank() != n.rank)
        throw ShapeError(std::string("symbol '") + n.name + "': expected a tensor of rank " +
                         std::to_string(n.rank) + ", got shape " + shapes[s].str());
    }
    if (!state_ || !std::equal(shapes.begin(), shapes.begin() + kSymbols, state_->key.begin())) prepare(shapes);
    auto outs = make_outputs(std::make_index_sequence<NOut>{});
    std::vector<void*> ptr(state_->buffers.size());
    for (int s = 0; s < kSymbols; ++s) ptr[s] = const_cast<void*>(data[s]);
    std::apply([&](auto&... t) {
      int k = 0;
      ((ptr[kSymbols + k++] = t.data()), ...);
    }, outs);
    if (arena_capacity_ < state_->arena_bytes) {
      arena_ = std::unique_ptr<std::byte[], detail::AlignedDelete>(
          static_cast<std::byte*>(detail::aligned_alloc_bytes(state_->arena_bytes)), detail::AlignedDelete{state_->arena_bytes});
      arena_capacity_ = state_->arena_bytes;
    }
    for (std::size_t b = kSymbols + NOut; b < ptr.size(); ++b) ptr[b] = arena_.get() + state_->buffers[b];
    run_kernels(ptr);
    copy_duplicate_outputs(outs, std::make_index_sequence<NOut>{});
    if constexpr (root_outputs<Root>::multi) return outs;
    else return std::move(std::get<0>(outs));
  }

  std::size_t kernel_count() const { return nkernels; }
  std::string explain() const { return runtime::explain<program, Fuse>(); }

 private:
  static constexpr const auto& graph() { return program::graph; }
  static constexpr const auto& plan() { return program::plan; }

  static constexpr int kSymbols = [] {
    int c = 0;
    for (int i = 0; i < N; ++i) c += program::graph.nodes[i].kind == NodeKind::Symbol;
    return c;
  }();
  static constexpr std::array<int, kSymbols + 1> kSymbolNodes = [] {
    std::array<int, kSymbols + 1> a{};
    int c = 0;
    for (int i = 0; i < N; ++i)
      if (program::graph.nodes[i].kind == NodeKind::Symbol) a[c++] = i;
    return a;
  }();
  static constexpr int symbol_index(std::uint64_t id) {
    for (int s = 0; s < kSymbols; ++s)
      if (program::graph.nodes[kSymbolNodes[s]].symbol_id == id) return s;
    return -1;
  }

  template <std::uint64_t Id, class... Bs>
  static constexpr int binding_count = ((Bs::id == Id) + ... + 0);
  template <class B>
  static constexpr void check_known() {
    if constexpr (symbol_index(B::id) < 0) (void)symbol_not_in_expression<B>::value;
  }
  template <class B, int Count>
  static constexpr void check_once() {
    if constexpr (Count > 1) (void)symbol_bound_twice<B>::value;
  }
  template <int S, class... Bs>
  static constexpr void check_bound() {
    constexpr std::uint64_t id = program::graph.nodes[kSymbolNodes[S]].symbol_id;
    if constexpr (!((Bs::id == id) || ... || false))
      (void)symbol_not_bound<typename graph_type::template node<kSymbolNodes[S]>>::value;
  }
  template <class... Bs, int... S>
  static constexpr void check_all_bound(std::integer_sequence<int, S...>) {
    (check_bound<S, Bs...>(), ...);
  }
  // Every symbol bound exactly once, and nothing else: compile-time errors that name the type.
  template <class... Bs>
  static constexpr void check_bindings() {
    (check_known<Bs>(), ...);
    (check_once<Bs, binding_count<Bs::id, Bs...>>(), ...);
    check_all_bound<Bs...>(std::make_integer_sequence<int, kSymbols>{});
  }

  template <int I>
  using dtype_of = typename graph_type::template node<I>::dtype;
  static constexpr std::array<std::size_t, N> kElementSize = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<std::size_t, N>{sizeof(dtype_of<I>)...};
  }(std::make_integer_sequence<int, N>{});

  template <std::size_t... K>
  auto make_outputs(std::index_sequence<K...>) const {
    return std::tuple<Tensor<dtype_of<graph().outputs[K]>>...>(
        Tensor<dtype_of<graph().outputs[K]>>(state_->shapes[graph().outputs[K]])...);
  }
  template <class Tuple, std::size_t... K>
  static void copy_duplicate_outputs(Tuple& outs, std::index_sequence<K...>) {
    ([&] {
      constexpr int first = [] {
        for (int j = 0; j < NOut; ++j)
          if (program::graph.outputs[j] == program::graph.outputs[K]) return j;
        return 0;
      }();
      if constexpr (first != static_cast<int>(K)) std::get<K>(outs) = std::get<first>(outs);
    }(), ...);
  }

  using kernel_tuple = decltype([]<int... G>(std::integer_sequence<int, G...>) {
    return std::tuple<Prepared<typename program::template kernel<G>>...>{};
  }(std::make_integer_sequence<int, nkernels>{}));

  struct State {
    std::vector<Shape> key;     // the input shapes this plan is for
    std::vector<Shape> shapes;  // every node's shape
    std::vector<Face> faces, view_faces;
    std::vector<std::size_t> buffers;  // arena buffers: their offsets (others unused)
    std::size_t arena_bytes = 0;
    kernel_tuple kernels;
  };

  // Plans one shape signature: shapes, buffers, strides, memory.
  void prepare(const std::array<Shape, kSymbols + 1>& inputs) {
    State st;
    st.key.assign(inputs.begin(), inputs.begin() + kSymbols);
    st.shapes.resize(N);
    for (int i = 0, s = 0; i < N; ++i) {
      const auto& n = graph().nodes[i];
      st.shapes[i] = n.kind == NodeKind::Symbol ? inputs[s++] : infer_shape(n, st.shapes, params_[i]);
    }

    // Buffers: the inputs, the outputs, then arena buffers.
    std::vector<ArenaRequest> arena;
    int nbuffers = kSymbols + NOut;
    auto arena_buffer = [&](int node, const Shape& s) {
      arena.push_back({s.numel() * kElementSize[node]});
      return nbuffers++;
    };
    std::array<int, (nkernels > 0 ? nkernels : 1)> group_out{};
    for (int g = 0; g < nkernels; ++g) {
      const int root = plan().groups[g].root;
      int out = -1;
      for (int k = NOut - 1; k >= 0; --k)
        if (graph().outputs[k] == root) out = kSymbols + k;
      group_out[g] = out >= 0 ? out : arena_buffer(root, st.shapes[root]);
    }

    st.faces.resize(N);
    st.view_faces.resize(N);
    for (int i = 0, s = 0; i < N; ++i) {
      const auto& n = graph().nodes[i];
      Face& f = st.faces[i];
      Face& vf = st.view_faces[i];
      if (n.kind == NodeKind::Symbol) {
        f.buffer = s++;
        contiguous_strides(st.shapes[i], f.strides);
        vf = f;
        continue;
      }
      if (n.kind == NodeKind::Transpose) {
        vf = st.faces[n.children[0]];
        std::swap(vf.strides[n.rank - 1], vf.strides[n.rank - 2]);
      } else if (n.kind == NodeKind::Reshape) {
        vf.buffer = st.faces[n.children[0]].buffer;  // the planner made the source contiguous
        contiguous_strides(st.shapes[i], vf.strides);
      }
      if (plan().materialized[i]) {
        f.buffer = group_out[plan().group_of[i]];
        contiguous_strides(st.shapes[i], f.strides);
      } else if (n.kind == NodeKind::Transpose || n.kind == NodeKind::Reshape) {
        f = vf;
      }
    }
    // The matmul of a GEMM kernel accumulates in the output when the epilogue keeps its shape.
    std::array<bool, (nkernels > 0 ? nkernels : 1)> in_place{};
    for (int g = 0; g < nkernels; ++g) {
      const auto& grp = plan().groups[g];
      if (grp.kind != schedule::KernelKind::Gemm) continue;
      in_place[g] = grp.root == grp.gemm || st.shapes[grp.root] == st.shapes[grp.gemm];
      Face& f = st.faces[grp.gemm];
      f.buffer = in_place[g] ? group_out[g] : arena_buffer(grp.gemm, st.shapes[grp.gemm]);
      contiguous_strides(st.shapes[grp.gemm], f.strides);
    }

    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      prepare_kernel<G>(st, group_out[G], in_place[G]);
    });

    // Lifetimes of arena buffers, in kernel indices.
    std::vector<int> first(nbuffers, nkernels), last(nbuffers, -1);
    auto touch = [&](int k, int b) {
      if (b < 0) return;
      first[b] = std::min(first[b], k);
      last[b] = std::max(last[b], k);
    };
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      const auto& pr = std::get<G>(st.kernels);
      for (int b : {pr.out_buffer, pr.a_buffer, pr.b_buffer, pr.acc_buffer}) touch(G, b);
      for (int b : pr.load_buffer) touch(G, b);
    });
    for (std::size_t a = 0; a < arena.size(); ++a) {
      const int b = kSymbols + NOut + static_cast<int>(a);
      arena[a].first = first[b];
      arena[a].last = std::max(last[b], first[b]);
    }
    st.arena_bytes = plan_memory(arena);
    st.buffers.assign(nbuffers, 0);
    for (std::size_t a = 0; a < arena.size(); ++a) st.buffers[kSymbols + NOut + a] = arena[a].offset;
    state_ = std::move(st);
  }

  // The shape of iteration space `space` of kernel G.
  template <int G>
  static Shape space_shape(const State& st, int space) {
    constexpr auto& ki = program::template kernel_info<G>;
    const int node = ki.space_node[space];
    const auto& grp = ki.group;
    const bool row_root_is_reduction = grp.kind == schedule::KernelKind::Row && space == 0 && !grp.copy &&
                                       graph().nodes[grp.root].kind == NodeKind::Reduce;
    if (!row_root_is_reduction) return st.shapes[node];
    Shape s = st.shapes[graph().nodes[grp.root].children[0]];  // the reduced axis kept as 1
    s[s.size() - 1] = 1;
    return s;
  }

  template <int G>
  void prepare_kernel(State& st, int out_buffer, bool in_place) {
    using Desc = typename program::template kernel<G>;
    using T = typename Desc::value_type;
    constexpr auto& ki = program::template kernel_info<G>;
    constexpr auto kind = ki.group.kind;
    auto& pr = std::get<G>(st.kernels);
    auto& ra = pr.row_args();
    pr.out_buffer = out_buffer;

    const Shape o = space_shape<G>(st, 0);
    const int ro = o.rank();
    ra.nrow_dims = std::max(ro - 1, 0);
    for (int d = 0; d + 1 < ro; ++d) ra.row_dims[d] = static_cast<index_t>(o[d]);
    ra.len = ro ? static_cast<index_t>(o[ro - 1]) : 1;
    for (int s = 0; s < Desc::nloads; ++s) {
      const int n = ki.load_node[s];
      const bool copied = ki.group.copy && n == ki.group.root;
      const Face& f = copied ? st.view_faces[n] : st.faces[n];
      pr.load_buffer[s] = f.buffer;
      load_strides(st.shapes[n], f, space_shape<G>(st, ki.load_space[s]), o, ra.outer[s], ra.inner[s]);
    }
    for (int c = 0; c < Desc::nconsts; ++c) ra.consts[c] = static_cast<T>(params_[ki.const_node[c]].scalar);
    for (int s = 0; s < Desc::nstages; ++s) {
      const Shape p = space_shape<G>(st, s + 1);
      ra.stage_len[s] = static_cast<index_t>(p[p.size() - 1]);
    }

    if constexpr (kind == schedule::KernelKind::Gemm) {
      const auto& mm = graph().nodes[ki.group.gemm];
      const Shape &sa = st.shapes[mm.children[0]], &sb = st.shapes[mm.children[1]];
      const Face &fa = st.faces[mm.children[0]], &fb = st.faces[mm.children[1]];
      const int ra_ = sa.rank(), rb_ = sb.rank();
      auto& g = pr.args;
      g.a = {nullptr, (ra_ == 3 && sa[0] != 1) ? fa.strides[0] : 0, fa.strides[ra_ - 2], fa.strides[ra_ - 1]};
      g.b = {nullptr, (rb_ == 3 && sb[0] != 1) ? fb.strides[0] : 0, fb.strides[rb_ - 2], fb.strides[rb_ - 1]};
      const Shape& sm = st.shapes[ki.group.gemm];
      g.batch = sm.rank() == 3 ? static_cast<index_t>(sm[0]) : 1;
      g.m = static_cast<index_t>(sa[ra_ - 2]);
      g.k = static_cast<index_t>(sa[ra_ - 1]);
      g.n = static_cast<index_t>(sb[rb_ - 1]);
      // One weight matrix for every batch and rows stacked contiguously: one taller GEMM.
      if (g.batch > 1 && g.b.batch == 0 && g.a.col == 1 && g.a.batch == g.m * g.a.row) {
        g.m *= g.batch;
        g.batch = 1;
        g.a.batch = 0;
      }
      g.in_place = in_place;
      pr.a_buffer = fa.buffer;
      pr.b_buffer = fb.buffer;
      pr.acc_buffer = st.faces[ki.group.gemm].buffer;
      collapse(ra, false);
    } else if constexpr (kind == schedule::KernelKind::AxisReduce) {
      pr.args.axis = graph().nodes[ki.group.root].axis;
    } else if constexpr (kind == schedule::KernelKind::TotalReduce) {
      collapse(ra, true);
    } else {
      collapse(ra, Desc::nstages == 0);
    }
    ra.rows = 1;
    for (int d = 0; d < ra.nrow_dims; ++d) ra.rows *= ra.row_dims[d];
    ra.unit_inner = true;
    for (int s = 0; s < Desc::nloads; ++s) ra.unit_inner = ra.unit_inner && ra.inner[s] == 1;
  }

  // Merges dims that every load walks as one; with_inner also folds rows into the last axis.
  template <class RA>
  static void collapse(RA& ra, bool with_inner) {
    constexpr int NL = sizeof(ra.inner) / sizeof(ra.inner[0]);
    index_t dims[kMaxRank + 1];
    index_t strides[NL][kMaxRank + 1];
    int nd = ra.nrow_dims;
    for (int d = 0; d < nd; ++d) dims[d] = ra.row_dims[d];
    for (int s = 0; s < NL; ++s)
      for (int d = 0; d < nd; ++d) strides[s][d] = ra.outer[s][d];
    if (with_inner) {
      dims[nd] = ra.len;
      for (int s = 0; s < NL; ++s) strides[s][nd] = ra.inner[s];
      ++nd;
    }
    collapse_dims(nd, dims, strides, NL);
    if (with_inner) {
      --nd;
      ra.len = dims[nd];
      for (int s = 0; s < NL; ++s) ra.inner[s] = strides[s][nd];
    }
    ra.nrow_dims = nd;
    for (int d = 0; d < nd; ++d) ra.row_dims[d] = dims[d];
    for (int s = 0; s < NL; ++s)
      for (int d = 0; d < nd; ++d) ra.outer[s][d] = strides[s][d];
  }

  void run_kernels(const std::vector<void*>& ptr) {
    lower::for_each_index<nkernels>([&](auto g) {
      constexpr int G = decltype(g)::value;
      using Desc = typename program::template kernel<G>;
      using T = typename Desc::value_type;
      auto pr = std::get<G>(state_->kernels);  // a copy: the pointers are this call's
      auto& ra = pr.row_args();
      for (int s = 0; s < Desc::nloads; ++s) ra.ptr[s] = static_cast<const T*>(ptr[pr.load_buffer[s]]);
      ra.out = static_cast<T*>(ptr[pr.out_buffer]);
      if constexpr (requires { pr.args.epilogue; }) {
        pr.args.a.ptr = static_cast<const T*>(ptr[pr.a_buffer]);
        pr.args.b.ptr = static_cast<const T*>(ptr[pr.b_buffer]);
        pr.args.acc = static_cast<T*>(ptr[pr.acc_buffer]);
      }
      Prepared<Desc>::Kernel::run(pr.args);
    });
  }

  std::vector<NodeParams> params_;
  std::optional<State> state_;
  std::unique_ptr<std::byte[], detail::AlignedDelete> arena_;
  std::size_t arena_capacity_ = 0;
};

}  // namespace kiln::runtime

namespace kiln {

template <class R>
concept Compilable = Expression<R> || runtime::root_outputs<R>::multi;

// kiln::compile<Policies...>(expr): the fused program (see runtime/policy.hpp for policies).
template <class... Policies, Compilable Root>
auto compile(const Root& root) {
  using P = runtime::Policy<Policies...>;
  return runtime::Compiled<Root, !P::eager>(root);
}

// kiln::eager(expr): the uncompiled baseline, one kernel per node, every value materialised.
template <Compilable Root>
auto eager(const Root& root) {
  return runtime::Compiled<Root, false>(root);
}

// The plan of expr, as compile(expr).explain() gives it.
template <class... Policies, Compilable Root>
std::string explain(const Root& root) {
  return compile<Policies...>(root).explain();
}

}  // namespace kiln
