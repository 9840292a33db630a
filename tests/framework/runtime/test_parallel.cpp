#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "framework/runtime/detail/parallel.hpp"
#include "loom.hpp"

using namespace loom;

TEST_CASE("parallel run visits every item exactly once, with worker indices in range", "[parallel]") {
  for (const std::int64_t items : {1, 2, 3, 64, 1000}) {
    std::vector<std::atomic<int>> visits(static_cast<std::size_t>(items));
    std::atomic<bool> worker_in_range{true};
    parallel::run(items, parallel::thread_count(), [&](int worker, std::int64_t item) {
      if (worker < 0 || worker >= parallel::thread_count()) worker_in_range = false;
      ++visits[static_cast<std::size_t>(item)];
    });
    CHECK(worker_in_range);
    for (const auto& v : visits) REQUIRE(v == 1);
  }
}

TEST_CASE("parallel for_pieces covers the range in pieces fixed by the size alone", "[parallel]") {
  const std::int64_t n = 100003;
  const std::int64_t pieces = parallel::piece_count(n, 1000);
  CHECK(pieces == 64);  // at most 64 pieces, however many threads
  CHECK(parallel::piece_count(999, 1000) == 1);
  std::vector<int> owner(static_cast<std::size_t>(n), -1);
  parallel::for_pieces(n, pieces, [&](std::int64_t piece, std::int64_t begin, std::int64_t end) {
    CHECK(begin == n * piece / pieces);
    CHECK(end == n * (piece + 1) / pieces);
    for (std::int64_t i = begin; i < end; ++i) owner[static_cast<std::size_t>(i)] = int(piece);
  });
  for (int o : owner) REQUIRE(o >= 0);
}

TEST_CASE("parallel run rethrows an item's exception after the other items ran", "[parallel]") {
  std::atomic<int> ran{0};
  auto task = [&](int, std::int64_t item) {
    ++ran;
    if (item == 5) throw std::runtime_error("item 5 failed");
  };
  REQUIRE_THROWS_WITH(parallel::run(16, parallel::thread_count(), task), "item 5 failed");
  CHECK(ran == 16);
  // The pool is usable afterwards.
  std::atomic<int> again{0};
  parallel::run(16, parallel::thread_count(), [&](int, std::int64_t) { ++again; });
  CHECK(again == 16);
}

TEST_CASE("parallel run called from inside an item runs inline instead of waiting on itself", "[parallel]") {
  std::atomic<int> inner{0};
  parallel::run(4, parallel::thread_count(), [&](int, std::int64_t) {
    parallel::run(8, parallel::thread_count(), [&](int worker, std::int64_t) {
      CHECK(worker == 0);  // nested work runs on the calling thread
      ++inner;
    });
  });
  CHECK(inner == 32);
}

TEST_CASE("parallel kernels give the same bits when two threads use the pool at once", "[parallel]") {
  // One thread gets the pool, the other runs its pieces inline: the pieces, and so the bits, are the same.
  const Tensor x = Tensor::randn({64, 1024}, DType::f32, 3);
  const auto work = [&x] {
    return ops::sum(ops::layer_norm(ops::relu(x * 1.5 + 0.25), Tensor(), Tensor(), {-1}, 1e-3), {0})
        .to_vector<float>();
  };
  const std::vector<float> alone = work();
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat) results[t] = work();
    });
  for (auto& t : threads) t.join();
  for (const auto& r : results) REQUIRE(r == alone);
}
