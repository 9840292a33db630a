#pragma once
// The sequence task: find the symbol that follows the marker.
//
//   random::Generator rng(3);
//   auto [x, y] = marker_sequences(16, /*length=*/9, rng);   // x [16, 9] i64 token ids, y [16] i64 in 0 .. 15
//
// A sequence holds random symbols (token ids 1 .. 16) and one marker (token id 0) somewhere before its last
// position; the label is the symbol right after the marker (its id - 1). Only attention can fetch it: the
// answer's position changes from sequence to sequence. The study draws each batch at its own length, from 2 to
// 64 tokens (or all at 33, the same mean, as the control), so no padding is needed.
#include <cstdint>
#include <utility>

#include "loom.hpp"

namespace normalization_study {

inline constexpr std::int64_t kMinLength = 2, kMaxLength = 64;
inline constexpr std::int64_t kSymbols = 16;               // the classes
inline constexpr std::int64_t kVocabulary = kSymbols + 1;  // the marker and the symbols

/// `n` sequences of `length` tokens [n, length] and their labels [n], drawn from `rng`.
std::pair<loom::Tensor, loom::Tensor> marker_sequences(std::int64_t n, std::int64_t length,
                                                       loom::random::Generator& rng);

}  // namespace normalization_study
