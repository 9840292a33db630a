#include "framework/runtime/bf16_matmul.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "framework/runtime/detail/gemm.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/tensor/error.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom {

namespace {

enum Engine : int { kOneDnn = 0, kFloat32 = 1 };
constexpr const char* kNames[] = {"onednn", "float32"};

/// Whether the CPU (as oneDNN sees it) has at least `level`; the ISA values are nested bit sets.
bool cpu_has(dnnl::cpu_isa level) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(level)) == static_cast<unsigned>(level);
}

/// bf16 dot products in hardware: AVX512_BF16 (AMX's level contains it).
bool cpu_has_bf16_dot_products() { return cpu_has(dnnl::cpu_isa::avx512_core_bf16); }
/// oneDNN multiplies bf16 from AVX-512 on (emulating the dot products where the CPU lacks them).
bool onednn_available() { return cpu_has(dnnl::cpu_isa::avx512_core); }

int parse(const std::string& name, const char* where) {
  for (int engine = kOneDnn; engine <= kFloat32; ++engine)
    if (name == kNames[engine]) {
      check(engine != kOneDnn || onednn_available(),
            "{}: oneDNN multiplies bf16 only on CPUs with AVX-512, which this one lacks; use float32", where);
      return engine;
    }
  throw Error(fmt::format("{}: unknown bf16 matmul engine '{}'; expected onednn or float32", where, name));
}

int initial_engine() {
  const char* forced = std::getenv("LOOM_BF16_MATMUL");
  if (forced != nullptr && *forced != '\0') return parse(forced, "LOOM_BF16_MATMUL");
  return cpu_has_bf16_dot_products() ? kOneDnn : kFloat32;
}

std::atomic<int>& engine() {
  static std::atomic<int> current{initial_engine()};
  return current;
}

// ---- oneDNN ----

/// oneDNN runs each block on the thread that calls it: loom's pool already gives every core a block. Debian's
/// oneDNN threads with OpenMP, whose team size is a per-thread setting; it is set to 1 once per calling thread
/// (found at run time: libgomp comes with libdnnl).
void run_onednn_on_this_thread_only() {
  thread_local const bool done = [] {
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) set(1);
    return true;
  }();
  (void)done;
}

/// One block's product: its layouts and whether it accumulates onto C.
using BlockKey = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, bool>;

/// A block's oneDNN product, the layouts of its operands and of its scratchpad.
struct BlockProduct {
  dnnl::matmul product;
  dnnl::memory::desc a, b, c, scratchpad;
};

/// oneDNN matmul primitives by block, made once each (a primitive's creation costs far more than a small
/// product). Bounded: a process that multiplies many shapes starts the cache afresh when it is full.
class Primitives {
 public:
  BlockProduct get(const BlockKey& key) {
    const std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    if (cache_.size() >= kCapacity) cache_.clear();
    return cache_.emplace(key, make(key)).first->second;
  }
  const dnnl::engine& cpu() const { return engine_; }

 private:
  static constexpr std::size_t kCapacity = 1024;

  BlockProduct make(const BlockKey& key) const {
    const auto [transpose_a, transpose_b, m, n, k, lda, ldb, ldc, accumulate] = key;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc a({m, k}, dt::bf16, transpose_a ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
    const dnnl::memory::desc b({k, n}, dt::bf16, transpose_b ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
    const dnnl::memory::desc c({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    // Blocks of one product run at once on the pool's threads, and Debian's oneDNN shares one library-owned
    // scratchpad between concurrent executions (DNNL_ENABLE_CONCURRENT_EXEC is off): each execution gets its
    // own (thread_scratchpad below).
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      attr.set_post_ops(sum);
    }
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine_);
      return {dnnl::matmul(pd), a, b, c, pd.scratchpad_desc()};
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("matmul: oneDNN has no bf16 product of {} x {} by {} x {} on this CPU ({}); use "
                              "LOOM_BF16_MATMUL=float32", m, k, k, n, e.what()));
    }
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  std::mutex mutex_;
  std::map<BlockKey, BlockProduct> cache_;
};

Primitives& primitives() {
  static auto* cache = new Primitives;
  return *cache;
}

/// This thread's scratchpad for oneDNN, at least `bytes` long (grown as needed, kept for the next product).
void* thread_scratchpad(std::size_t bytes) {
  thread_local std::vector<std::byte> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

void gemm_onednn(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 const bfloat16* a, std::int64_t lda, const bfloat16* b, std::int64_t ldb, bool accumulate, float* c,
                 std::int64_t ldc) {
  blas::for_each_block(m, n, k, [&](std::int64_t row, std::int64_t rows, std::int64_t col, std::int64_t cols) {
    run_onednn_on_this_thread_only();
    Primitives& cache = primitives();
    const BlockProduct p = cache.get({transpose_a, transpose_b, rows, cols, k, lda, ldb, ldc, accumulate});
    // oneDNN reads through non-const pointers but does not write its sources.
    dnnl::memory a_block(p.a, cache.cpu(), const_cast<bfloat16*>(a + row * (transpose_a ? 1 : lda)));
    dnnl::memory b_block(p.b, cache.cpu(), const_cast<bfloat16*>(b + col * (transpose_b ? ldb : 1)));
    dnnl::memory c_block(p.c, cache.cpu(), c + row * ldc + col);
    dnnl::memory scratchpad(p.scratchpad, cache.cpu(), thread_scratchpad(p.scratchpad.get_size()));
    dnnl::stream stream(cache.cpu());
    p.product.execute(stream, {{DNNL_ARG_SRC, a_block}, {DNNL_ARG_WEIGHTS, b_block}, {DNNL_ARG_DST, c_block},
                               {DNNL_ARG_SCRATCHPAD, scratchpad}});
    stream.wait();
  });
}

}  // namespace

std::string bf16_matmul_engine() { return kNames[engine().load()]; }

std::vector<std::string> available_bf16_matmul_engines() {
  if (cpu_has_bf16_dot_products()) return {"onednn", "float32"};
  if (onednn_available()) return {"float32", "onednn"};
  return {"float32"};
}

void set_bf16_matmul_engine(const std::string& name) { engine().store(parse(name, "set_bf16_matmul_engine")); }

namespace blas {

void gemm_bf16(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
               const bfloat16* a, std::int64_t lda, const bfloat16* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
  check(beta == 0.0f || beta == 1.0f, "blas::gemm_bf16: beta must be 0 or 1, got {}", beta);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0.0f)
      for (std::int64_t r = 0; r < m; ++r) std::fill_n(c + r * ldc, n, 0.0f);
    return;
  }
  gemm_onednn(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, beta != 0.0f, c, ldc);
}

}  // namespace blas

}  // namespace loom
