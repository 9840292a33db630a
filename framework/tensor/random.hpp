#pragma once
// Seeded random numbers. Each thread owns a generator (so two threads training at once never share state);
// factories given an explicit seed use a fresh generator and depend on nothing else.
#include <cstdint>
#include <random>

namespace loom::random {

/// Reproducible on every platform: std::mt19937_64's sequence is fixed by the standard, and the
/// distributions below are written out here instead of using the implementation-defined std:: ones.
class Generator {
 public:
  explicit Generator(std::uint64_t seed) : engine_(seed) {}
  double uniform() { return double(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal();                                                 // Box-Muller
  std::uint64_t next() { return engine_(); }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

/// This thread's generator; seeded with 0 until set_seed is called on this thread.
Generator& thread_generator();
void set_seed(std::uint64_t seed);

}  // namespace loom::random
