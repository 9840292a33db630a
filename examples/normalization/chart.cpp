#include "chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom.hpp"

// stb_easy_font (Debian's libstb-dev) turns text into rectangles, the way loom's own PNG charts draw text.
// Its functions are static and not all are used here; its warnings are not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

namespace normalization_study {

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / double(values.size());
}

namespace {

constexpr Rgb kBlack{0, 0, 0}, kGrid{225, 225, 225}, kFrame{150, 150, 150};
constexpr int kWidth = 1000, kHeight = 460, kSplit = 620;  // the line panel is [0, kSplit), the bars the rest
constexpr int kTop = 56, kBottom = kHeight - 86;           // the plot areas' top and bottom rows

/// An RGB picture, white at first; what falls outside it is clipped.
struct Canvas {
  std::vector<std::uint8_t> rgb = std::vector<std::uint8_t>(std::size_t(kWidth) * kHeight * 3, 255);

  void fill(int x, int y, int w, int h, Rgb c) {
    for (int row = std::max(y, 0); row < std::min(y + h, kHeight); ++row)
      for (int col = std::max(x, 0); col < std::min(x + w, kWidth); ++col) {
        std::uint8_t* p = &rgb[(std::size_t(row) * kWidth + std::size_t(col)) * 3];
        p[0] = c.r, p[1] = c.g, p[2] = c.b;
      }
  }

  /// A straight line `thickness` pixels wide, stamped in small steps from (x0, y0) to (x1, y1).
  void line(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1) {
    const int steps = int(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))) + 1;
    for (int i = 0; i <= steps; ++i) {
      const double t = double(i) / steps;
      fill(int(std::lround(x0 + t * (x1 - x0))) - thickness / 2, int(std::lround(y0 + t * (y1 - y0))) - thickness / 2,
           thickness, thickness, c);
    }
  }

  /// Text with its top-left corner at (x, y); each font pixel becomes scale x scale pixels.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1) {
    // stb_easy_font writes quads of 4 vertices {float x, y, z; uint8 rgba[4]}: vertex 0 is the top-left
    // corner, vertex 2 the bottom-right; 1 KiB per character is enough.
    std::vector<char> quads(s.size() * 1024 + 64);
    std::string copy = s;
    const int count = stb_easy_font_print(0, 0, copy.data(), nullptr, quads.data(), int(quads.size()));
    for (int q = 0; q < count; ++q) {
      float corner[2], opposite[2];
      std::memcpy(corner, &quads[std::size_t(q) * 64], sizeof corner);
      std::memcpy(opposite, &quads[std::size_t(q) * 64 + 32], sizeof opposite);
      fill(x + int(corner[0]) * scale, y + int(corner[1]) * scale, int(opposite[0] - corner[0]) * scale,
           int(opposite[1] - corner[1]) * scale, c);
    }
  }
};

int text_width(const std::string& s, int scale = 1) {
  std::string copy = s;
  return stb_easy_font_width(copy.data()) * scale;
}

std::string percent(double accuracy) { return fmt::format("{:.0f}%", 100 * accuracy); }

/// A y axis from `lo` (at kBottom) to 100% (at `top`): grid lines and labels every `step`, from x0 to x1.
struct AccuracyAxis {
  double lo, step;
  int x0, x1, top = kTop;

  double y(double accuracy) const { return kBottom - (accuracy - lo) / (1.0 - lo) * (kBottom - top); }

  void draw(Canvas& canvas) const {
    for (double a = lo; a <= 1.0 + 1e-9; a += step) {
      canvas.line(x0, y(a), x1, y(a), kGrid);
      canvas.text(x0 - 6 - text_width(percent(a)), int(y(a)) - 3, percent(a), kBlack);
    }
    canvas.line(x0, top, x0, kBottom, kBlack);
    canvas.line(x0, kBottom, x1, kBottom, kBlack);
    canvas.text(x0, kTop - 14, "test accuracy", kBlack);
  }
};

/// The legend as one row under a panel, from x: a short bar in each series' colour, then its name.
void legend(Canvas& canvas, int x, int y, const std::vector<Series>& series) {
  for (const Series& s : series) {
    canvas.fill(x, y + 1, 16, 4, s.color);
    canvas.text(x + 22, y, s.name, kBlack);
    x += 22 + text_width(s.name) + 18;
  }
}

void draw_lines(Canvas& canvas, const LinePanel& panel) {
  double lowest = 1.0;
  for (const Series& s : panel.lines)
    for (const std::vector<double>& seeds : s.accuracy)
      lowest = std::min(lowest, *std::min_element(seeds.begin(), seeds.end()));
  const double lo = std::clamp(std::floor(10 * lowest) / 10, 0.0, 0.9);
  const AccuracyAxis axis{lo, 1.0 - lo >= 0.3 ? 0.1 : 0.05, 60, kSplit - 30};
  axis.draw(canvas);
  canvas.text((axis.x0 + axis.x1 - text_width(panel.title, 2)) / 2, 12, panel.title, kBlack, 2);

  // x: log2 of the batch size, with half a step of margin on either side.
  const double first = std::log2(double(panel.batch_sizes.front())) - 0.5;
  const double last = std::log2(double(panel.batch_sizes.back())) + 0.5;
  auto x = [&](std::int64_t batch) {
    return axis.x0 + (std::log2(double(batch)) - first) / (last - first) * (axis.x1 - axis.x0);
  };
  for (std::int64_t b : panel.batch_sizes) {
    const std::string label = std::to_string(b);
    canvas.line(x(b), kTop, x(b), kBottom, kGrid);
    canvas.line(x(b), kBottom, x(b), kBottom + 4, kBlack);
    canvas.text(int(x(b)) - text_width(label) / 2, kBottom + 8, label, kBlack);
  }
  const std::string x_label = "batch size (log2 axis)";
  canvas.text((axis.x0 + axis.x1 - text_width(x_label)) / 2, kBottom + 24, x_label, kBlack);

  for (const Series& s : panel.lines)
    for (std::size_t i = 0; i < s.accuracy.size(); ++i) {
      const double px = x(panel.batch_sizes[i]), py = axis.y(mean(s.accuracy[i]));
      canvas.fill(int(px) - 3, int(py) - 3, 7, 7, s.color);
      for (double seed : s.accuracy[i]) canvas.fill(int(px) + 5, int(axis.y(seed)) - 1, 3, 3, s.color);
      if (i > 0) canvas.line(x(panel.batch_sizes[i - 1]), axis.y(mean(s.accuracy[i - 1])), px, py, s.color, 2);
    }
  legend(canvas, axis.x0, kBottom + 48, panel.lines);
  canvas.text(axis.x0, kBottom + 66, "lines and bars: the mean over the seeds; small squares: each seed", kBlack);
}

void draw_bars(Canvas& canvas, const BarPanel& panel) {
  const AccuracyAxis axis{0.0, 0.2, kSplit + 60, kWidth - 20, kTop + 20};  // room for the values above 100%
  axis.draw(canvas);
  canvas.text((axis.x0 + axis.x1 - text_width(panel.title, 2)) / 2, 12, panel.title, kBlack, 2);
  const double group_width = double(axis.x1 - axis.x0) / double(panel.groups.size());
  const int bar_width = int(group_width * 0.7 / double(panel.bars.size()));
  for (std::size_t g = 0; g < panel.groups.size(); ++g) {
    const int left = axis.x0 + int(group_width * (double(g) + 0.15));
    for (std::size_t k = 0; k < panel.bars.size(); ++k) {
      const std::vector<double>& seeds = panel.bars[k].accuracy[g];
      const int bx = left + int(k) * bar_width, top = int(axis.y(mean(seeds)));
      canvas.fill(bx + 2, top, bar_width - 4, kBottom - top, panel.bars[k].color);
      for (double seed : seeds) canvas.fill(bx + bar_width / 2 - 2, int(axis.y(seed)) - 2, 5, 5, kBlack);
      // The mean's value just above the bar, moved up past the seed squares it would cover.
      std::vector<double> upwards = seeds;
      std::sort(upwards.begin(), upwards.end());
      int label_y = top;
      for (double seed : upwards)
        if (int(axis.y(seed)) < label_y && int(axis.y(seed)) > label_y - 16) label_y = int(axis.y(seed));
      const std::string value = fmt::format("{:.1f}%", 100 * mean(seeds));
      canvas.text(bx + (bar_width - text_width(value)) / 2, label_y - 13, value, kBlack);
    }
    const std::string& label = panel.groups[g];
    canvas.text(axis.x0 + int(group_width * (double(g) + 0.5)) - text_width(label) / 2, kBottom + 8, label, kBlack);
  }
  legend(canvas, axis.x0, kBottom + 48, panel.bars);
}

}  // namespace

void save_chart(const std::string& path, const LinePanel& lines, const BarPanel& bars) {
  Canvas canvas;
  draw_lines(canvas, lines);
  canvas.line(kSplit, 10, kSplit, kHeight - 10, kFrame);
  draw_bars(canvas, bars);
  loom::io::save_png(path, canvas.rgb, kWidth, kHeight);
}

}  // namespace normalization_study
