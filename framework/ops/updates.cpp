#include "framework/ops/updates.hpp"

#include <cmath>
#include <cstdint>

#include "framework/autograd/tape.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/runtime/detail/parallel.hpp"

namespace loom::ops {

namespace {

/// Elements per piece of parallel work.
constexpr std::int64_t kElementsPerPiece = std::int64_t(1) << 14;

}  // namespace

AdamUpdate adam_update(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& v_hat,
                       double alpha, double beta_1, double beta_2, double epsilon) {
  const bool amsgrad = v_hat.defined();
  auto fits = [&](const Tensor& t) { return t.defined() && t.dtype() == w.dtype() && t.shape() == w.shape(); };
  check(w.defined() && is_floating(w.dtype()) && fits(g) && fits(m) && fits(v) && (!amsgrad || fits(v_hat)),
        "adam_update: expected the variable, gradient, m, v{} as float32 or float64 tensors of one dtype and "
        "shape, got variable {} {}, gradient {} {}, m {} {}, v {} {}",
        amsgrad ? " and v_hat" : "", w.dtype(), w.shape(), g.dtype(), g.shape(), m.dtype(), m.shape(), v.dtype(),
        v.shape());
  NoGradGuard no_grad;
  const Tensor wc = w.contiguous(), gc = g.contiguous(), mc = m.contiguous(), vc = v.contiguous();
  const Tensor hc = amsgrad ? v_hat.contiguous() : Tensor();
  AdamUpdate out{Tensor::empty(w.shape(), w.dtype()), Tensor::empty(w.shape(), w.dtype()),
                 Tensor::empty(w.shape(), w.dtype()), amsgrad ? Tensor::empty(w.shape(), w.dtype()) : Tensor()};
  visit_floating(w.dtype(), "adam_update", [&]<class T>() {
    const T* pw = wc.data<T>();
    const T* pg = gc.data<T>();
    const T* pm = mc.data<T>();
    const T* pv = vc.data<T>();
    const T* ph = amsgrad ? hc.data<T>() : nullptr;
    T* ow = out.variable.data<T>();
    T* om = out.m.data<T>();
    T* ov = out.v.data<T>();
    T* oh = amsgrad ? out.v_hat.data<T>() : nullptr;
    const T a = T(alpha), c1 = T(1.0 - beta_1), c2 = T(1.0 - beta_2), eps = T(epsilon);
    parallel::for_ranges(w.numel(), kElementsPerPiece, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const T gi = pg[i];
        const T mi = pm[i] + (gi - pm[i]) * c1;
        const T vi = pv[i] + (gi * gi - pv[i]) * c2;
        T second = vi;
        if (amsgrad) {
          second = ph[i] >= vi || ph[i] != ph[i] ? ph[i] : vi;  // NaN propagates, as ops::maximum
          oh[i] = second;
        }
        om[i] = mi;
        ov[i] = vi;
        ow[i] = pw[i] - (mi * a) / (std::sqrt(second) + eps);
      }
    });
  });
  return out;
}

}  // namespace loom::ops
