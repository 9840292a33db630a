#pragma once
// The study's picture, drawn pixel by pixel and written with io::save_png: on the left, test accuracy against
// batch size (a log2 axis) with one line per normalization; on the right, grouped bars. Lines and bars show
// the mean over the seeds, small dots each seed's own result.
//
//   save_chart("normalization.png", {.title = "CNN", .batch_sizes = {2, 4, 8}, .lines = {...}},
//              {.title = "Transformer", .groups = {"fixed length", "varying length"}, .bars = {...}});
#include <cstdint>
#include <string>
#include <vector>

namespace normalization_study {

struct Rgb {
  unsigned char r, g, b;
};

/// One line (or one bar per group): its legend entry, its colour and, per point, the accuracy (in [0, 1]) of
/// each seed.
struct Series {
  std::string name;
  Rgb color;
  std::vector<std::vector<double>> accuracy;
};

/// The mean of `values`: what the lines and bars show.
double mean(const std::vector<double>& values);

struct LinePanel {
  std::string title;
  std::vector<std::int64_t> batch_sizes;  // powers of two, increasing; one accuracy per size in each line
  std::vector<Series> lines;
};

struct BarPanel {
  std::string title;
  std::vector<std::string> groups;  // one accuracy per group in each series
  std::vector<Series> bars;
};

/// Draws both panels into one PNG at `path` (replaced atomically).
void save_chart(const std::string& path, const LinePanel& lines, const BarPanel& bars);

}  // namespace normalization_study
