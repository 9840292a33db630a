#include "framework/tensor/random.hpp"

#include <cmath>
#include <numbers>

#include "framework/tensor/error.hpp"

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
thread_local Generator this_thread{0};
}

Generator& thread_generator() { return this_thread; }
void set_seed(std::uint64_t seed) { this_thread = Generator(seed); }

namespace {
thread_local detail::SeedLog* seed_log = nullptr;
}

std::uint64_t draw_seed(Generator& generator) { return seed_log ? seed_log->draw(generator) : generator.next(); }

namespace detail {

std::uint64_t SeedLog::draw(Generator& generator) {
  if (replaying_) {
    check(next_ < seeds_.size(), "remat: the function drew more random seeds on its second run than on its first ({})",
          seeds_.size());
    return seeds_[next_++];
  }
  const std::uint64_t seed = parent_ ? parent_->draw(generator) : generator.next();
  seeds_.push_back(seed);
  return seed;
}

UseSeedLog::UseSeedLog(SeedLog& log) : outer_(seed_log) {
  if (!log.replaying_) log.parent_ = outer_;
  seed_log = &log;
}
UseSeedLog::~UseSeedLog() { seed_log = outer_; }

}  // namespace detail

}  // namespace loom::random
