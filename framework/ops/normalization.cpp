#include "framework/ops/normalization.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/detail/input_checks.hpp"
#include "framework/ops/elementwise.hpp"
#include "framework/ops/shape.hpp"
#include "framework/runtime/detail/parallel.hpp"

// The kernels are plain loops over a strided walk (strided.hpp) rather than xtensor expressions: the point of
// a fused normalization is to take the statistics, the normalization and the backward sums in as few passes
// as possible over a slab that stays in cache, which a chain of evaluated xtensor expressions cannot do.

// The library is built for baseline x86-64 (SSE2). The kernels' loops over the slabs are cloned for AVX2 and
// picked when the library loads (GCC function multiversioning); flatten inlines the walks and loop bodies into
// each clone, so the loops themselves are compiled for the wider vectors. No AVX-512 clone: docs/benchmarks.md.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define LOOM_MULTIVERSION __attribute__((target_clones("avx2", "default"), flatten))
#else
#define LOOM_MULTIVERSION
#endif

namespace loom::ops {

namespace {

/// Every fused normalization is one computation on x viewed (contiguous) as [B, P, G, K, Q]: one statistic
/// per (b, g) over (p, k, q), one affine parameter per (g, k). Layer and RMS norm: [rows, 1, 1, n, 1]; group
/// norm: [batch, dims before the channels, groups, channels per group, dims after]; batch norm:
/// [1, dims before the channels, channels, 1, dims after]. The kernels work one b (one slab) at a time, so a
/// row or a sample is read from cache by every pass after the first (batch norm's one slab is the batch).
struct Geometry {
  std::int64_t B = 1, P = 1, G = 1, K = 1, Q = 1;
  bool center = true;  // subtract the mean; false: RMS normalization (no mean, no beta)
  // LayerNormalization's rms_scaling (with center): the statistics around the mean, but y = x * rstd * gamma
  // (x not centered). The stored statistics stay centered; the output and the sums of the backward pass use
  // x * rstd, while dx uses the centered (x - mean) * rstd, which keeps its precision at large means.
  bool scale_only = false;
  double epsilon = 0.0;
  std::int64_t count() const { return P * K * Q; }  // elements per statistic
  std::int64_t slab() const { return P * G * K * Q; }
  std::int64_t params() const { return G * K; }
  /// Channels-last group norm (Q = 1, several rows P) has runs of only K elements per group. It keeps each
  /// per-group value in one slot per parameter (g, k) instead: its runs then span whole rows of G * K, and
  /// the per-slot sums are folded into per-group ones once per slab (1 / P of a pass). Otherwise one slot
  /// per group.
  std::int64_t slots_per_group() const { return Q == 1 && P > 1 && K > 1 ? K : 1; }
  std::int64_t slots() const { return G * slots_per_group(); }
};

/// The statistics the backward pass needs, one per (b, g), in x's dtype: the shift (a value of the group,
/// its first element), the mean's offset from it, and 1 / sqrt(var + epsilon). Normalizing as
/// ((x - shift) - offset) * rstd keeps every difference small, so float32 keeps its digits at large means.
struct Stats {
  Tensor shift, offset, rstd;
};

/// The walk over one slab: element, slot and parameter positions (strides 1 / 0 along each run).
detail::RunWalk<3> slab_walk(const Geometry& geo) {
  const Shape shape{geo.P, geo.G, geo.K, geo.Q};
  const Strides x = contiguous_strides(shape), param{0, geo.K, 1, 0};
  const Strides slot = geo.slots_per_group() > 1 ? param : Strides{0, 1, 0, 0};
  return detail::RunWalk<3>(shape, {&x, &slot, &param});
}

/// Per-group values copied into each of the group's slots.
template <class T>
void spread(const Geometry& geo, const T* per_group, std::vector<T>& per_slot) {
  const std::int64_t m = geo.slots_per_group();
  for (std::int64_t s = 0; s < geo.slots(); ++s) per_slot[std::size_t(s)] = per_group[s / m];
}

/// The sum of group g's slots.
double fold(const Geometry& geo, const std::vector<double>& per_slot, std::int64_t g) {
  const std::int64_t m = geo.slots_per_group();
  double total = 0.0;
  for (std::int64_t s = g * m; s < (g + 1) * m; ++s) total += per_slot[std::size_t(s)];
  return total;
}

/// Calls run.template operator()<S, P>(x_at, slot_at, param_at, n) for each run of a slab; S (P) says whether
/// the slot (parameter) advances with the element or stays fixed along the run. Bodies index with these
/// compile-time steps, so the compiler vectorizes them (see accumulate for the sums).
template <class Run>
void for_each_run(const detail::RunWalk<3>& walk, Run&& run) {
  walk([&](const auto& pos, const auto& step, std::int64_t n) {
    if (step[1] != 0 && step[2] != 0) run.template operator()<true, true>(pos[0], pos[1], pos[2], n);
    else if (step[1] != 0) run.template operator()<true, false>(pos[0], pos[1], pos[2], n);
    else if (step[2] != 0) run.template operator()<false, true>(pos[0], pos[1], pos[2], n);
    else run.template operator()<false, false>(pos[0], pos[1], pos[2], n);
  });
}

/// Element j of a run over p: p[j] when the index advances along the run, p[0] when it is fixed.
template <bool vary, class V>
V at(const V* p, std::int64_t j) {
  return p[vary ? j : 0];
}

/// A sum kept in registers is split over this many lanes: independent chains of adds that the compiler packs
/// into vectors (it may not reassociate one floating-point sum itself), 16 doubles = two AVX-512 registers.
constexpr std::int64_t kLanes = 16;

/// Adds the M terms of each element j in [0, n) (terms(j) returns std::array<double, M>) into slots[m][j]
/// (advancing index: one slot per element) or into slots[m][0] (fixed index: summed first into kLanes local
/// lanes, block by block, by the same loop as the advancing case, which the compiler vectorizes).
template <bool vary, std::size_t M, class Terms>
void accumulate(const std::array<double*, M>& slots, std::int64_t n, Terms&& terms) {
  if constexpr (vary) {
    for (std::int64_t j = 0; j < n; ++j) {
      const std::array<double, M> t = terms(j);
      for (std::size_t m = 0; m < M; ++m) slots[m][j] += t[m];
    }
  } else {
    std::array<std::array<double, kLanes>, M> lanes{};
    std::array<double*, M> lane_slots;
    for (std::size_t m = 0; m < M; ++m) lane_slots[m] = lanes[m].data();
    for (std::int64_t j = 0; j < n; j += kLanes)
      accumulate<true, M>(lane_slots, std::min(kLanes, n - j), [&](std::int64_t lane) { return terms(j + lane); });
    for (std::size_t m = 0; m < M; ++m) {
      double total = 0.0;
      for (double l : lanes[m]) total += l;
      slots[m][0] += total;
    }
  }
}

/// Slabs per piece of parallel work: enough for some 16K elements, a few microseconds of work.
std::int64_t slabs_per_piece(const Geometry& geo) { return std::max<std::int64_t>(1, 16384 / geo.slab()); }

/// The values of an optional affine parameter, or `fill` where it is undefined.
template <class T>
std::vector<T> param_or(const Tensor& p, std::int64_t n, T fill) {
  return p.defined() ? p.to_vector<T>() : std::vector<T>(std::size_t(n), fill);
}

/// x as one contiguous buffer; a strided view is copied without recording (the kernels only read it).
Tensor dense(const Tensor& x) {
  if (x.is_contiguous()) return x;
  NoGradGuard no_grad;
  return x.contiguous();
}

/// The buffers of a forward kernel: x, the affine parameters (filled in where undefined), y, the statistics
/// per (b, g), and the batch mean and variance (null but for batch norm).
template <class T>
struct ForwardBuffers {
  const T *x, *gam, *bet;
  T *out, *shifts, *offsets, *rstds, *means, *variances;
};

/// The forward's loop over slabs [first, last): per slab, the sums around the shift (double), the statistics,
/// then y. On raw buffers, so that only this loop (and what it inlines) is compiled per instruction set.
template <class T>
LOOM_MULTIVERSION void forward_slabs(const Geometry& geo, const detail::RunWalk<3>& walk,
                                     const ForwardBuffers<T>& buffers, std::int64_t first, std::int64_t last) {
  const T *x = buffers.x, *gam = buffers.gam, *bet = buffers.bet;
  T *out = buffers.out, *shifts = buffers.shifts, *offsets = buffers.offsets, *rstds = buffers.rstds;
  T *means = buffers.means, *variances = buffers.variances;
  const double n = double(geo.count());
  const auto slots = std::size_t(geo.slots());
  std::vector<double> s1(slots), s2(slots);
  std::vector<T> shift_slots(slots), offset_slots(slots), rstd_slots(slots);
  for (std::int64_t b = first; b < last; ++b) {
    const T* xs = x + b * geo.slab();
    T* ys = out + b * geo.slab();
    T* shift = shifts + b * geo.G;
    T* offset = offsets + b * geo.G;
    T* rstd = rstds + b * geo.G;
    for (std::int64_t g = 0; g < geo.G; ++g) shift[g] = geo.center ? xs[g * geo.K * geo.Q] : T(0);
    spread(geo, shift, shift_slots);
    std::fill(s1.begin(), s1.end(), 0.0);
    std::fill(s2.begin(), s2.end(), 0.0);
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t, std::int64_t len) {
      const T* xr = xs + xi;
      const auto d = [&](std::int64_t j) { return double(xr[j] - at<S>(shift_slots.data() + si, j)); };
      if (geo.center)  // RMS needs no sum of x
        accumulate<S, 2>({&s1[std::size_t(si)], &s2[std::size_t(si)]}, len, [&](std::int64_t j) {
          const double dj = d(j);
          return std::array<double, 2>{dj, dj * dj};
        });
      else
        accumulate<S, 1>({&s2[std::size_t(si)]}, len,
                         [&](std::int64_t j) { return std::array<double, 1>{d(j) * d(j)}; });
    });
    for (std::int64_t g = 0; g < geo.G; ++g) {
      // Around a shift from the data, E[d^2] - E[d]^2 loses at most a factor `count` of relative precision
      // (|mean - shift|^2 <= count * var), against 1e6^2 / var for the raw moments at a mean of 1e6.
      const double mu = geo.center ? fold(geo, s1, g) / n : 0.0;
      const double var = std::max(fold(geo, s2, g) / n - mu * mu, 0.0);
      offset[g] = T(mu);
      rstd[g] = T(1.0 / std::sqrt(var + geo.epsilon));
      if (means) {
        means[b * geo.G + g] = T(double(shift[g]) + mu);
        variances[b * geo.G + g] = T(var);
      }
    }
    spread(geo, offset, offset_slots);
    spread(geo, rstd, rstd_slots);
    if (geo.scale_only) {  // y = x * rstd * gamma
      std::fill(shift_slots.begin(), shift_slots.end(), T(0));
      std::fill(offset_slots.begin(), offset_slots.end(), T(0));
    }
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t pi, std::int64_t len) {
      const T* xr = xs + xi;
      T* yr = ys + xi;
      const T *sh = shift_slots.data() + si, *of = offset_slots.data() + si, *rs = rstd_slots.data() + si;
      for (std::int64_t j = 0; j < len; ++j)
        yr[j] = (xr[j] - at<S>(sh, j) - at<S>(of, j)) * (at<S>(rs, j) * at<P>(gam + pi, j)) + at<P>(bet + pi, j);
    });
  }
}

/// Forward: y, and fills `stats`, and the batch mean and biased variance when `mean` is given (batch norm).
template <class T>
Tensor forward_kernel(const Tensor& xc, const Tensor& gamma, const Tensor& beta, const Geometry& geo,
                      Stats& stats, Tensor* mean, Tensor* variance) {
  const Shape stat_shape{geo.B * geo.G};
  stats = {Tensor::zeros(stat_shape, xc.dtype()), Tensor::zeros(stat_shape, xc.dtype()),
           Tensor::zeros(stat_shape, xc.dtype())};
  if (mean) {
    *mean = Tensor::zeros(stat_shape, xc.dtype());
    *variance = Tensor::zeros(stat_shape, xc.dtype());
  }
  Tensor y = Tensor::empty(xc.shape(), xc.dtype());  // every element written below
  const std::vector<T> gam = param_or(gamma, geo.params(), T(1)), bet = param_or(beta, geo.params(), T(0));
  const ForwardBuffers<T> buffers{xc.data<T>(),          gam.data(),
                                  bet.data(),            y.data<T>(),
                                  stats.shift.data<T>(), stats.offset.data<T>(),
                                  stats.rstd.data<T>(),  mean ? mean->data<T>() : nullptr,
                                  mean ? variance->data<T>() : nullptr};
  const detail::RunWalk<3> walk = slab_walk(geo);
  parallel::for_ranges(geo.B, slabs_per_piece(geo), [&](std::int64_t first, std::int64_t last) {
    forward_slabs<T>(geo, walk, buffers, first, last);
  });
  return y;
}

struct Grads {
  Tensor dx, dgamma, dbeta;
};

/// The buffers of a backward kernel: dy, x, gamma (filled in where undefined), the statistics, the gradients of
/// the batch mean and variance (null but for batch norm), dx; and whether dbeta is wanted.
template <class T>
struct BackwardBuffers {
  const T *dy, *x, *gam, *shifts, *offsets, *rstds, *dmean, *dvar;
  T* dx;
  bool dbeta;
};

/// The backward's loop over slabs [first, last) (per slab: one pass for the sums, then one for dx), adding
/// the parameters' gradients into dg and db. On raw buffers, like forward_slabs.
template <class T>
LOOM_MULTIVERSION void backward_slabs(const Geometry& geo, const detail::RunWalk<3>& walk,
                                      const BackwardBuffers<T>& buffers, std::int64_t first, std::int64_t last,
                                      std::vector<double>& dg, std::vector<double>& db) {
  const T *dy = buffers.dy, *x = buffers.x, *gam = buffers.gam, *shifts = buffers.shifts;
  const T *offsets = buffers.offsets, *rstds = buffers.rstds, *dmean = buffers.dmean, *dvar = buffers.dvar;
  T* dx = buffers.dx;
  const double n = double(geo.count());
  const auto slots = std::size_t(geo.slots());
  std::vector<double> c1(slots), c2(slots);
  std::vector<T> shift_slots(slots), offset_slots(slots), rstd_slots(slots), shift_coef(slots), xh_coef(slots);
  std::vector<T> shift_coef_g(std::size_t(geo.G)), xh_coef_g(std::size_t(geo.G));
  const std::vector<T> no_shift(geo.scale_only ? slots : 0, T(0));  // scale_only: the sums use x * rstd
  const bool mean_term = geo.center && !geo.scale_only;             // the sums of dxh (c1)
  for (std::int64_t b = first; b < last; ++b) {
    const T* xs = x + b * geo.slab();
    const T* dys = dy + b * geo.slab();
    T* dxs = dx + b * geo.slab();
    const T* rstd = rstds + b * geo.G;
    spread(geo, shifts + b * geo.G, shift_slots);
    spread(geo, offsets + b * geo.G, offset_slots);
    spread(geo, rstd, rstd_slots);
    const T *sh = shift_slots.data(), *of = offset_slots.data(), *rs = rstd_slots.data();
    const T *sum_sh = geo.scale_only ? no_shift.data() : sh, *sum_of = geo.scale_only ? no_shift.data() : of;
    std::fill(c1.begin(), c1.end(), 0.0);
    std::fill(c2.begin(), c2.end(), 0.0);
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t pi, std::int64_t len) {
      const T* xr = xs + xi;
      const T* dyr = dys + xi;
      const auto xh = [&](std::int64_t j) {
        return (xr[j] - at<S>(sum_sh + si, j) - at<S>(sum_of + si, j)) * at<S>(rs + si, j);
      };
      const auto dxh = [&](std::int64_t j) { return double(dyr[j] * at<P>(gam + pi, j)); };
      // Two loops over the run (the second reads it from cache), so that each keeps only its own sums, and
      // only the sums that are used: RMS and rms_scaling have no mean term (c1), an undefined beta no dbeta.
      if (mean_term)
        accumulate<S, 2>({&c1[std::size_t(si)], &c2[std::size_t(si)]}, len, [&](std::int64_t j) {
          const double d = dxh(j);
          return std::array<double, 2>{d, d * double(xh(j))};
        });
      else
        accumulate<S, 1>({&c2[std::size_t(si)]}, len,
                         [&](std::int64_t j) { return std::array<double, 1>{dxh(j) * double(xh(j))}; });
      if (buffers.dbeta)
        accumulate<P, 2>({&dg[std::size_t(pi)], &db[std::size_t(pi)]}, len, [&](std::int64_t j) {
          return std::array<double, 2>{double(dyr[j]) * double(xh(j)), double(dyr[j])};
        });
      else
        accumulate<P, 1>({&dg[std::size_t(pi)]}, len,
                         [&](std::int64_t j) { return std::array<double, 1>{double(dyr[j]) * double(xh(j))}; });
    });
    // dx = rstd * dxh + shift_coef + xh * xh_coef, the coefficients per statistic (then per slot).
    for (std::int64_t g = 0; g < geo.G; ++g) {
      const double r = double(rstd[g]);
      double a = mean_term ? -r * fold(geo, c1, g) / n : 0.0;
      double c = -r * fold(geo, c2, g) / n;
      if (dmean) a += double(dmean[b * geo.G + g]) / n;
      if (dvar) c += 2.0 * double(dvar[b * geo.G + g]) / (n * r);
      shift_coef_g[std::size_t(g)] = T(a);
      xh_coef_g[std::size_t(g)] = T(c);
    }
    spread(geo, shift_coef_g.data(), shift_coef);
    spread(geo, xh_coef_g.data(), xh_coef);
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t pi, std::int64_t len) {
      const T* xr = xs + xi;
      const T* dyr = dys + xi;
      T* dxr = dxs + xi;
      for (std::int64_t j = 0; j < len; ++j) {
        const T r = at<S>(rs + si, j);
        const T xh = (xr[j] - at<S>(sh + si, j) - at<S>(of + si, j)) * r;
        dxr[j] = r * (dyr[j] * at<P>(gam + pi, j)) + at<S>(shift_coef.data() + si, j) +
                 xh * at<S>(xh_coef.data() + si, j);
      }
    });
  }
}

/// Backward, with xh = (x - mean) * rstd and dxh = dy * gamma, per statistic over its n elements:
///   dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh))          (RMS: without the mean(dxh) term)
///      + dmean / n + dvar * 2 (x - mean) / n                      (batch norm's mean / variance outputs)
/// dgamma = sum(dy * xh), dbeta = sum(dy) over everything but the parameter's own index.
/// rms_scaling, with xs = x * rstd: dx = rstd * (dxh - xh * mean(dxh * xs)), dgamma = sum(dy * xs).
template <class T>
Grads backward_kernel(const Tensor& dyc, const Tensor& xc, const Tensor& gamma, const Tensor& beta,
                      const Stats& stats, const Geometry& geo, const Tensor& dmean, const Tensor& dvar) {
  Grads grads{Tensor::empty(xc.shape(), xc.dtype()), {}, {}};  // every element written below
  const std::vector<T> gam = param_or(gamma, geo.params(), T(1));
  const std::vector<T> gm = dmean.defined() ? dmean.to_vector<T>() : std::vector<T>();
  const std::vector<T> gv = dvar.defined() ? dvar.to_vector<T>() : std::vector<T>();
  const BackwardBuffers<T> buffers{dyc.data<T>(),
                                   xc.data<T>(),
                                   gam.data(),
                                   stats.shift.data<T>(),
                                   stats.offset.data<T>(),
                                   stats.rstd.data<T>(),
                                   gm.empty() ? nullptr : gm.data(),
                                   gv.empty() ? nullptr : gv.data(),
                                   grads.dx.data<T>(),
                                   beta.defined()};
  const detail::RunWalk<3> walk = slab_walk(geo);
  // Each piece sums its slabs' parameter gradients apart; the pieces are then added in order, so the result
  // does not depend on which thread ran what.
  const std::int64_t pieces = parallel::piece_count(geo.B, slabs_per_piece(geo));
  const auto zeros = std::vector<double>(std::size_t(geo.params()));
  std::vector<std::vector<double>> dgs(std::size_t(pieces), zeros), dbs(std::size_t(pieces), zeros);
  parallel::for_pieces(geo.B, pieces, [&](std::int64_t piece, std::int64_t first, std::int64_t last) {
    backward_slabs<T>(geo, walk, buffers, first, last, dgs[std::size_t(piece)], dbs[std::size_t(piece)]);
  });
  std::vector<double> dg = zeros, db = zeros;
  for (std::int64_t piece = 0; piece < pieces; ++piece)
    for (std::size_t i = 0; i < zeros.size(); ++i) {
      dg[i] += dgs[std::size_t(piece)][i];
      db[i] += dbs[std::size_t(piece)][i];
    }
  const auto to_tensor = [&](const std::vector<double>& values, const Shape& shape) {
    Tensor t = Tensor::zeros(shape, xc.dtype());
    std::transform(values.begin(), values.end(), t.data<T>(), [](double v) { return T(v); });
    return t;
  };
  if (gamma.defined()) grads.dgamma = to_tensor(dg, gamma.shape());
  if (beta.defined()) grads.dbeta = to_tensor(db, beta.shape());
  return grads;
}

/// The backward op of a fused normalization: runs the kernel, and records itself (as `op`) so that an outer
/// tape sees the dependence of the gradients on dy, x and gamma, with a backward that refuses to go further.
/// g holds the output gradients (batch norm: also those of its mean and variance).
std::vector<Tensor> fused_backward(const char* op, const std::vector<Tensor>& g, const Tensor& x,
                                   const Tensor& xc, const Tensor& gamma, const Tensor& beta, const Stats& stats,
                                   const Geometry& geo) {
  const Tensor dy = dense(g[0]);
  const Tensor dmean = g.size() > 1 ? g[1] : Tensor(), dvar = g.size() > 2 ? g[2] : Tensor();
  const Grads r = visit_floating(x.dtype(), op, [&]<class T>() {
    return backward_kernel<T>(dy, xc, gamma, beta, stats, geo, dmean, dvar);
  });
  std::vector<Tensor> grads{r.dx, r.dgamma, r.dbeta};
  std::vector<Tensor> inputs{g[0], x, gamma};
  inputs.insert(inputs.end(), g.begin() + 1, g.end());
  if (autograd::needs_recording(inputs)) {
    std::vector<Tensor> outputs;
    for (const Tensor& t : grads)
      if (t.defined()) outputs.push_back(t);
    autograd::record(op, inputs, outputs, [op](const std::vector<Tensor>&) -> std::vector<Tensor> {
      throw Error(fmt::format(
          "{}: the fused normalization kernel is first-order only and cannot be differentiated again (nested "
          "tapes); compose the normalization from plain ops (mean, var, rsqrt, mul, add) for higher-order "
          "gradients", op));
    });
  }
  return grads;
}

/// Runs the fused forward kernel and records `op` (backward: `backward_op`). Returns y, and with `moments`
/// also the mean and biased variance per statistic (batch norm), which are differentiable outputs too.
std::vector<Tensor> fused_forward(const char* op, const char* backward_op, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Geometry& geo, bool moments) {
  check(geo.count() > 0, "{}: cannot normalize over zero elements (input {})", op, x.shape());
  const Tensor xc = dense(x);
  Stats stats;
  Tensor mean, variance;
  Tensor y = visit_floating(x.dtype(), op, [&]<class T>() {
    return forward_kernel<T>(xc, gamma, beta, geo, stats, moments ? &mean : nullptr, moments ? &variance : nullptr);
  });
  std::vector<Tensor> outputs{y};
  if (moments) outputs.insert(outputs.end(), {mean, variance});
  if (autograd::needs_recording({&x, &gamma, &beta}))
    autograd::record(op, {x, gamma, beta}, outputs,
                     [backward_op, x, xc, gamma, beta, stats, geo](const std::vector<Tensor>& g) {
                       return fused_backward(backward_op, g, x, xc, gamma, beta, stats, geo);
                     });
  return outputs;
}

void check_input(const char* op, const Tensor& x, double epsilon) {
  check_floating(x, op);
  check(epsilon > 0.0 && std::isfinite(epsilon),
        "{}: epsilon must be positive and finite (it keeps 1 / sqrt(var + epsilon) finite), got {}", op, epsilon);
}

/// An optional per-feature tensor (gamma, beta, mean, ...) must have x's dtype and the expected shape.
void check_param(const char* op, const char* name, const Tensor& p, const Tensor& x, const Shape& expected,
                 const std::string& what) {
  if (!p.defined()) return;
  check(p.dtype() == x.dtype(), "{}: {} must have the input's dtype {}, got {} (shape {})", op, name, x.dtype(),
        p.dtype(), p.shape());
  check(p.shape() == expected, "{}: {} must have shape {} ({}), got {}", op, name, expected, what, p.shape());
}

Tensor layer_or_rms_norm(const char* op, const char* backward_op, const Tensor& x, const Tensor& gamma,
                         const Tensor& beta, const std::vector<std::int64_t>& axes, double epsilon, bool center,
                         bool scale_only = false) {
  check_input(op, x, epsilon);
  check(!axes.empty(), "{}: expected at least one axis to normalize over (input {})", op, x.shape());
  const std::vector<std::int64_t> norm = normalize_axes(axes, x.ndim(), op);
  Shape param_shape;
  for (auto a : norm) param_shape.push_back(x.shape()[std::size_t(a)]);
  const std::string what = fmt::format("the dimensions at axes {} of input {}", norm, x.shape());
  check_param(op, center ? "gamma" : "scale", gamma, x, param_shape, what);
  check_param(op, "beta", beta, x, param_shape, what);
  check(numel(param_shape) > 0, "{}: cannot normalize over zero elements ({})", op, what);

  const auto rank = x.ndim(), k = std::int64_t(norm.size());
  bool trailing = true;
  for (std::int64_t i = 0; i < k; ++i) trailing = trailing && norm[std::size_t(i)] == rank - k + i;
  if (!trailing) {
    // Move the normalized axes to the end (views; the kernel copies once), normalize, and move them back.
    std::vector<std::int64_t> perm, last;
    std::vector<std::int64_t> back(std::size_t(rank), 0);
    for (std::int64_t d = 0; d < rank; ++d)
      if (std::find(norm.begin(), norm.end(), d) == norm.end()) perm.push_back(d);
    perm.insert(perm.end(), norm.begin(), norm.end());
    for (std::int64_t d = 0; d < rank; ++d) back[std::size_t(perm[std::size_t(d)])] = d;
    for (std::int64_t i = rank - k; i < rank; ++i) last.push_back(i);
    return permute(
        layer_or_rms_norm(op, backward_op, permute(x, perm), gamma, beta, last, epsilon, center, scale_only), back);
  }
  Geometry geo;
  geo.K = numel(param_shape);
  geo.B = x.numel() / geo.K;
  geo.center = center;
  geo.scale_only = scale_only;
  geo.epsilon = epsilon;
  return fused_forward(op, backward_op, x, gamma, beta, geo, false)[0];
}

/// Product of the dimensions of shape in [begin, end).
std::int64_t extent(const Shape& shape, std::int64_t begin, std::int64_t end) {
  std::int64_t n = 1;
  for (std::int64_t d = begin; d < end; ++d) n *= shape[std::size_t(d)];
  return n;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Axes& axes,
                  double epsilon, bool rms_scaling) {
  if (graph::any_symbolic(x, gamma, beta))
    return graph::record_op("layer_norm", {x, gamma, beta}, [=](const std::vector<Tensor>& v) {
      return layer_norm(v[0], v[1], v[2], axes, epsilon, rms_scaling);
    });
  check(!rms_scaling || !beta.defined(),
        "layer_norm: rms_scaling takes no beta (y = x / sqrt(var + epsilon) * gamma); got beta of shape {} for "
        "input {}",
        beta.defined() ? beta.shape() : Shape{}, x.defined() ? x.shape() : Shape{});
  return layer_or_rms_norm("layer_norm", "layer_norm_backward", x, gamma, beta, axes, epsilon, true, rms_scaling);
}

Tensor rms_norm(const Tensor& x, const Tensor& scale, const Axes& axes, double epsilon) {
  if (graph::any_symbolic(x, scale))
    return graph::record_op("rms_norm", {x, scale},
                            [=](const std::vector<Tensor>& v) { return rms_norm(v[0], v[1], axes, epsilon); });
  return layer_or_rms_norm("rms_norm", "rms_norm_backward", x, scale, Tensor(), axes, epsilon, false);
}

Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t groups, std::int64_t axis,
                  double epsilon) {
  if (graph::any_symbolic(x, gamma, beta))
    return graph::record_op("group_norm", {x, gamma, beta},
                            [=](const std::vector<Tensor>& v) {
                              return group_norm(v[0], v[1], v[2], groups, axis, epsilon);
                            });
  check_input("group_norm", x, epsilon);
  check(x.ndim() >= 2, "group_norm: expected an input with a batch axis and a channel axis (rank >= 2), got shape {}",
        x.shape());
  const std::int64_t a = normalize_axis(axis, x.ndim(), "group_norm");
  check(a != 0, "group_norm: axis {} is the batch axis of input {}; expected the channel axis", axis, x.shape());
  const std::int64_t channels = x.shape()[std::size_t(a)];
  check(groups > 0, "group_norm: groups must be positive, got {} (input {})", groups, x.shape());
  check(channels >= groups && channels % groups == 0,
        "group_norm: channels % groups != 0: {} channels (axis {} of input {}) cannot be split into {} equal groups",
        channels, axis, x.shape(), groups);
  const std::string what = fmt::format("the {} channels at axis {} of input {}", channels, axis, x.shape());
  check_param("group_norm", "gamma", gamma, x, {channels}, what);
  check_param("group_norm", "beta", beta, x, {channels}, what);
  Geometry geo;
  geo.B = x.shape()[0];
  geo.P = extent(x.shape(), 1, a);
  geo.G = groups;
  geo.K = channels / groups;
  geo.Q = extent(x.shape(), a + 1, x.ndim());
  geo.epsilon = epsilon;
  return fused_forward("group_norm", "group_norm_backward", x, gamma, beta, geo, false)[0];
}

BatchNormResult batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t axis,
                           double epsilon) {
  check_input("batch_norm", x, epsilon);
  const std::int64_t a = normalize_axis(axis, x.ndim(), "batch_norm");
  const std::int64_t channels = x.shape()[std::size_t(a)];
  const std::string what = fmt::format("the {} channels at axis {} of input {}", channels, axis, x.shape());
  check_param("batch_norm", "gamma", gamma, x, {channels}, what);
  check_param("batch_norm", "beta", beta, x, {channels}, what);
  Geometry geo;
  geo.P = extent(x.shape(), 0, a);
  geo.G = channels;
  geo.Q = extent(x.shape(), a + 1, x.ndim());
  geo.epsilon = epsilon;
  auto out = fused_forward("batch_norm", "batch_norm_backward", x, gamma, beta, geo, true);
  return {out[0], out[1], out[2]};
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& mean, const Tensor& variance, const Tensor& gamma,
                            const Tensor& beta, std::int64_t axis, double epsilon) {
  if (graph::any_symbolic(x, mean, variance, gamma, beta))
    return graph::record_op("batch_norm_inference", {x, mean, variance, gamma, beta},
                            [=](const std::vector<Tensor>& v) {
                              return batch_norm_inference(v[0], v[1], v[2], v[3], v[4], axis, epsilon);
                            });
  const char* op = "batch_norm_inference";
  check_input(op, x, epsilon);
  const std::int64_t a = normalize_axis(axis, x.ndim(), op);
  const std::int64_t channels = x.shape()[std::size_t(a)];
  check(mean.defined() && variance.defined(), "{}: the mean and variance are required (input {})", op, x.shape());
  const std::string what = fmt::format("the {} channels at axis {} of input {}", channels, axis, x.shape());
  check_param(op, "mean", mean, x, {channels}, what);
  check_param(op, "variance", variance, x, {channels}, what);
  check_param(op, "gamma", gamma, x, {channels}, what);
  check_param(op, "beta", beta, x, {channels}, what);
  Shape along(std::size_t(x.ndim()), 1);  // [channels] broadcast along the axis
  along[std::size_t(a)] = channels;
  Tensor inv = rsqrt(variance + epsilon);
  if (gamma.defined()) inv = inv * gamma;
  const Tensor offset = beta.defined() ? beta - mean * inv : neg(mean * inv);
  return x * reshape(inv, along) + reshape(offset, along);
}

}  // namespace loom::ops
