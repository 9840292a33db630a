// Fused normalization kernels against the same normalization composed of plain ops (mean, var, rsqrt, mul,
// add), on a [32, 128, 512] float32 input: forward alone, and forward + backward (gradients of x and of the
// affine weights for a fixed output gradient). Goal: the fused forward + backward >= 3x faster.
//
//   bench_normalization
//
// Each figure is the median over kRepeats runs after kWarmup; fused and composed runs alternate, so both see
// the same noise.
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"

using namespace loom;

namespace {

constexpr int kWarmup = 3;
constexpr int kRepeats = 21;
constexpr double kEps = 1e-3;

using Norm = std::function<Tensor(const Tensor& x, const Tensor& gamma, const Tensor& beta)>;

struct Case {
  const char* name;
  Norm fused, composed;
  std::int64_t params;  // length of gamma / beta
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Milliseconds for one forward (and, with `backward`, the gradients of x, gamma and beta).
double run_ms(const Norm& norm, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& dy,
              bool backward) {
  const auto start = std::chrono::steady_clock::now();
  if (backward) {
    GradientTape tape;
    tape.watch({x, gamma, beta});
    const Tensor y = norm(x, gamma, beta);
    const auto grads = tape.gradient(y, {x, gamma, beta}, dy);
  } else {
    const Tensor y = norm(x, gamma, beta);
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Tensor channels_last(const Tensor& p, std::int64_t rank) {
  Shape along(std::size_t(rank), 1);
  along.back() = p.numel();
  return p.reshape(along);
}

Tensor composed_layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  const Tensor y = (x - ops::mean(x, {-1}, true)) * ops::rsqrt(ops::var(x, {-1}, true) + kEps);
  return y * gamma + beta;
}

Tensor composed_rms_norm(const Tensor& x, const Tensor& scale, const Tensor&) {
  return x * ops::rsqrt(ops::mean(ops::square(x), {-1}, true) + kEps) * scale;
}

Tensor composed_group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  const std::int64_t groups = 32, c = x.shape().back();
  Shape grouped = x.shape();
  grouped.back() = c / groups;
  grouped.insert(grouped.end() - 1, groups);
  const Tensor xg = x.reshape(grouped);
  const std::vector<std::int64_t> axes{1, 3};
  const Tensor y = ((xg - ops::mean(xg, axes, true)) * ops::rsqrt(ops::var(xg, axes, true) + kEps)).reshape(x.shape());
  return y * channels_last(gamma, x.ndim()) + channels_last(beta, x.ndim());
}

Tensor composed_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  const std::vector<std::int64_t> axes{0, 1};
  const Tensor y = (x - ops::mean(x, axes, true)) * ops::rsqrt(ops::var(x, axes, true) + kEps);
  return y * gamma + beta;
}

}  // namespace

int main() {
  const Shape shape{32, 128, 512};
  const Tensor x = Tensor::randn(shape, DType::f32, 1) * 2.0 + 0.5;
  const Tensor dy = Tensor::randn(shape, DType::f32, 2);
  const std::vector<Case> cases{
      {"LayerNormalization (axis -1)",
       [](const Tensor& a, const Tensor& g, const Tensor& b) { return ops::layer_norm(a, g, b, {-1}, kEps); },
       composed_layer_norm, 512},
      {"RMSNormalization (axis -1)",
       [](const Tensor& a, const Tensor& g, const Tensor&) { return ops::rms_norm(a, g, {-1}, kEps); },
       composed_rms_norm, 512},
      {"GroupNormalization (32 groups)",
       [](const Tensor& a, const Tensor& g, const Tensor& b) { return ops::group_norm(a, g, b, 32, -1, kEps); },
       composed_group_norm, 512},
      {"BatchNormalization (training, axis -1)",
       [](const Tensor& a, const Tensor& g, const Tensor& b) { return ops::batch_norm(a, g, b, -1, kEps).output; },
       composed_batch_norm, 512},
  };
  fmt::print("[32, 128, 512] float32, median of {} runs (ms); fused vs composed of plain ops\n", kRepeats);
  fmt::print("{:<40} {:>9} {:>9} {:>7}   {:>9} {:>9} {:>7}\n", "", "fwd fused", "composed", "ratio", "f+b fused",
             "composed", "ratio");
  for (const Case& c : cases) {
    const Tensor gamma = Tensor::uniform({c.params}, 0.5, 1.5, DType::f32, 3);
    const Tensor beta = Tensor::randn({c.params}, DType::f32, 4);
    double figures[2][2];  // [backward][fused=0 / composed=1]
    for (int backward = 0; backward < 2; ++backward) {
      std::vector<double> times[2];
      for (int i = 0; i < kWarmup + kRepeats; ++i)
        for (int k = 0; k < 2; ++k) {
          const double ms = run_ms(k == 0 ? c.fused : c.composed, x, gamma, beta, dy, backward == 1);
          if (i >= kWarmup) times[k].push_back(ms);
        }
      figures[backward][0] = median(times[0]);
      figures[backward][1] = median(times[1]);
    }
    fmt::print("{:<40} {:>9.2f} {:>9.2f} {:>6.1f}x   {:>9.2f} {:>9.2f} {:>6.1f}x\n", c.name, figures[0][0],
               figures[0][1], figures[0][1] / figures[0][0], figures[1][0], figures[1][1],
               figures[1][1] / figures[1][0]);
  }
  return 0;
}
