#include "images.hpp"

#include <cmath>
#include <vector>

namespace normalization_study {

using namespace loom;

std::pair<Tensor, Tensor> striped_disks(std::int64_t n, std::uint64_t seed) {
  random::Generator rng(seed);
  std::vector<float> pixels;
  std::vector<std::int64_t> labels;
  pixels.reserve(std::size_t(n * kImageSide * kImageSide));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t label = std::int64_t(rng.next() % std::uint64_t(kImageClasses));
    const double angle = M_PI * double(label) / double(kImageClasses) + rng.uniform(-0.1, 0.1);
    const double period = rng.uniform(3.0, 6.0), phase = rng.uniform(0.0, 2.0 * M_PI);
    const double cx = rng.uniform(4.0, 12.0), cy = rng.uniform(4.0, 12.0), radius = rng.uniform(3.0, 6.0);
    const double background = rng.uniform(-1.0, 1.0), contrast = rng.uniform(0.5, 1.5);
    const double noise = rng.uniform(0.2, 0.6);
    const double exposure = std::exp(rng.uniform(-std::log(2.0), std::log(2.0)));
    for (std::int64_t y = 0; y < kImageSide; ++y)
      for (std::int64_t x = 0; x < kImageSide; ++x) {
        const double along = std::cos(angle) * double(x) + std::sin(angle) * double(y);
        const double stripes = std::sin(2.0 * M_PI * along / period + phase);
        const bool inside = std::hypot(double(x) - cx, double(y) - cy) <= radius;
        const double value = background + (inside ? contrast * stripes : 0.0) + noise * rng.normal();
        pixels.push_back(float(exposure * value));
      }
    labels.push_back(label);
  }
  return {Tensor::from_vector(pixels, Shape{n, kImageSide, kImageSide, 1}), Tensor::from_vector(labels, Shape{n})};
}

}  // namespace normalization_study
