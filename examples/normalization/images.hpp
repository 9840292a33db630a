#pragma once
// The image task: 16x16 grayscale pictures of a striped disk; the class is the direction of its stripes.
//
//   auto [x, y] = striped_disks(2048, /*seed=*/1);   // x [2048, 16, 16, 1] f32, y [2048] i64 in 0 .. 5
//
// Class k has stripes at k * 30 degrees (give or take 6). Everything else is drawn at random per image: the disk's
// position and radius, the stripes' period and phase, the background level, the stripes' contrast, the pixel
// noise, and an exposure that multiplies the whole picture by 1/2 .. 2 (a darker or brighter photograph).
// The exposure is what separates the normalizations: a per-sample statistic removes it, a batch statistic
// only averages it.
#include <cstdint>
#include <utility>

#include "loom.hpp"

namespace normalization_study {

inline constexpr std::int64_t kImageSide = 16;
inline constexpr std::int64_t kImageClasses = 6;

/// `n` images [n, 16, 16, 1] and their labels [n], the same for the same seed.
std::pair<loom::Tensor, loom::Tensor> striped_disks(std::int64_t n, std::uint64_t seed);

}  // namespace normalization_study
