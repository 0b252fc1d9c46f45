// The Tensor API a user meets first: factories, item, element access, printing, copy_from,
// views and Eigen interop, with their errors. A CUDA tensor's host-side errors are checked on a
// view labelled cuda:0 (Tensor::view), as this program has no CUDA runtime.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>

namespace {
constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();

template <class T>
bool all_equal(const kiln::Tensor<T>& t, double v) {
  for (std::size_t i = 0; i < t.numel(); ++i)
    if (static_cast<double>(kiln::widen(t[i])) != v) return false;
  return true;
}
}  // namespace

TEST_CASE("zeros, ones, full: element type, shape and values") {
  auto z = kiln::zeros<double>({2, 3});
  auto o = kiln::ones({4});  // float by default
  auto f = kiln::full({3, 1, 2}, 2.5f);
  auto h = kiln::full<kiln::bf16>({5}, 1.5);
  static_assert(std::is_same_v<decltype(z), kiln::Tensor<double>>);
  static_assert(std::is_same_v<decltype(o), kiln::Tensor<float>>);
  static_assert(std::is_same_v<decltype(f), kiln::Tensor<float>>);
  static_assert(std::is_same_v<decltype(h), kiln::Tensor<kiln::bf16>>);
  CHECK(z.shape() == kiln::Shape{2, 3});
  CHECK(all_equal(z, 0.0));
  CHECK(all_equal(o, 1.0));
  CHECK(all_equal(f, 2.5));
  CHECK(all_equal(h, 1.5));
  CHECK(kiln::full({}, 7.0).rank() == 0);
  CHECK(kiln::zeros({0, 4}).numel() == 0);
  const auto r = kiln::randn<float>({3, 4}, 5);
  auto zl = kiln::zeros_like(r);
  auto ol = kiln::ones_like<double>(r);
  CHECK(zl.shape() == r.shape());
  CHECK(ol.shape() == r.shape());
  CHECK(all_equal(zl, 0.0));
  CHECK(all_equal(ol, 1.0));
  for (auto* t : {&z}) CHECK(t->device() == kiln::Device::cpu());
  // No CUDA runtime in this program: asking for a CUDA tensor says so.
  CHECK_THROWS_WITH_AS(kiln::zeros({2}, kiln::Device::cuda()), doctest::Contains("no CUDA support"), kiln::DeviceError);
  CHECK_THROWS_AS(kiln::randn<float>({2}, 1, kiln::Device::cuda()), kiln::DeviceError);
}

TEST_CASE("arange: torch.arange's element count and values") {
  auto a = kiln::arange(5);
  CHECK(a.shape() == kiln::Shape{5});
  for (std::size_t i = 0; i < 5; ++i) CHECK(a[i] == float(i));
  auto b = kiln::arange<double>(1, 2, 0.25);
  REQUIRE(b.numel() == 4);
  CHECK(b[3] == 1.75);
  auto c = kiln::arange<double>(0, 1, 0.3);  // 0, 0.3, 0.6, 0.9
  REQUIRE(c.numel() == 4);
  CHECK(c[3] == doctest::Approx(0.9));
  auto d = kiln::arange<float>(3, -3, -2);  // 3, 1, -1
  REQUIRE(d.numel() == 3);
  CHECK(d[2] == -1.0f);
  CHECK(kiln::arange(2, 2).numel() == 0);
  CHECK(kiln::arange(5, 2).numel() == 0);
  CHECK_THROWS_WITH_AS(kiln::arange(0, 1, 0), doctest::Contains("step must be nonzero"), kiln::ShapeError);
  auto e = kiln::arange<kiln::bf16>(4);
  CHECK(float(e[3]) == 3.0f);
}

TEST_CASE("from_vector copies the values row-major and checks their count") {
  auto r = kiln::randn<double>({2, 3}, 11);
  std::vector<double> v(r.data(), r.data() + 6);
  auto t = kiln::from_vector(v, {2, 3});
  CHECK(t.shape() == kiln::Shape{2, 3});
  CHECK(t.at({1, 2}) == r.at({1, 2}));
  CHECK(t.data() != v.data());
  v[0] = 100.0;
  CHECK(t[0] == r[0]);  // a copy
  CHECK(kiln::from_vector(v).shape() == kiln::Shape{6});
  CHECK_THROWS_WITH_AS(kiln::from_vector(v, {2, 4}), "from_vector: 6 values for shape [2, 4], which has 8 elements",
                       kiln::ShapeError);
}

TEST_CASE("rand: uniform in [0, 1), seeded; 16-bit draws stay below 1 after rounding") {
  auto a = kiln::rand<double>({20000}, 3), b = kiln::rand<double>({20000}, 3), c = kiln::rand<double>({20000}, 4);
  double mean = 0;
  bool same = true, differ = false, inside = true;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    same = same && a[i] == b[i];
    differ = differ || a[i] != c[i];
    inside = inside && a[i] >= 0.0 && a[i] < 1.0;
    mean += a[i];
  }
  CHECK(same);
  CHECK(differ);
  CHECK(inside);
  CHECK(mean / a.numel() == doctest::Approx(0.5).epsilon(0.02));
  // bf16 keeps 8 significant bits: about one draw in 512 would round up to 1.
  auto h = kiln::rand<kiln::bf16>({100000}, 9);
  float hi = 0;
  for (std::size_t i = 0; i < h.numel(); ++i) hi = std::max(hi, float(h[i]));
  CHECK(hi < 1.0f);
  CHECK(hi == float(kiln::bf16::from_bits(0x3f7f)));  // the largest bf16 below 1 does occur
  auto s = kiln::rand<float>({4}, 1, kiln::Device::cpu());
  CHECK(s.numel() == 4);
}

TEST_CASE("shape, strides, dtype") {
  auto t = kiln::randn<float>({2, 3, 4}, 1);
  CHECK(t.strides() == kiln::Shape{12, 4, 1});
  CHECK(t.strides().str() == "[12, 4, 1]");
  CHECK(kiln::Tensor<float>(kiln::Shape{}).strides().size() == 0);
  CHECK(std::string(t.dtype()) == "f32");
  CHECK(std::string(kiln::Tensor<kiln::bf16>::dtype()) == "bf16");
}

TEST_CASE("item: the value of a one-element tensor, an error otherwise") {
  auto r = kiln::randn<double>({1, 1, 1}, 2);
  CHECK(r.item() == r[0]);
  kiln::Tensor<float> s(kiln::Shape{});
  s[0] = 3.25f;
  CHECK(s.item() == 3.25f);
  CHECK_THROWS_WITH_AS(kiln::randn<float>({2, 3}, 1).item(),
                       "item: the tensor has shape [2, 3] (6 elements); item() needs exactly one element",
                       kiln::ShapeError);
  CHECK_THROWS_AS(kiln::zeros({0}).item(), kiln::ShapeError);
}

TEST_CASE("at: row-major multi-index, bounds checked, messages name the shape") {
  auto t = kiln::randn<float>({3, 4, 5}, 7);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 0; k < 5; ++k) CHECK(t.at({i, j, k}) == t[(i * 4 + j) * 5 + k]);
  t.at({2, 3, 4}) = -1.0f;
  CHECK(t[59] == -1.0f);
  CHECK_THROWS_WITH_AS(t.at({1, 4, 0}), "kiln::Tensor::at: index 4 on axis 1 is out of range for shape [3, 4, 5]",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(t.at({1, 2}), "kiln::Tensor::at: 2 indices for shape [3, 4, 5], which has rank 3",
                       std::out_of_range);
}

TEST_CASE("a CUDA tensor's elements are not host memory: operator[], at and Eigen maps throw DeviceError") {
  std::vector<float> host(6);
  auto d = kiln::Tensor<float>::view(host.data(), {2, 3}, kiln::Device::cuda(0));
  const auto& cd = d;
  CHECK_THROWS_WITH_AS(d[0], doctest::Contains("kiln::Tensor::operator[]: the tensor is on cuda:0"), kiln::DeviceError);
  CHECK_THROWS_AS(cd[1], kiln::DeviceError);
  CHECK_THROWS_WITH_AS(d.at({0, 1}), doctest::Contains("is on cuda:0"), kiln::DeviceError);
  CHECK_THROWS_WITH_AS(d.as_eigen_matrix(), doctest::Contains("as_eigen_matrix: the tensor is on cuda:0"),
                       kiln::DeviceError);
  CHECK_THROWS_AS(d.as_eigen_tensor<2>(), kiln::DeviceError);
  // Reading it needs the CUDA runtime, which this program lacks: a DeviceError, not a crash.
  CHECK_THROWS_AS(kiln::to_string(d), kiln::DeviceError);
  auto one = kiln::Tensor<float>::view(host.data(), {1}, kiln::Device::cuda(0));
  CHECK_THROWS_WITH_AS(one.item(), doctest::Contains("no CUDA support"), kiln::DeviceError);
}

TEST_CASE("copy_from: in place, shapes checked, through views") {
  auto src = kiln::randn<float>({4, 5}, 3);
  kiln::Tensor<float> dst({4, 5});
  const float* p = dst.data();
  dst.copy_from(src);
  CHECK(dst.data() == p);
  for (std::size_t i = 0; i < 20; ++i) CHECK(dst[i] == src[i]);
  dst.copy_from(dst);  // itself: nothing to do
  CHECK(dst[7] == src[7]);
  kiln::Tensor<float> wrong({5, 4});
  CHECK_THROWS_WITH_AS(wrong.copy_from(src), "copy_from: the source has shape [4, 5], the destination [5, 4]",
                       kiln::ShapeError);
  std::vector<float> mem(20, 0.0f);
  auto v = kiln::Tensor<float>::view(mem.data(), {4, 5});
  v.copy_from(src);
  CHECK(mem[19] == src[19]);
  // To or from a CUDA tensor needs the CUDA runtime in the program.
  auto d = kiln::Tensor<float>::view(mem.data(), {4, 5}, kiln::Device::cuda(0));
  CHECK_THROWS_AS(d.copy_from(src), kiln::DeviceError);
  CHECK_THROWS_AS(dst.copy_from(d), kiln::DeviceError);
}

TEST_CASE("views: no ownership, deep copies, rebinding assignment") {
  std::vector<double> mem(6);
  for (std::size_t i = 0; i < 6; ++i) mem[i] = double(i);
  {
    auto v = kiln::Tensor<double>::view(mem.data(), {2, 3});
    CHECK(v.is_view());
    CHECK(v.data() == mem.data());
    CHECK(v.at({1, 0}) == 3.0);
    kiln::Tensor<double> c = v;  // a deep copy, owning
    CHECK_FALSE(c.is_view());
    CHECK(c.data() != mem.data());
    c[0] = 42.0;
    CHECK(mem[0] == 0.0);
    kiln::Tensor<double> moved = std::move(v);  // still a view
    CHECK(moved.is_view());
    CHECK(moved.data() == mem.data());
    moved = kiln::ones<double>({2, 3});  // rebinds: the viewed memory is untouched
    CHECK_FALSE(moved.is_view());
    CHECK(mem[1] == 1.0);
  }  // destroying the views freed nothing
  CHECK(mem[5] == 5.0);
  CHECK_FALSE(kiln::zeros({2}).is_view());
}

TEST_CASE("printing: nested brackets, fixed or scientific notation, dtype, shape when summarised") {
  CHECK(kiln::to_string(kiln::arange(4)) == "tensor([0.0000, 1.0000, 2.0000, 3.0000], dtype=f32)");
  CHECK(kiln::to_string(kiln::arange<double>(-1, 5, 1.5).cpu(), {.precision = 1}) ==
        "tensor([-1.0,  0.5,  2.0,  3.5], dtype=f64)");
  auto m = kiln::from_vector(std::vector<float>{1, -2, 3, 40, 5, 6}, {2, 3});
  CHECK(kiln::to_string(m, {.precision = 2}) ==
        "tensor([[ 1.00, -2.00,  3.00],\n"
        "        [40.00,  5.00,  6.00]], dtype=f32)");
  CHECK(kiln::to_string(kiln::arange(2 * 2 * 2).as<kiln::bf16>(), {.precision = 0}) == "tensor([0, 1, 2, 3, 4, 5, 6, 7], dtype=bf16)");
  kiln::Tensor<float> cube({2, 2, 2});
  for (std::size_t i = 0; i < 8; ++i) cube[i] = float(i);
  CHECK(kiln::to_string(cube, {.precision = 0}) ==
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]], dtype=f32)");
  CHECK(kiln::to_string(kiln::arange(10), {.precision = 1, .threshold = 5, .edgeitems = 2}) ==
        "tensor([0.0, 1.0, ..., 8.0, 9.0], shape=[10], dtype=f32)");
  auto big = kiln::randn<float>({100, 200}, 1);
  const std::string s = kiln::to_string(big);
  CHECK(s.find("shape=[100, 200], dtype=f32)") != std::string::npos);
  CHECK(s.find("        ...,\n") != std::string::npos);
  CHECK(std::count(s.begin(), s.end(), '\n') == 6);  // 3 rows, "...", 3 rows
  CHECK(kiln::to_string(kiln::full({}, 2.5)) == "tensor(2.5000, dtype=f64)");
  CHECK(kiln::to_string(kiln::zeros({0, 3})) == "tensor([], shape=[0, 3], dtype=f32)");
  CHECK(kiln::to_string(kiln::full({2}, 1e-6f), {.precision = 2}) == "tensor([1.00e-06, 1.00e-06], dtype=f32)");
  auto odd = kiln::from_vector(std::vector<double>{NAN, INFINITY, -INFINITY, 1.0});
  CHECK(kiln::to_string(odd, {.precision = 1}) == "tensor([ nan,  inf, -inf,  1.0], dtype=f64)");
  std::ostringstream os;
  os << kiln::ones<double>({1});
  CHECK(os.str() == "tensor([1.0000], dtype=f64)");
}

TEST_CASE("from_eigen: a view of a row-major matrix; writes go both ways") {
  kiln::EigenRowMatrix<float> a = kiln::EigenRowMatrix<float>::Random(5, 7);
  auto t = kiln::from_eigen(a);
  static_assert(std::is_same_v<decltype(t), kiln::Tensor<float>>);
  CHECK(t.is_view());
  CHECK(t.shape() == kiln::Shape{5, 7});
  CHECK(t.data() == a.data());
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 7; ++j) CHECK(t.at({i, j}) == a(i, j));
  t.at({4, 6}) = 9.0f;
  CHECK(a(4, 6) == 9.0f);
  a(0, 1) = -3.0f;
  CHECK(t.at({0, 1}) == -3.0f);
  // A Map over a buffer, a const matrix, a vector, a whole row and a full-width block.
  std::vector<double> buf(12);
  Eigen::Map<kiln::EigenRowMatrix<double>> map(buf.data(), 3, 4);
  CHECK(kiln::from_eigen(map).data() == buf.data());
  CHECK(kiln::from_eigen(Eigen::Map<kiln::EigenRowMatrix<double>>(buf.data(), 4, 3)).shape() == kiln::Shape{4, 3});
  const kiln::EigenRowMatrix<float>& ca = a;
  CHECK(kiln::from_eigen(ca).at({2, 3}) == a(2, 3));
  Eigen::VectorXd vec = Eigen::VectorXd::Random(9);
  auto tv = kiln::from_eigen(vec);
  CHECK(tv.shape() == kiln::Shape{9});
  CHECK(tv[8] == vec(8));
  auto row = kiln::from_eigen(a.row(2));
  CHECK(row.shape() == kiln::Shape{7});
  CHECK(row[3] == a(2, 3));
  CHECK(kiln::from_eigen(a.middleRows(1, 3)).at({0, 0}) == a(1, 0));
  // Strided objects are not contiguous row-major memory: rejected, naming the reason.
  CHECK_THROWS_WITH_AS(kiln::from_eigen(a.col(2)), doctest::Contains("inner stride 7"), kiln::ShapeError);
  CHECK_THROWS_WITH_AS(kiln::from_eigen(a.block(0, 0, 2, 3)), doctest::Contains("has outer stride 7, not 3"),
                       kiln::ShapeError);
}

TEST_CASE("from_eigen_transposed: a column-major matrix's memory is its transpose, row-major") {
  Eigen::MatrixXd c = Eigen::MatrixXd::Random(4, 6);  // column-major, Eigen's default
  auto t = kiln::from_eigen_transposed(c);
  CHECK(t.shape() == kiln::Shape{6, 4});
  CHECK(t.data() == c.data());
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(t.at({i, j}) == c(j, i));
  // (kiln::from_eigen(c) does not compile: its static_assert names this function.)
}

TEST_CASE("as_eigen_matrix and as_eigen_tensor: row-major Eigen maps of a tensor's memory") {
  auto t = kiln::randn<double>({3, 5}, 4);
  auto m = t.as_eigen_matrix();
  static_assert(std::is_same_v<decltype(m), Eigen::Map<kiln::EigenRowMatrix<double>>>);
  CHECK(m.data() == t.data());
  CHECK(m.rows() == 3);
  CHECK(m.cols() == 5);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j) CHECK(m(i, j) == t.at({i, j}));
  m(2, 4) = 8.0;
  CHECK(t.at({2, 4}) == 8.0);
  const auto& ct = t;
  static_assert(std::is_same_v<decltype(ct.as_eigen_matrix()), Eigen::Map<const kiln::EigenRowMatrix<double>>>);
  // Eigen's maths on the map: a product equals the tensor's own loop.
  kiln::EigenRowMatrix<double> g = ct.as_eigen_matrix() * ct.as_eigen_matrix().transpose();
  double g01 = 0;
  for (std::size_t k = 0; k < 5; ++k) g01 += t.at({0, k}) * t.at({1, k});
  CHECK(g(0, 1) == doctest::Approx(g01));

  auto u = kiln::randn<float>({2, 3, 4}, 8);
  auto e = u.as_eigen_tensor<3>();
  CHECK(e.dimension(0) == 2);
  CHECK(e.dimension(2) == 4);
  CHECK(e(1, 2, 3) == u.at({1, 2, 3}));
  e(0, 1, 2) = 5.0f;
  CHECK(u.at({0, 1, 2}) == 5.0f);
  CHECK(kiln::Tensor<float>(kiln::Shape{}).as_eigen_tensor<0>().data() != nullptr);
  CHECK_THROWS_WITH_AS(u.as_eigen_matrix(), "as_eigen_matrix: the tensor has shape [2, 3, 4] (rank 3), the map needs rank 2",
                       kiln::ShapeError);
  CHECK_THROWS_AS(u.as_eigen_tensor<2>(), kiln::ShapeError);
  // Round trip: an Eigen matrix through a kiln view and back is the same memory.
  kiln::EigenRowMatrix<float> a = kiln::EigenRowMatrix<float>::Random(2, 2);
  auto back = kiln::from_eigen(a).as_eigen_matrix();
  CHECK(back.data() == a.data());
}

TEST_CASE("views in compiled calls: Eigen inputs, results written into Eigen memory by into()") {
  kiln::EigenRowMatrix<float> xe = kiln::EigenRowMatrix<float>::Random(6, 8);
  kiln::EigenRowMatrix<float> we = kiln::EigenRowMatrix<float>::Random(8, 3);
  kiln::EigenRowMatrix<float> ye(6, 3);
  auto f = kiln::compile<kiln::ReduceOverhead>(kiln::relu(kiln::matmul(x, w)));
  auto out = kiln::from_eigen(ye);
  f.into(out, x = kiln::from_eigen(xe), w = kiln::from_eigen(we));
  const kiln::EigenRowMatrix<float> want = (xe * we).cwiseMax(0.0f);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 3; ++j) CHECK(ye(i, j) == doctest::Approx(want(i, j)).epsilon(1e-5));
  kiln::Tensor<float> fresh = f(x = kiln::from_eigen(xe), w = kiln::from_eigen(we));
  CHECK_FALSE(fresh.is_view());
  CHECK(fresh.at({5, 2}) == doctest::Approx(want(5, 2)).epsilon(1e-5));
}
