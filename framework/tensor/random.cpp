#include "framework/tensor/random.hpp"

#include <cmath>
#include <numbers>

namespace loom::random {

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  spare_ = radius * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return radius * std::cos(2.0 * std::numbers::pi * u2);
}

namespace {
thread_local Generator generator{0};
}

Generator& thread_generator() { return generator; }
void set_seed(std::uint64_t seed) { generator = Generator(seed); }

}  // namespace loom::random
