#pragma once
// loom's own worker threads: one persistent pool (one thread per core, the caller included) that runs the
// elementwise, normalization, reduction and attention kernels on every core. Internal: used by kernel .cpp
// files, not part of the public API.
//
//   parallel::for_ranges(n, kGrain, [&](std::int64_t begin, std::int64_t end) { ... });
//
// Work is split by the problem's size alone, never by how many threads happen to be free, so a result is
// the same bits whether the pool ran it or the caller ran every piece itself. That happens when the pool is
// busy with another thread's work (two models trained in two threads) or when a kernel running on the pool
// asks for it again: nothing waits on a pool that cannot come.
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace loom::parallel {

/// A callable borrowed for the length of one run: no allocation, unlike std::function.
class TaskRef {
 public:
  template <class F>
  TaskRef(F&& f)  // NOLINT(google-explicit-constructor): made from the lambda at the call
      : object_(static_cast<void*>(&f)), call_([](void* o, int worker, std::int64_t item) {
          (*static_cast<std::remove_reference_t<F>*>(o))(worker, item);
        }) {}
  void operator()(int worker, std::int64_t item) const { call_(object_, worker, item); }

 private:
  void* object_;
  void (*call_)(void*, int, std::int64_t);
};

/// Threads the pool runs on, the caller included: one per core the process may run on (its affinity mask).
int thread_count();

/// Runs task(worker, item) for every item in [0, items), each item exactly once, on up to `max_threads`
/// threads; threads claim the next item as they finish one, so items of unequal cost balance out. `worker`
/// is the running thread's index in [0, max_threads), for per-thread scratch. Returns when all are done; an
/// exception thrown by an item is rethrown here (the other items still run).
void run(std::int64_t items, int max_threads, TaskRef task);

/// How many pieces of at least `grain` units [0, n) is cut into: depends on n alone (see the top comment).
inline std::int64_t piece_count(std::int64_t n, std::int64_t grain) {
  return std::clamp<std::int64_t>(n / std::max<std::int64_t>(grain, 1), 1, 64);
}

/// fn(piece, begin, end) for each of `pieces` contiguous ranges covering [0, n), in parallel when there
/// are several. Pieces are numbered in order, for per-piece partial results that are then combined in order.
template <class F>
void for_pieces(std::int64_t n, std::int64_t pieces, F&& fn) {
  if (pieces <= 1) {
    if (n > 0) fn(std::int64_t{0}, std::int64_t{0}, n);
    return;
  }
  run(pieces, thread_count(), [&](int, std::int64_t p) { fn(p, n * p / pieces, n * (p + 1) / pieces); });
}

/// fn(begin, end) over `piece_count(n, grain)` contiguous ranges covering [0, n), in parallel when there
/// are several. Small n runs inline at the cost of one comparison.
template <class F>
void for_ranges(std::int64_t n, std::int64_t grain, F&& fn) {
  for_pieces(n, piece_count(n, grain), [&](std::int64_t, std::int64_t begin, std::int64_t end) { fn(begin, end); });
}

}  // namespace loom::parallel
