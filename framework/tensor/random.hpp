#pragma once
// Seeded random numbers. Each thread owns a generator (so two threads training at once never share state);
// factories given an explicit seed use a fresh generator and depend on nothing else.
#include <cstdint>
#include <cstddef>
#include <random>
#include <vector>

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

/// The seed of one call of a seeded random layer (Dropout with a seed): the next value of `generator`, or,
/// while remat recomputes a forward pass (framework/autograd/remat.hpp), the seed that call drew the first time.
std::uint64_t draw_seed(Generator& generator);

namespace detail {
/// The seeds draw_seed gave during one forward pass, in order, to replay when remat recomputes it.
class SeedLog {
 public:
  /// Recording: draws from the enclosing log (or the generator) and keeps the seed; replaying: the next kept one.
  std::uint64_t draw(Generator& generator);
  void start_replay() { replaying_ = true; next_ = 0; }

 private:
  friend class UseSeedLog;
  std::vector<std::uint64_t> seeds_;
  std::size_t next_ = 0;
  bool replaying_ = false;
  SeedLog* parent_ = nullptr;
};
/// RAII: this thread's draw_seed goes through `log` while the guard lives.
class UseSeedLog {
 public:
  explicit UseSeedLog(SeedLog& log);
  ~UseSeedLog();
  UseSeedLog(const UseSeedLog&) = delete;
  UseSeedLog& operator=(const UseSeedLog&) = delete;

 private:
  SeedLog* outer_;
};
}  // namespace detail

}  // namespace loom::random
