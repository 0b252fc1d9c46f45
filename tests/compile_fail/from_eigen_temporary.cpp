// expect: the matrix is a temporary, which the view would outlive
#include <kiln/kiln.hpp>
int main() {
  auto t = kiln::from_eigen(kiln::EigenRowMatrix<float>(2, 3));
}
