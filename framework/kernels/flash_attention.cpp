#include "framework/kernels/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/flash_attention_kernels.hpp"
#include "framework/ops/elementwise.hpp"
#include "framework/ops/shape.hpp"
#include "framework/runtime/bf16_matmul.hpp"
#include "framework/runtime/cpu_features.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/runtime/simd.hpp"
#include "framework/tensor/bfloat16.hpp"

namespace loom::ops::flash_attention {

namespace {

using loom::flash::Bf16Bits;
using loom::flash::kBlockQ;

const loom::flash::KernelTable& table() {
#if LOOM_X86_64_KERNELS  // the per-ISA units are built on x86-64 only; elsewhere simd selects scalar
  const std::string isa = simd::active_isa();
  if (isa == "avx512") return loom::flash::avx512_kernels;
  if (isa == "avx2") return loom::flash::avx2_kernels;
#endif
  return loom::flash::scalar_kernels;
}

template <class T>
const loom::flash::Kernels<T>& kernels() {
  if constexpr (std::is_same_v<T, float>) return table().f32;
  else return table().f64;
}

/// Whether bf16 inputs' score products run on vdpbf16ps: on the avx512 level of a CPU with AVX512_BF16, while
/// the bf16 products use the CPU's bf16 units (bf16_matmul_engine() "onednn"); else the float32 kernels run on
/// the inputs widened.
bool bf16_dot_products() {
#if LOOM_X86_64_KERNELS
  return simd::active_isa() == "avx512" && cpu_features().avx512_bf16 && bf16_matmul_engine() == "onednn";
#else
  return false;
#endif
}

std::int64_t cores() { return parallel::thread_count(); }

/// Threads for `flops` of work: one core's worth per ~0.5 MFLOP (waking a pool worker costs microseconds).
/// The kernels call no BLAS, so the workers never fan out into OpenBLAS's own pool.
int thread_count(std::int64_t items, double flops) {
  return int(std::max<std::int64_t>(1, std::min({cores(), items, std::int64_t(flops / 5e5) + 1})));
}

/// Per-worker scratch, left uninitialised (the kernels write before they read; untouched pages cost no memory).
/// Each buffer starts on a cache line: every tile row is whole vectors, so a vector load then touches one
/// line, not two (malloc's blocks are only 16-byte aligned).
template <class T>
struct Scratch {
  static constexpr std::uintptr_t kLine = 64;
  std::vector<std::unique_ptr<T[]>> buffers;  // each a line longer than asked, for the alignment
  Scratch(std::int64_t workers, std::int64_t size) {
    for (std::int64_t w = 0; w < workers; ++w) buffers.emplace_back(new T[std::size_t(size) + kLine / sizeof(T)]);
  }
  T* operator[](std::int64_t w) const {
    const auto address = reinterpret_cast<std::uintptr_t>(buffers[std::size_t(w)].get());
    return reinterpret_cast<T*>((address + kLine - 1) / kLine * kLine);
  }
};

/// What forward and backward share: contiguous inputs, the mask as bytes with broadcast strides.
struct Prepared {
  Tensor q, k, v, mask;
  std::int64_t mask_strides[4] = {0, 0, 0, 0};
  AttentionOptions options;
};

Prepared prepare(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  NoGradGuard no_grad;  // the copies are internal; the op records itself on the original inputs
  Prepared p{q.contiguous(), k.contiguous(), v.contiguous(), Tensor(), {}, o};
  if (o.mask.defined()) {
    Shape shape(std::size_t(4 - o.mask.ndim()), 1);
    shape.insert(shape.end(), o.mask.shape().begin(), o.mask.shape().end());
    p.mask = ops::cast(o.mask, DType::boolean).reshape(shape).contiguous();
    std::int64_t stride = 1;
    for (int axis = 3; axis >= 0; --axis) {
      p.mask_strides[axis] = shape[std::size_t(axis)] == 1 ? 0 : stride;
      stride *= shape[std::size_t(axis)];
    }
  }
  p.options.mask = Tensor();  // held as p.mask
  return p;
}

/// How one call's kernels read the inputs: T's kernels on q, k, v as they are (bf16 ones widened to float32
/// for the length of the call), or, for bf16 inputs when bf16_dot_products(), avx512_bf16_kernels on the bf16
/// values themselves (`pairs`). The tape keeps the bf16 inputs either way.
struct Inputs {
  Tensor q, k, v;
  DType dtype;  // what the kernels compute in, and the dtype of outputs and gradients: float32 for bf16
  bool pairs = false;
  explicit Inputs(const Prepared& p)
      : q(p.q), k(p.k), v(p.v), dtype(compute_dtype(p.q.dtype())) {
    if (p.q.dtype() != DType::bf16) return;
    pairs = bf16_dot_products();
    if (pairs) return;
    NoGradGuard no_grad;
    q = ops::cast(p.q, DType::f32);
    k = ops::cast(p.k, DType::f32);
    v = ops::cast(p.v, DType::f32);
  }
};

template <class T>
loom::flash::Problem<T> problem(const Prepared& p, const Inputs& in) {
  const AttentionOptions& o = p.options;
  const std::int64_t d = p.q.size(3);
  loom::flash::Problem<T> pr{};
  if (in.pairs) {
    pr.q_bf16 = reinterpret_cast<const Bf16Bits*>(in.q.data<bfloat16>());
    pr.k_bf16 = reinterpret_cast<const Bf16Bits*>(in.k.data<bfloat16>());
    pr.v_bf16 = reinterpret_cast<const Bf16Bits*>(in.v.data<bfloat16>());
  } else {
    pr.q = in.q.data<T>();
    pr.k = in.k.data<T>();
    pr.v = in.v.data<T>();
  }
  pr.heads = p.q.size(1);
  // attention.cpp has checked that the key/value heads divide the query heads (none only when neither has any).
  pr.heads_per_kv = p.k.size(1) > 0 ? p.q.size(1) / p.k.size(1) : 1;
  pr.nq = p.q.size(2);
  pr.nk = p.k.size(2);
  pr.d = d;
  pr.dv = p.v.size(3);
  pr.scale = T(o.scale.value_or(1.0 / std::sqrt(double(d))));
  pr.causal = o.causal;
  // A window of max(nq, nk) already reaches every key: larger ones are clamped so the band arithmetic cannot wrap.
  pr.window = std::min<std::int64_t>(o.sliding_window, std::max(pr.nq, pr.nk));
  if (p.mask.defined()) {
    pr.mask = reinterpret_cast<const std::uint8_t*>(p.mask.data<bool>());
    pr.mask_b = p.mask_strides[0];
    pr.mask_h = p.mask_strides[1];
    pr.mask_i = p.mask_strides[2];
    pr.mask_j = p.mask_strides[3];
  }
  return pr;
}

template <class T>
const loom::flash::Kernels<T>& kernels_for(const Inputs& in) {
#if LOOM_X86_64_KERNELS
  if constexpr (std::is_same_v<T, float>)
    if (in.pairs) return loom::flash::avx512_bf16_kernels;
#endif
  return kernels<T>();
}

std::int64_t query_blocks(std::int64_t nq) { return (nq + kBlockQ - 1) / kBlockQ; }

struct Forward {
  Tensor output, lse;
};

Forward run_forward(const Prepared& p) {
  const std::int64_t bh = p.q.size(0) * p.q.size(1), nq = p.q.size(2), nk = p.k.size(2);
  const std::int64_t d = p.q.size(3), dv = p.v.size(3);
  const Inputs in(p);
  const DType dtype = in.dtype;
  Forward f{Tensor::empty({p.q.size(0), p.q.size(1), nq, dv}, dtype), Tensor::empty({p.q.size(0), p.q.size(1), nq}, dtype)};
  visit_floating(dtype, "scaled_dot_product_attention", [&]<class T>() {
    loom::flash::Problem<T> pr = problem<T>(p, in);
    pr.o = f.output.data<T>();
    pr.lse = f.lse.data<T>();
    const auto& kern = kernels_for<T>(in);
    // Groups of query blocks share key/value tiles, as long as that leaves >= 8 items per core to balance.
    pr.group = loom::flash::kMaxGroup;
    while (pr.group > 1 && bh * ((query_blocks(nq) + pr.group - 1) / pr.group) < 8 * cores()) pr.group /= 2;
    const std::int64_t groups = (query_blocks(nq) + pr.group - 1) / pr.group, items = bh * groups;
    const int threads = thread_count(items, 4.0 * double(bh) * double(nq) * double(nk) * double(d + dv) / 2);
    const Scratch<T> scratch(threads, loom::flash::forward_scratch(nk, d, dv));
    // Later query groups first: under a causal mask they cost the most, so the last items claimed are cheap.
    parallel::run(items, threads, [&](int worker, std::int64_t item) {
      kern.forward_block(pr, scratch[worker], item / groups, groups - 1 - item % groups);
    });
  });
  return f;
}

std::vector<Tensor> run_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Prepared& p, const Forward& f) {
  const std::int64_t bh = p.q.size(0) * p.q.size(1), nq = p.q.size(2), nk = p.k.size(2);
  const std::int64_t kv_bh = p.k.size(0) * p.k.size(1), d = p.q.size(3), dv = p.v.size(3);
  Tensor dout;
  {
    NoGradGuard no_grad;
    dout = grad.contiguous();
  }
  // bf16 inputs get float32 gradients, as the tape carries them (tape.hpp).
  const Inputs in(p);
  const DType dtype = in.dtype;
  std::vector<Tensor> grads{Tensor::empty(p.q.shape(), dtype), Tensor::empty(p.k.shape(), dtype),
                            Tensor::empty(p.v.shape(), dtype)};
  visit_floating(dtype, "scaled_dot_product_attention", [&]<class T>() {
    loom::flash::Problem<T> pr = problem<T>(p, in);
    pr.o = f.output.data<T>();
    pr.lse = f.lse.data<T>();
    pr.dout = dout.data<T>();
    const auto& kern = kernels_for<T>(in);
    const std::int64_t share = pr.heads_per_kv;
    // Items are (key/value head, key chunk, part of its query heads): the dK and dV rows of a chunk belong to
    // one item per part, which adds its query heads' shares in turn, so nothing is locked. With few items for
    // the cores, each head's key blocks are cut in two chunks of equal cost (under causal the first keys are
    // seen by the most queries), each writing its own dq buffer; and a group's query heads are cut in parts,
    // each part after the first writing its own dK and dV buffers (at most heads_per_kv - 1 of them: never
    // more than repeating K and V would take). The extra buffers are summed at the end.
    const std::int64_t key_blocks = (nk + loom::flash::kBlockK - 1) / loom::flash::kBlockK;
    const std::int64_t wanted = 4 * cores();
    const std::int64_t chunks = kv_bh >= wanted || key_blocks < 2 ? 1 : 2;
    const std::int64_t parts =
        kv_bh == 0 ? 1 : std::clamp<std::int64_t>((wanted + kv_bh * chunks - 1) / (kv_bh * chunks), 1, share);
    auto cost = [&](std::int64_t j) {  // under causal, key block j is seen by about nq - j*kBlockK queries
      return p.options.causal ? double(std::max<std::int64_t>(1, nq - j * loom::flash::kBlockK)) : 1.0;
    };
    double total = 0, running = 0;
    for (std::int64_t j = 0; j < key_blocks; ++j) total += cost(j);
    std::int64_t split = 0;
    while (split + 1 < key_blocks && running + cost(split) <= total / 2) running += cost(split++);
    const std::int64_t bounds[3] = {0, chunks == 1 ? key_blocks : std::max<std::int64_t>(1, split), key_blocks};
    T* dq = grads[0].data<T>();
    std::vector<T> second(chunks == 2 ? std::size_t(bh * nq * d) : 0);
    const std::int64_t dk_size = kv_bh * nk * d, dv_size = kv_bh * nk * dv;
    std::vector<T> part_dk(std::size_t((parts - 1) * dk_size)), part_dv(std::size_t((parts - 1) * dv_size));
    const int threads = thread_count(kv_bh * chunks * parts, 10.0 * double(bh) * double(nq) * double(nk) * double(d + dv) / 2);
    const Scratch<T> scratch(threads, loom::flash::backward_scratch(nq, nk, d, dv, in.pairs));
    parallel::run(kv_bh * chunks * parts, threads, [&](int worker, std::int64_t item) {
      const std::int64_t kv = item / (chunks * parts), chunk = item / parts % chunks, part = item % parts;
      T* dk = (part == 0 ? grads[1].data<T>() : part_dk.data() + (part - 1) * dk_size) + kv * nk * d;
      T* dvv = (part == 0 ? grads[2].data<T>() : part_dv.data() + (part - 1) * dv_size) + kv * nk * dv;
      for (std::int64_t r = part * share / parts; r < (part + 1) * share / parts; ++r) {
        const std::int64_t head = kv * share + r;
        T* out = (chunk == 0 ? dq : second.data()) + head * nq * d;
        kern.backward_head(pr, scratch[worker], head, bounds[chunk], bounds[chunk + 1], out, dk, dvv,
                           r > part * share / parts);
      }
    });
    for (std::size_t n = 0; n < second.size(); ++n) dq[n] += second[n];
    T* dk = grads[1].data<T>();
    T* dvv = grads[2].data<T>();
    for (std::size_t n = 0; n < part_dk.size(); ++n) dk[std::int64_t(n) % dk_size] += part_dk[n];
    for (std::size_t n = 0; n < part_dv.size(); ++n) dvv[std::int64_t(n) % dv_size] += part_dv[n];
  });
  if (autograd::needs_recording({&grad, &q, &k, &v}))
    autograd::record("flash_attention_backward", {grad, q, k, v}, grads,
                     [](const std::vector<Tensor>&) -> std::vector<Tensor> {
                       throw Error(
                           "flash_attention_backward: the flash attention kernel is first-order only and cannot be "
                           "differentiated again (nested tapes); use AttentionImpl::Math for higher-order gradients");
                     });
  return grads;
}

Tensor run_probabilities(const Prepared& p, const Forward& f) {
  const std::int64_t bh = p.q.size(0) * p.q.size(1), nq = p.q.size(2), nk = p.k.size(2), d = p.q.size(3);
  const Inputs in(p);
  Tensor out = Tensor::zeros({p.q.size(0), p.q.size(1), nq, nk}, in.dtype);  // zero outside the band
  visit_floating(in.dtype, "attention_probabilities", [&]<class T>() {
    loom::flash::Problem<T> pr = problem<T>(p, in);
    pr.lse = f.lse.data<T>();
    pr.p = out.data<T>();
    const auto& kern = kernels_for<T>(in);
    const std::int64_t blocks = query_blocks(nq), items = bh * blocks;
    const int threads = thread_count(items, 2.0 * double(bh) * double(nq) * double(nk) * double(d));
    const Scratch<T> scratch(threads, loom::flash::forward_scratch(nk, d, p.v.size(3)));
    parallel::run(items, threads, [&](int worker, std::int64_t item) {
      kern.probabilities_block(pr, scratch[worker], item / blocks, item % blocks);
    });
  });
  return out;
}

}  // namespace

namespace {

/// The forward kernel, recorded on the tape with the fused backward: with S = scale * Q K^T (masked),
/// P = softmax(S), O = P V and D = rowsum(dO * O): dV = P^T dO, dS = P * (dO V^T - D), dQ = scale * dS K,
/// dK = scale * dS^T Q (P recomputed block by block from the saved log-sum-exp).
std::pair<std::shared_ptr<const Prepared>, Forward> recorded_forward(const Tensor& q_in, const Tensor& k_in,
                                                                      const Tensor& v_in, const AttentionOptions& o) {
  // Strided inputs (heads-first views of the projections) are made contiguous by the recorded op, so that the
  // node keeps the copies the kernels read and not the callers' views, whose buffers can then be freed.
  const Tensor q = ops::contiguous(q_in), k = ops::contiguous(k_in), v = ops::contiguous(v_in);
  auto prepared = std::make_shared<const Prepared>(prepare(q, k, v, o));
  Forward f = run_forward(*prepared);
  if (autograd::needs_recording({&q, &k, &v}))
    autograd::record("flash_attention", {q, k, v}, {f.output}, [q, k, v, prepared, f](const std::vector<Tensor>& g) {
      return run_backward(g[0], q, k, v, *prepared, f);
    });
  return {prepared, f};
}

}  // namespace

Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  return recorded_forward(q, k, v, options).second.output;
}

AttentionOutputs forward_with_probabilities(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionOptions& options) {
  const auto [prepared, f] = recorded_forward(q, k, v, options);
  return {f.output, run_probabilities(*prepared, f)};
}

bool preferred(std::int64_t nq, std::int64_t nk, std::int64_t d, std::int64_t dv) {
  // Measured (bench_attention, 8 heads, d = 64, AVX-512, 2 threads): flash and math break even near
  // Nq = Nk = 64; below that one BLAS call per product beats the tiles' packing and dispatch.
  return d <= 256 && dv <= 256 && double(nq) * double(nk) >= 64.0 * 64.0;
}

}  // namespace loom::ops::flash_attention
