#include "framework/runtime/detail/parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <immintrin.h>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace loom::parallel {

namespace {

/// The cores this process may run on: its affinity mask (mpirun and taskset narrow it), else all the
/// machine's. More threads than that would spin against each other on one core.
int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1U, std::thread::hardware_concurrency()));
}

/// How long an idle worker spins before it sleeps.
constexpr std::chrono::microseconds kSpin{50};

/// True on a thread while it runs an item: a nested run() then runs inline.
thread_local bool inside_item = false;

/// One run's shared state: the items left to claim and the first exception.
struct Job {
  std::int64_t items = 0;
  std::optional<TaskRef> task;
  std::atomic<std::int64_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;

  void work(int worker) {
    inside_item = true;
    for (std::int64_t item = next.fetch_add(1); item < items; item = next.fetch_add(1)) {
      try {
        (*task)(worker, item);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
    inside_item = false;
  }
};

/// Workers wait for a new generation number. They spin for a short while first, because kernels come in
/// quick succession (one op after another) and waking a sleeping thread costs several microseconds, then
/// sleep on a condition variable so an idle process uses no CPU.
class Pool {
 public:
  Pool() : size_(usable_cores()) {
    for (int w = 1; w < size_; ++w) workers_.emplace_back([this] { serve(); });
  }

  ~Pool() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int size() const { return size_; }

  void run(std::int64_t items, int max_threads, TaskRef task) {
    const int helpers = int(std::min<std::int64_t>({std::int64_t(size_), std::int64_t(max_threads), items})) - 1;
    std::unique_lock owner(submit_, std::try_to_lock);
    if (helpers <= 0 || inside_item || !owner.owns_lock()) {
      run_inline(items, task);
      return;
    }
    Job job;
    job.items = items;
    job.task = task;
    {
      const std::lock_guard lock(mutex_);
      job_ = &job;
      wanted_ = helpers;
      taken_ = 0;
      busy_.store(helpers, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job.work(0);
    {
      // Helpers that have not woken yet are no longer wanted: the items are all claimed.
      const std::lock_guard lock(mutex_);
      busy_.fetch_sub(wanted_, std::memory_order_relaxed);
      wanted_ = 0;
    }
    while (busy_.load(std::memory_order_acquire) != 0) _mm_pause();
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  static void run_inline(std::int64_t items, TaskRef task) {
    const bool nested = inside_item;
    inside_item = true;
    try {
      for (std::int64_t item = 0; item < items; ++item) task(0, item);
    } catch (...) {
      inside_item = nested;
      throw;
    }
    inside_item = nested;
  }

  void serve() {
    std::uint64_t seen = 0;
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpin;
      while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until)
        _mm_pause();
      Job* job = nullptr;
      int worker = 0;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        seen = generation_.load(std::memory_order_relaxed);
        if (stopping_) return;
        if (wanted_ > 0) {
          worker = ++taken_;
          --wanted_;
          job = job_;
        }
      }
      if (job == nullptr) continue;
      job->work(worker);
      busy_.fetch_sub(1, std::memory_order_release);
    }
  }

  const int size_;
  std::vector<std::thread> workers_;
  std::mutex submit_;  // held by the thread whose job the pool runs
  std::mutex mutex_;   // guards job_, wanted_, stopping_ and the generation's change
  std::condition_variable wake_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> busy_{0};  // helpers still working on the current job
  Job* job_ = nullptr;
  int wanted_ = 0;  // helpers the current job still wants
  int taken_ = 0;   // helpers that have joined it: the next one is worker taken_ + 1
  bool stopping_ = false;
};

Pool& pool() {
  static Pool instance;
  return instance;
}

}  // namespace

int thread_count() { return pool().size(); }

void run(std::int64_t items, int max_threads, TaskRef task) {
  if (items <= 0) return;
  pool().run(items, max_threads, task);
}

}  // namespace loom::parallel
