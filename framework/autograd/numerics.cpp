#include "framework/autograd/numerics.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/tensor/error.hpp"

namespace loom {

namespace {
std::atomic<bool> check_numerics_flag{false};
thread_local int suspended_on_this_thread = 0;
}  // namespace

void set_check_numerics(bool enabled) { check_numerics_flag.store(enabled, std::memory_order_relaxed); }
bool check_numerics_enabled() {
  return check_numerics_flag.load(std::memory_order_relaxed) && suspended_on_this_thread == 0;
}

namespace numerics {

SuspendChecks::SuspendChecks() { ++suspended_on_this_thread; }
SuspendChecks::~SuspendChecks() { --suspended_on_this_thread; }

namespace {

/// Finite values compare <= max; NaN and +-inf do not. bfloat16 is tested as the float it widens to.
template <class T>
bool finite(T v) {
  using Wide = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;
  return std::abs(Wide(v)) <= std::numeric_limits<Wide>::max();
}

template <class T>
std::optional<NonFinite> first_non_finite_of(const Tensor& t) {
  const T* data = t.data<T>();
  if (t.is_contiguous()) {
    // Blocks with a branch-free test each, so the common all-finite scan vectorizes.
    constexpr std::int64_t kBlock = 1024;
    const std::int64_t n = t.numel();
    for (std::int64_t begin = 0; begin < n; begin += kBlock) {
      const std::int64_t end = std::min(n, begin + kBlock);
      bool all_finite = true;
      for (std::int64_t i = begin; i < end; ++i) all_finite &= finite(data[i]);
      if (all_finite) continue;
      for (std::int64_t i = begin; i < end; ++i)
        if (!finite(data[i])) return NonFinite{i, double(data[i])};
    }
    return std::nullopt;
  }
  std::optional<NonFinite> bad;
  for_each_strided(t.shape(), t.strides(), 0, [&](std::int64_t i, std::int64_t at) {
    if (!bad && !finite(data[at])) bad = NonFinite{i, double(data[at])};
  });
  return bad;
}

std::string describe(const std::vector<Tensor>& tensors) {
  std::string out;
  for (const Tensor& t : tensors) {
    if (!out.empty()) out += ", ";
    out += t.defined() ? fmt::format("{} {}", t.dtype(), t.shape()) : "undefined";
  }
  return out.empty() ? "none" : out;
}

/// "its output", "its output 1" (ops with several outputs), "its gradient for input 0".
std::string output_name(std::size_t k, std::size_t count, const CheckSite& site) {
  if (site.backward_rule) return fmt::format("its gradient for input {}", k);
  return count == 1 ? std::string("its output") : fmt::format("its output {}", k);
}

}  // namespace

std::string non_finite_name(double value) { return std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf"; }

std::optional<NonFinite> first_non_finite(const Tensor& t) {
  if (!t.defined() || !is_differentiable(t.dtype())) return std::nullopt;
  if (t.dtype() == DType::bf16) return first_non_finite_of<bfloat16>(t);
  return visit_floating(t.dtype(), "check_numerics", [&]<class T>() { return first_non_finite_of<T>(t); });
}

void check_finite(std::string_view op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                  const CheckSite& site) {
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const std::optional<NonFinite> bad = first_non_finite(outputs[k]);
    if (!bad) continue;
    const std::string name = site.backward_rule ? fmt::format("{} backward", op) : std::string(op);
    const char* inputs_are = site.backward_rule ? "output gradients" : "inputs";
    const std::string within =
        site.gradient_of.empty() ? "" : fmt::format(", in the backward rule of '{}'", site.gradient_of);
    // A non-finite value that was already in an input is reported there: this op only passed it on.
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::optional<NonFinite> incoming = first_non_finite(inputs[i]);
      if (!incoming) continue;
      throw Error(fmt::format(
          "check_numerics: {} came into op '{}' with its {} {} (element {} of shape {}; {}: {}){}; no checked op "
          "produced it: it was in the data, or written by code that is not an op",
          non_finite_name(incoming->value), name, site.backward_rule ? "output gradient" : "input", i,
          unravel_index(incoming->index, inputs[i].shape()), inputs[i].shape(), inputs_are, describe(inputs), within));
    }
    throw Error(fmt::format("check_numerics: op '{}' produced {} at element {} of {} of shape {} ({}: {}){}", name,
                            non_finite_name(bad->value), unravel_index(bad->index, outputs[k].shape()),
                            output_name(k, outputs.size(), site), outputs[k].shape(), inputs_are, describe(inputs),
                            within));
  }
}

}  // namespace numerics

}  // namespace loom
