#pragma once
// Shared by the libFuzzer targets: the input as a file (the loaders read paths), the round-trip check
// that a loaded tensor saves and loads back to the same bytes, and the shape ops run on what loaded.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"
#include "framework/tensor/error.hpp"
#include "framework/tensor/tensor.hpp"
#include "tests/temp_files.hpp"

namespace loom::fuzzing {

/// A folder for the fuzz input and the round-trip files, removed when the fuzzer exits normally.
inline const testing::TempDir& work_dir() {
  static const testing::TempDir dir("fuzz");
  return dir;
}

/// Writes the fuzz input to a file in work_dir() and returns its path.
inline std::string input_file(const std::uint8_t* data, std::size_t size, const std::string& name) {
  const std::string path = work_dir().file(name);
  testing::write_bytes(path, std::string(reinterpret_cast<const char*>(data), size));
  return path;
}

/// The row-major bytes of a freshly loaded (contiguous) tensor.
inline std::string_view tensor_bytes(const Tensor& t) {
  return {reinterpret_cast<const char*>(t.impl().storage->data()) + std::size_t(t.offset()) * dtype_size(t.dtype()),
          std::size_t(t.numel()) * dtype_size(t.dtype())};
}

/// A broken invariant is a finding: abort, so that libFuzzer saves the input.
inline void require(bool ok, const char* invariant) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", invariant);
  std::abort();
}

inline void require_same(const Tensor& a, const Tensor& b) {
  require(a.dtype() == b.dtype(), "the round trip keeps the dtype");
  require(a.shape() == b.shape(), "the round trip keeps the shape");
  require(tensor_bytes(a) == tensor_bytes(b), "the round trip keeps the bytes");
}

/// The size arithmetic of the shape ops on a loaded tensor, whose dimensions the fuzzer chose (zero-size
/// tensors with dimensions near 2^62 among them): each call gives a result or a loom::Error.
inline void exercise_size_arithmetic(const Tensor& t) {
  const auto attempt = [](auto&& call) {
    try {
      call();
    } catch (const Error&) {
    }
  };
  if (t.ndim() == 0 || !is_floating(t.dtype())) return;
  attempt([&] { ops::concat({t, t}, 0); });
  attempt([&] { ops::split(t, std::vector<std::int64_t>{t.size(0), 0}, 0); });
  attempt([&] { ops::reshape(t, {-1}); });
  attempt([&] { ops::reshape(t, {t.size(0), -1}); });
  attempt([&] { ops::expand_dims(t, 0); });
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  attempt([&] { ops::slice(t, 0, 0, kMax, kMax - 1); });
  // A sum over a zero-size axis is legal and as large as the other axes: the fuzzer's own memory limit (2 GB)
  // is lower than loom's bound, so only outputs of at most 2^24 elements are materialized here.
  const auto others = [&](std::int64_t axis) {
    std::int64_t n = 1;
    for (std::int64_t d = 0; d < t.ndim(); ++d)
      if (d != axis && __builtin_mul_overflow(n, t.size(d), &n)) return std::numeric_limits<std::int64_t>::max();
    return n;
  };
  constexpr std::int64_t kMaxMaterialized = std::int64_t(1) << 24;
  if (others(0) <= kMaxMaterialized) attempt([&] { ops::sum(t, {0}); });
  if (others(t.ndim() - 1) <= kMaxMaterialized) attempt([&] { ops::sum(t, {-1}); });
  attempt([&] {
    Shape three_of_it{3};
    three_of_it.insert(three_of_it.end(), t.shape().begin(), t.shape().end());
    ops::sum(ops::broadcast_to(t, three_of_it), {0});
  });
}

}  // namespace loom::fuzzing
