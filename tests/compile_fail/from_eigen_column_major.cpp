// expect: the matrix is column-major .Eigen's default.; kiln tensors are row-major
#include <kiln/kiln.hpp>
int main() {
  Eigen::MatrixXf m(2, 3);  // column-major
  auto t = kiln::from_eigen(m);
}
