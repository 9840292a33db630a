// Built against an installed loom only (tests/package/CMakeLists.txt): the umbrella header compiles from
// the installed headers, pulls in none of the machinery, and a small model trains.
#include <cstdio>

#include "loom.hpp"

#if defined(XTENSOR_VERSION_MAJOR) || defined(XSIMD_VERSION_MAJOR)
#error "loom.hpp pulled in xtensor or xsimd"
#endif
#if defined(CBLAS_H) || defined(OPENBLAS_CONFIG_H)
#error "loom.hpp pulled in a BLAS header"
#endif
#if __has_include("framework/kernels/dispatch.hpp") || __has_include("framework/tensor/detail/tensor_impl.hpp")
#error "the internal headers were installed"
#endif

using namespace loom;
namespace L = loom::layers;

int main() {
  // y = 2 x0 - x1: a linear model must fit it.
  const Tensor x = Tensor::randn({256, 2}, DType::f32, /*seed=*/1);
  const Tensor y = ops::matmul(x, Tensor::from_vector(std::vector<float>{2.0f, -1.0f}, Shape{2, 1}));
  auto model = L::Sequential({L::Input({2}), L::Dense(1)});
  model.compile({.optimizer = optim::Adam({.learning_rate = 0.05}), .loss = "mse"});
  const History history = model.fit(x, y, {.batch_size = 32, .epochs = 20, .verbose = 0});
  const auto& loss = history.history.at("loss");
  std::printf("loss %.6f -> %.6f on %s, OpenBLAS core %s\n", loss.front(), loss.back(), simd::active_isa().c_str(),
              blas_info().core.c_str());
  if (!(loss.back() < 0.01 * loss.front())) {
    std::printf("the loss did not fall\n");
    return 1;
  }
  return 0;
}
