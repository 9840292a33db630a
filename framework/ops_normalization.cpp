#include "framework/ops_normalization.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "framework/dispatch.hpp"
#include "framework/ops_elementwise.hpp"
#include "framework/ops_shape.hpp"
#include "framework/strided.hpp"
#include "framework/tape.hpp"

// The kernels are plain loops over a strided walk (strided.hpp) rather than xtensor expressions: the point of
// a fused normalization is to take the statistics, the normalization and the backward sums in as few passes
// as possible over a slab that stays in cache, which a chain of evaluated xtensor expressions cannot do.

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
  double epsilon = 0.0;
  std::int64_t count() const { return P * K * Q; }  // elements per statistic
  std::int64_t slab() const { return P * G * K * Q; }
  std::int64_t params() const { return G * K; }
};

/// The statistics the backward pass needs, one per (b, g), in x's dtype: the shift (a value of the group,
/// its first element), the mean's offset from it, and 1 / sqrt(var + epsilon). Normalizing as
/// ((x - shift) - offset) * rstd keeps every difference small, so float32 keeps its digits at large means.
struct Stats {
  Tensor shift, offset, rstd;
};

/// The walk over one slab: element, statistic and parameter positions (strides 1 / 0 along each run).
detail::RunWalk<3> slab_walk(const Geometry& geo) {
  const Shape shape{geo.P, geo.G, geo.K, geo.Q};
  const Strides x = contiguous_strides(shape), stat{0, 1, 0, 0}, param{0, geo.K, 1, 0};
  return detail::RunWalk<3>(shape, {&x, &stat, &param});
}

/// Calls run.template operator()<S, P>(x_at, stat_at, param_at, n) for each run of a slab; S (P) says whether
/// the statistic (parameter) advances with the element or stays fixed along the run. Bodies index with these
/// compile-time steps, so the compiler vectorizes them and keeps a fixed statistic's sums in registers.
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

/// Sums kept in a register are split over this many lanes: independent chains of adds pipeline, where one
/// chain would wait on each add's latency (the compiler may not reassociate floating-point sums itself).
constexpr std::int64_t kLanes = 4;

/// Calls body(j, lane) for j in [0, n) with lane = j % kLanes, in blocks of kLanes.
template <class Body>
void blocked(std::int64_t n, Body&& body) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t lane = 0; lane < kLanes; ++lane) body(j + lane, lane);
  for (std::int64_t lane = 0; j < n; ++j, ++lane) body(j, lane);
}

/// Sums a run's values into consecutive slots (advancing index) or into one slot (fixed index: summed in
/// registers, one partial sum per lane, and added when the run ends).
template <bool vary>
class RunSum {
 public:
  explicit RunSum(double* slots) : slots_(slots) {}
  ~RunSum() {
    if constexpr (!vary) {
      double total = 0.0;
      for (double l : lanes_) total += l;
      *slots_ += total;
    }
  }
  RunSum(const RunSum&) = delete;
  RunSum& operator=(const RunSum&) = delete;
  void add(std::int64_t j, std::int64_t lane, double v) {
    if constexpr (vary) slots_[j] += v;
    else lanes_[std::size_t(lane)] += v;
  }

 private:
  double* slots_;
  std::array<double, kLanes> lanes_{};
};

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

/// Forward: per slab, the sums around the shift (double), the statistics, then y. Fills `stats`, and the
/// batch mean and biased variance when `mean` is given (batch norm).
template <class T>
Tensor forward_kernel(const Tensor& xc, const Tensor& gamma, const Tensor& beta, const Geometry& geo, Stats& stats,
                      Tensor* mean, Tensor* variance) {
  const Shape stat_shape{geo.B * geo.G};
  stats = {Tensor::empty(stat_shape, xc.dtype()), Tensor::empty(stat_shape, xc.dtype()),
           Tensor::empty(stat_shape, xc.dtype())};
  if (mean) {
    *mean = Tensor::empty(stat_shape, xc.dtype());
    *variance = Tensor::empty(stat_shape, xc.dtype());
  }
  Tensor y = Tensor::empty(xc.shape(), xc.dtype());
  const std::vector<T> gam = param_or(gamma, geo.params(), T(1)), bet = param_or(beta, geo.params(), T(0));
  const T* x = xc.data<T>();
  T* out = y.data<T>();
  const auto walk = slab_walk(geo);
  const double n = double(geo.count());
  std::vector<double> s1(std::size_t(geo.G)), s2(std::size_t(geo.G));
  for (std::int64_t b = 0; b < geo.B; ++b) {
    const T* xs = x + b * geo.slab();
    T* ys = out + b * geo.slab();
    T* shift = stats.shift.data<T>() + b * geo.G;
    T* offset = stats.offset.data<T>() + b * geo.G;
    T* rstd = stats.rstd.data<T>() + b * geo.G;
    for (std::int64_t g = 0; g < geo.G; ++g) shift[g] = geo.center ? xs[g * geo.K * geo.Q] : T(0);
    std::fill(s1.begin(), s1.end(), 0.0);
    std::fill(s2.begin(), s2.end(), 0.0);
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t, std::int64_t len) {
      RunSum<S> sum(&s1[std::size_t(si)]), sum_sq(&s2[std::size_t(si)]);
      const T* xr = xs + xi;
      blocked(len, [&](std::int64_t j, std::int64_t lane) {
        const double d = double(xr[j] - at<S>(shift + si, j));
        sum.add(j, lane, d);
        sum_sq.add(j, lane, d * d);
      });
    });
    for (std::int64_t g = 0; g < geo.G; ++g) {
      // Around a shift from the data, E[d^2] - E[d]^2 loses at most a factor `count` of relative precision
      // (|mean - shift|^2 <= count * var), against 1e6^2 / var for the raw moments at a mean of 1e6.
      const double mu = geo.center ? s1[std::size_t(g)] / n : 0.0;
      const double var = std::max(s2[std::size_t(g)] / n - mu * mu, 0.0);
      offset[g] = T(mu);
      rstd[g] = T(1.0 / std::sqrt(var + geo.epsilon));
      if (mean) {
        mean->data<T>()[b * geo.G + g] = T(double(shift[g]) + mu);
        variance->data<T>()[b * geo.G + g] = T(var);
      }
    }
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t pi, std::int64_t len) {
      const T* xr = xs + xi;
      T* yr = ys + xi;
      for (std::int64_t j = 0; j < len; ++j)
        yr[j] = (xr[j] - at<S>(shift + si, j) - at<S>(offset + si, j)) *
                    (at<S>(rstd + si, j) * at<P>(gam.data() + pi, j)) +
                at<P>(bet.data() + pi, j);
    });
  }
  return y;
}

struct Grads {
  Tensor dx, dgamma, dbeta;
};

/// Backward, with xh = (x - mean) * rstd and dxh = dy * gamma, per statistic over its n elements:
///   dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh))          (RMS: without the mean(dxh) term)
///      + dmean / n + dvar * 2 (x - mean) / n                      (batch norm's mean / variance outputs)
/// dgamma = sum(dy * xh), dbeta = sum(dy) over everything but the parameter's own index. Per slab: one pass
/// for the sums, then one for dx.
template <class T>
Grads backward_kernel(const Tensor& dyc, const Tensor& xc, const Tensor& gamma, const Tensor& beta,
                      const Stats& stats, const Geometry& geo, const Tensor& dmean, const Tensor& dvar) {
  Grads grads{Tensor::empty(xc.shape(), xc.dtype()), {}, {}};
  const std::vector<T> gam = param_or(gamma, geo.params(), T(1));
  const std::vector<T> gm = dmean.defined() ? dmean.to_vector<T>() : std::vector<T>();
  const std::vector<T> gv = dvar.defined() ? dvar.to_vector<T>() : std::vector<T>();
  const T* x = xc.data<T>();
  const T* dy = dyc.data<T>();
  T* dx = grads.dx.data<T>();
  const auto walk = slab_walk(geo);
  const double n = double(geo.count());
  std::vector<double> dg(std::size_t(geo.params())), db(std::size_t(geo.params()));
  std::vector<double> c1(std::size_t(geo.G)), c2(std::size_t(geo.G));
  std::vector<T> shift_coef(std::size_t(geo.G)), xh_coef(std::size_t(geo.G));
  for (std::int64_t b = 0; b < geo.B; ++b) {
    const T* xs = x + b * geo.slab();
    const T* dys = dy + b * geo.slab();
    T* dxs = dx + b * geo.slab();
    const T* shift = stats.shift.data<T>() + b * geo.G;
    const T* offset = stats.offset.data<T>() + b * geo.G;
    const T* rstd = stats.rstd.data<T>() + b * geo.G;
    std::fill(c1.begin(), c1.end(), 0.0);
    std::fill(c2.begin(), c2.end(), 0.0);
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t pi, std::int64_t len) {
      const T* xr = xs + xi;
      const T* dyr = dys + xi;
      const auto xh = [&](std::int64_t j) {
        return (xr[j] - at<S>(shift + si, j) - at<S>(offset + si, j)) * at<S>(rstd + si, j);
      };
      RunSum<S> sum_dxh(&c1[std::size_t(si)]), sum_dxh_xh(&c2[std::size_t(si)]);
      RunSum<P> sum_dgamma(&dg[std::size_t(pi)]), sum_dbeta(&db[std::size_t(pi)]);
      const auto stat_sums = [&](std::int64_t j, std::int64_t lane) {
        const double dxh = double(dyr[j] * at<P>(gam.data() + pi, j));
        sum_dxh.add(j, lane, dxh);
        sum_dxh_xh.add(j, lane, dxh * double(xh(j)));
      };
      const auto param_sums = [&](std::int64_t j, std::int64_t lane) {
        sum_dgamma.add(j, lane, double(dyr[j]) * double(xh(j)));
        sum_dbeta.add(j, lane, double(dyr[j]));
      };
      // A run of one statistic takes two loops (the second reads the run from cache), so that only two sums
      // are kept in registers at a time; a run across statistics keeps none and streams once.
      if constexpr (S) {
        blocked(len, [&](std::int64_t j, std::int64_t lane) {
          stat_sums(j, lane);
          param_sums(j, lane);
        });
      } else {
        blocked(len, stat_sums);
        blocked(len, param_sums);
      }
    });
    // dx = rstd * dxh + shift_coef + xh * xh_coef, the coefficients per statistic.
    for (std::int64_t g = 0; g < geo.G; ++g) {
      const double r = double(rstd[g]);
      double a = geo.center ? -r * c1[std::size_t(g)] / n : 0.0;
      double c = -r * c2[std::size_t(g)] / n;
      if (!gm.empty()) a += double(gm[std::size_t(b * geo.G + g)]) / n;
      if (!gv.empty()) c += 2.0 * double(gv[std::size_t(b * geo.G + g)]) / (n * r);
      shift_coef[std::size_t(g)] = T(a);
      xh_coef[std::size_t(g)] = T(c);
    }
    for_each_run(walk, [&]<bool S, bool P>(std::int64_t xi, std::int64_t si, std::int64_t pi, std::int64_t len) {
      const T* xr = xs + xi;
      const T* dyr = dys + xi;
      T* dxr = dxs + xi;
      for (std::int64_t j = 0; j < len; ++j) {
        const T r = at<S>(rstd + si, j);
        const T xh = (xr[j] - at<S>(shift + si, j) - at<S>(offset + si, j)) * r;
        dxr[j] = r * (dyr[j] * at<P>(gam.data() + pi, j)) + at<S>(shift_coef.data() + si, j) +
                 xh * at<S>(xh_coef.data() + si, j);
      }
    });
  }
  const auto to_tensor = [&](const std::vector<double>& values, const Shape& shape) {
    Tensor t = Tensor::empty(shape, xc.dtype());
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
  check(x.defined(), "{}: the input tensor is undefined", op);
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", op, x.dtype(),
        x.shape());
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
                         const Tensor& beta, const std::vector<std::int64_t>& axes, double epsilon, bool center) {
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
    return permute(layer_or_rms_norm(op, backward_op, permute(x, perm), gamma, beta, last, epsilon, center), back);
  }
  Geometry geo;
  geo.K = numel(param_shape);
  geo.B = x.numel() / geo.K;
  geo.center = center;
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

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const std::vector<std::int64_t>& axes,
                  double epsilon) {
  return layer_or_rms_norm("layer_norm", "layer_norm_backward", x, gamma, beta, axes, epsilon, true);
}

Tensor rms_norm(const Tensor& x, const Tensor& scale, const std::vector<std::int64_t>& axes, double epsilon) {
  return layer_or_rms_norm("rms_norm", "rms_norm_backward", x, scale, Tensor(), axes, epsilon, false);
}

Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t groups, std::int64_t axis,
                  double epsilon) {
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
