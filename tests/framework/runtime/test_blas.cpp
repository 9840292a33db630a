#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "framework/runtime/blas.hpp"
#include "framework/runtime/cpu_features.hpp"
#include "framework/runtime/detail/gemm.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/tensor/error.hpp"

using namespace loom;

namespace {

/// The core loom should pick on this CPU ("" when it leaves the choice to OpenBLAS), as openblas_get_corename
/// spells it.
std::string expected_core() {
  if (cpu_features().has_avx512()) return "SkylakeX";
  if (cpu_features().has_avx2_fma()) return "Haswell";
  return "";
}

/// OPENBLAS_CORETYPE only acts before OpenBLAS initialises, once per process, so these checks run this test
/// binary again as a child with a chosen environment and one hidden test case. Returns the exit status and
/// appends the child's output to `output`.
int run_child(const std::string& env_arguments, const std::string& tag, std::string& output) {
  std::vector<char> self(4096, '\0');
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  REQUIRE(length > 0);
  const std::string command =
      "env " + env_arguments + " '" + std::string(self.data(), std::size_t(length)) + "' '" + tag + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

template <class T>
std::vector<T> naive_gemm(bool ta, bool tb, int m, int n, int k, T alpha, const std::vector<T>& a, int lda,
                          const std::vector<T>& b, int ldb, T beta, std::vector<T> c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      T sum = 0;
      for (int p = 0; p < k; ++p)
        sum += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * sum + beta * c[i * ldc + j];
    }
  return c;
}

}  // namespace

TEST_CASE("blas_info reports the loaded OpenBLAS", "[blas]") {
  const BlasInfo info = blas_info();
  CHECK(!info.core.empty());
  CHECK(!info.library.empty());
  CHECK(info.threads >= 1);
  CHECK_THAT(info.config, Catch::Contains("OpenBLAS"));
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && !expected_core().empty()) {
    CHECK(info.core_chosen_by_loom);
    CHECK(info.core == expected_core());
  }
  // The variable loom sets for OpenBLAS is removed again once the library is loaded.
  if (info.core_chosen_by_loom) CHECK(std::getenv("OPENBLAS_CORETYPE") == nullptr);
}

TEST_CASE("loom picks the OpenBLAS core from CPUID when the user did not", "[blas]") {
  std::string output;
  CHECK(run_child("-u OPENBLAS_CORETYPE", "[blas_child_default]", output) == 0);
  INFO(output);
  CHECK_THAT(output, Catch::Contains("All tests passed"));
}

TEST_CASE("a user's OPENBLAS_CORETYPE is respected", "[blas]") {
  std::string output;
  CHECK(run_child("OPENBLAS_CORETYPE=Haswell", "[blas_child_user_core]", output) == 0);
  INFO(output);
  CHECK_THAT(output, Catch::Contains("All tests passed"));
}

TEST_CASE("OpenBLAS starts no threads of its own, and its default count becomes loom's split", "[blas]") {
  std::string output;
  CHECK(run_child("-u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u OMP_NUM_THREADS", "[blas_child_threads]",
                  output) == 0);
  CHECK(run_child("-u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS OMP_NUM_THREADS=1", "[blas_child_user_threads]",
                  output) == 0);
  INFO(output);
  CHECK(output.find("All tests passed") != output.rfind("All tests passed"));  // both children
}

TEST_CASE("a missing OpenBLAS library is a clear error", "[blas]") {
  std::string output;
  // The child starts from loom's default (no OPENBLAS_CORETYPE), whatever the user's environment holds.
  CHECK(run_child("-u OPENBLAS_CORETYPE LOOM_OPENBLAS=/nonexistent/libopenblas.so.0", "[blas_child_missing]", output) ==
        0);
  INFO(output);
  CHECK_THAT(output, Catch::Contains("All tests passed"));
}

// ---- the child processes' checks (hidden: they run only when named) ----

TEST_CASE("child: default core", "[.][blas_child_default]") {
  const BlasInfo info = blas_info();
  INFO("core " << info.core << ", library " << info.library);
  if (!expected_core().empty()) {
    CHECK(info.core_chosen_by_loom);
    CHECK(info.core == expected_core());
  } else {
    CHECK(!info.core_chosen_by_loom);
  }
  CHECK(std::getenv("OPENBLAS_CORETYPE") == nullptr);
}

TEST_CASE("child: user core", "[.][blas_child_user_core]") {
  const BlasInfo info = blas_info();
  CHECK(info.core == "Haswell");
  CHECK(!info.core_chosen_by_loom);
  CHECK(std::string(std::getenv("OPENBLAS_CORETYPE")) == "Haswell");
}

/// The threads of this process, from /proc/self/status.
int process_threads() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  REQUIRE(status != nullptr);
  char line[256];
  int threads = -1;
  while (std::fgets(line, sizeof line, status) != nullptr)
    if (std::sscanf(line, "Threads: %d", &threads) == 1) break;
  std::fclose(status);
  return threads;
}

TEST_CASE("child: OpenBLAS's threads", "[.][blas_child_threads]") {
  const int before = (parallel::thread_count(), process_threads());  // loom's pool exists first
  const BlasInfo info = blas_info();
  // Loaded with its default count, OpenBLAS would start a thread per core, spinning before they sleep.
  CHECK(process_threads() == before);
  CHECK(info.threads == parallel::thread_count());
  CHECK(std::getenv("OPENBLAS_NUM_THREADS") == nullptr);  // loom's setting for the load is gone again
}

TEST_CASE("child: the user's thread count", "[.][blas_child_user_threads]") {
  const BlasInfo info = blas_info();
  CHECK(info.threads == 1);
  CHECK(std::getenv("OPENBLAS_NUM_THREADS") == nullptr);
  CHECK(std::string(std::getenv("OMP_NUM_THREADS")) == "1");
}

TEST_CASE("child: missing library", "[.][blas_child_missing]") {
  REQUIRE_THROWS_WITH(blas_info(), Catch::Contains("cannot load OpenBLAS") &&
                                       Catch::Contains("/nonexistent/libopenblas.so.0"));
  // A failed load is not cached as success: the next call reports the same error.
  REQUIRE_THROWS_AS(blas_info(), Error);
  // loom's choice of core is not left behind in the environment either.
  CHECK(std::getenv("OPENBLAS_CORETYPE") == nullptr);
}

// ---- gemm ----

TEMPLATE_TEST_CASE("blas::gemm matches a naive product for every transpose and padded strides", "[blas]", float,
                   double) {
  const int m = 5, n = 7, k = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // leading dimensions padded by 2 so that the strides, not the sizes, decide where rows start
      const int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 2, ldc = n + 2;
      std::vector<TestType> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = TestType(int(i % 7) - 3) / 4;
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = TestType(int(i % 5) - 2) / 2;
      for (std::size_t i = 0; i < c.size(); ++i) c[i] = TestType(int(i % 3));
      const auto expected = naive_gemm<TestType>(ta, tb, m, n, k, 1.5, a, lda, b, ldb, 0.5, c, ldc);
      blas::gemm<TestType>(ta, tb, m, n, k, 1.5, a.data(), lda, b.data(), ldb, 0.5, c.data(), ldc);
      for (std::size_t i = 0; i < c.size(); ++i) CHECK(c[i] == Approx(expected[i]).margin(1e-6));
    }
}

TEMPLATE_TEST_CASE("blas::gemm split over threads is correct and the same bits every time", "[blas]", float,
                   double) {
  // Large enough to be cut into per-thread blocks: rows (m >= n) and columns (n > m), at sizes no block of 16
  // divides, with padded leading dimensions (the padding of C must stay untouched) and beta != 0 (each block
  // must read only its part of C). On one thread the same call is one block: also checked.
  struct Size {
    int m, n, k;
  };
  for (const int threads : {1, 2})
    for (const Size size : {Size{197, 83, 70}, Size{45, 301, 64}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const ScopedBlasThreads scoped(threads);
          const auto [m, n, k] = size;
          const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 5;
          std::vector<TestType> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc);
          for (std::size_t i = 0; i < a.size(); ++i) a[i] = TestType(int(i * 7919 % 201) - 100) / 37;
          for (std::size_t i = 0; i < b.size(); ++i) b[i] = TestType(int(i * 104729 % 151) - 75) / 29;
          for (std::size_t i = 0; i < c.size(); ++i) c[i] = TestType(int(i % 11) - 5);
          std::vector<TestType> first = c, second = c;
          blas::gemm<TestType>(ta, tb, m, n, k, 0.75, a.data(), lda, b.data(), ldb, 0.5, first.data(), ldc);
          blas::gemm<TestType>(ta, tb, m, n, k, 0.75, a.data(), lda, b.data(), ldb, 0.5, second.data(), ldc);
          INFO("threads=" << threads << " m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb);
          CHECK(first == second);
          const auto expected = naive_gemm<TestType>(ta, tb, m, n, k, 0.75, a, lda, b, ldb, 0.5, c, ldc);
          for (std::size_t i = 0; i < c.size(); ++i)
            REQUIRE(first[i] == Approx(expected[i]).epsilon(1e-4).margin(1e-3));
        }
}

TEST_CASE("blas::gemm rejects leading dimensions that are too small", "[blas]") {
  std::vector<float> a(6), b(6), c(4);
  REQUIRE_THROWS_WITH(blas::gemm<float>(false, false, 2, 2, 3, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2),
                      Catch::Contains("blas::gemm") && Catch::Contains("lda=2 (needs >= 3)"));
  REQUIRE_THROWS_WITH(blas::gemm<float>(false, false, -1, 2, 3, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2),
                      Catch::Contains("blas::gemm") && Catch::Contains("m = -1"));
}

TEST_CASE("the gemm thread count can be set and scoped", "[blas]") {
  const int before = blas_info().threads;
  {
    const ScopedBlasThreads one(1);
    CHECK(blas_info().threads == 1);
  }
  CHECK(blas_info().threads == before);
  REQUIRE_THROWS_WITH(set_blas_threads(0), Catch::Contains("set_blas_threads") && Catch::Contains("got 0"));
}

TEST_CASE("blas::symbol resolves OpenBLAS functions and rejects unknown ones", "[blas]") {
  CHECK(blas::symbol("cblas_sgemm") != nullptr);
  REQUIRE_THROWS_WITH(blas::symbol("no_such_blas_function"),
                      Catch::Contains("no symbol") && Catch::Contains("no_such_blas_function"));
}
