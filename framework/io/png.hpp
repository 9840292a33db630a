#pragma once
// PNG output: raw RGB images, matrix heatmaps (attention weights, confusion matrices) and line charts (training
// curves), drawn without a plotting library:
//
//   io::save_heatmap_png("attention.png", scores, {.cell = 20, .row_labels = tokens, .col_labels = tokens});
//   io::save_line_chart_png("loss.png", {{"loss", history.at("loss")}, {"val_loss", history.at("val_loss")}},
//                           {.title = "training", .log_y = true});
//
// Files are replaced atomically (framework/io/atomic_file.hpp): a failed save leaves any existing file untouched.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::io {

/// Writes an 8-bit RGB image: `rgb` holds width * height * 3 bytes, row by row from the top.
void save_png(const std::string& path, const std::vector<std::uint8_t>& rgb, int width, int height);

struct HeatmapOptions {
  int cell = 16;  // pixels per matrix entry
  /// The values mapped to the two ends of the colour map (others are clamped); default: the data's min and max.
  std::optional<double> vmin = std::nullopt, vmax = std::nullopt;
  /// Optional: one label per row (drawn left of the rows) / per column (drawn above the columns).
  std::vector<std::string> row_labels = {}, col_labels = {};
  std::string title = {};
};

/// A 2-D tensor of any numeric dtype as a grid of viridis-coloured cells (purple = vmin, yellow = vmax), with
/// a colour bar on the right labelled with vmin and vmax.
void save_heatmap_png(const std::string& path, const Tensor& matrix, HeatmapOptions options = {});

struct LineChartOptions {
  int width = 640, height = 400;
  std::string title = {}, x_label = "epoch", y_label = "loss";
  bool log_y = false;  // a logarithmic y axis (every value must then be > 0)
};

/// One line of a chart: values[i] is drawn at x = i + 1.
struct Series {
  std::string name;
  std::vector<double> values;
};

/// The series as lines in distinct colours (matplotlib's default cycle), with axes, tick labels and a legend.
void save_line_chart_png(const std::string& path, const std::vector<Series>& series, LineChartOptions options = {});

}  // namespace loom::io
