#include "framework/io/png.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <string_view>

#include "framework/io/atomic_file.hpp"
#include "framework/tensor/error.hpp"

// stb's single-file libraries (Debian's libstb-dev): the PNG writer is compiled here with static linkage, so
// none of its symbols leave loom; the font header consists of static functions. Their warnings are not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

namespace loom::io {

namespace {

struct Color {
  std::uint8_t r, g, b;
};

constexpr Color kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrey{128, 128, 128}, kGridGrey{225, 225, 225};
constexpr int kPad = 6;
constexpr int kLineHeight = 12;  // stb_easy_font's line advance; its glyphs are at most 10 pixels tall
constexpr int kGlyphHeight = 7;  // the height of a capital letter or digit, for centring text vertically
constexpr std::int64_t kMaxSide = 30000;  // pixels: keeps every coordinate comfortably inside an int
constexpr std::int64_t kMaxPixels = 50'000'000;  // 150 MB of RGB, and the encoder's buffers well inside an int

/// stb_easy_font indexes its tables with (c - 32) and knows one line only here: anything that is not printable
/// ASCII becomes '?'.
std::string printable(std::string_view text) {
  std::string s(text);
  for (char& c : s)
    if (c < 32 || c > 126) c = '?';
  return s;
}

int text_width(std::string_view text, int scale = 1) {
  std::string s = printable(text);
  return stb_easy_font_width(s.data()) * scale;
}

std::string format_value(double v) { return fmt::format("{:.4g}", v); }

/// An RGB picture to draw on, white at first; whatever falls outside it is clipped.
struct Canvas {
  int width, height;
  std::vector<std::uint8_t> rgb;

  Canvas(int w, int h) : width(w), height(h), rgb(std::size_t(w) * std::size_t(h) * 3, 255) {}

  void fill_rect(int x, int y, int w, int h, Color c) {
    const int x0 = std::max(x, 0), y0 = std::max(y, 0);
    const int x1 = std::min(x + w, width), y1 = std::min(y + h, height);
    for (int row = y0; row < y1; ++row)
      for (int col = x0; col < x1; ++col) {
        std::uint8_t* p = &rgb[(std::size_t(row) * std::size_t(width) + std::size_t(col)) * 3];
        p[0] = c.r, p[1] = c.g, p[2] = c.b;
      }
  }

  /// Bresenham's line, drawn with a square pen `thickness` pixels wide centred on the ideal line.
  void line(int x0, int y0, int x1, int y1, Color c, int thickness = 1) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int err = dx + dy;;) {
      fill_rect(x0 - thickness / 2, y0 - thickness / 2, thickness, thickness, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }

  /// One line of text with its top-left corner at (x, y); each font pixel becomes scale x scale pixels.
  void text(int x, int y, std::string_view text, Color c, int scale = 1) {
    std::string s = printable(text);
    // stb_easy_font emits axis-aligned quads of 4 vertices {float x, y, z; uint8 rgba[4]}: the first vertex is
    // the top-left corner, the third the bottom-right. No glyph needs more than 1 KiB of them.
    constexpr int kVertexBytes = 16, kQuadBytes = 4 * kVertexBytes;
    std::vector<char> quads(s.size() * 1024 + kQuadBytes);
    const int count = stb_easy_font_print(0, 0, s.data(), nullptr, quads.data(), int(quads.size()));
    for (int q = 0; q < count; ++q) {
      float top_left[2], bottom_right[2];
      std::memcpy(top_left, &quads[std::size_t(q) * kQuadBytes], sizeof top_left);
      std::memcpy(bottom_right, &quads[std::size_t(q) * kQuadBytes + 2 * kVertexBytes], sizeof bottom_right);
      const int qx = int(std::lround(top_left[0])), qy = int(std::lround(top_left[1]));
      const int qw = int(std::lround(bottom_right[0])) - qx, qh = int(std::lround(bottom_right[1])) - qy;
      fill_rect(x + qx * scale, y + qy * scale, qw * scale, qh * scale, c);
    }
  }
};

/// The PNG bytes of `rgb`, written atomically; errors name `caller`.
void encode_and_write(const char* caller, const std::string& path, const std::vector<std::uint8_t>& rgb, int width,
                      int height) {
  check(width > 0 && height > 0, "{}: '{}': the image size must be positive, got {}x{}", caller, path, width, height);
  const std::uint64_t expected = std::uint64_t(width) * std::uint64_t(height) * 3;
  check(rgb.size() == expected, "{}: '{}': a {}x{} RGB image needs {} bytes, got {}", caller, path, width, height,
        expected, rgb.size());
  check(expected <= std::uint64_t(INT_MAX), "{}: '{}': a {}x{} image is too large for the PNG encoder (at most {} bytes)",
        caller, path, width, height, INT_MAX);
  std::string encoded;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), std::size_t(size));
  };
  const int ok = stbi_write_png_to_func(append, &encoded, width, height, 3, rgb.data(), width * 3);
  check(ok != 0, "{}: '{}': encoding the {}x{} image as PNG failed", caller, path, width, height);
  write_file_atomically(caller, path, {encoded});
}

void check_side(const char* caller, const std::string& path, std::int64_t width, std::int64_t height) {
  check(width <= kMaxSide && height <= kMaxSide, "{}: '{}': the picture would be {}x{} pixels, more than {} per side",
        caller, path, width, height, kMaxSide);
  check(width * height <= kMaxPixels, "{}: '{}': the picture would be {}x{} pixels, more than {} in all", caller, path,
        width, height, kMaxPixels);
}

/// Texts are measured in int: one longer than a picture is wide cannot be drawn, and is refused first.
void check_text(const char* caller, const std::string& path, std::string_view text, std::string_view what) {
  check(std::int64_t(text.size()) <= kMaxSide, "{}: '{}': the {} is {} characters long, more than a picture of at "
        "most {} pixels can show", caller, path, what, text.size(), kMaxSide);
}

// ---- heatmap ----

/// matplotlib's "viridis" colour map (matplotlib/_cm_listed.py, by van der Walt and Smith) sampled at
/// 0, 1/16, ..., 1 and rounded to 8 bits; viridis() interpolates linearly between the samples.
constexpr std::array<Color, 17> kViridis{{{68, 1, 84},    {72, 24, 106},  {71, 45, 123},  {66, 64, 134},
                                          {59, 82, 139},  {51, 99, 141},  {44, 114, 142}, {38, 130, 142},
                                          {33, 145, 140}, {31, 160, 136}, {40, 174, 128}, {63, 188, 115},
                                          {94, 201, 98},  {132, 212, 75}, {173, 220, 48}, {216, 226, 25},
                                          {253, 231, 37}}};

Color viridis(double t) {
  const double position = std::clamp(t, 0.0, 1.0) * double(kViridis.size() - 1);
  const std::size_t i = std::min(std::size_t(position), kViridis.size() - 2);
  const double f = position - double(i);
  auto mix = [f](std::uint8_t a, std::uint8_t b) { return std::uint8_t(std::lround(a + (b - a) * f)); };
  const Color a = kViridis[i], b = kViridis[i + 1];
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

int widest(const std::vector<std::string>& texts) {
  int width = 0;
  for (const std::string& t : texts) width = std::max(width, text_width(t));
  return width;
}

}  // namespace

void save_png(const std::string& path, const std::vector<std::uint8_t>& rgb, int width, int height) {
  encode_and_write("save_png", path, rgb, width, height);
}

void save_heatmap_png(const std::string& path, const Tensor& matrix, HeatmapOptions options) {
  constexpr const char* kCaller = "save_heatmap_png";
  check(matrix.ndim() == 2, "{}: '{}': expected a 2-D matrix, got shape {}", kCaller, path, matrix.shape());
  const std::int64_t rows = matrix.size(0), cols = matrix.size(1);
  check(rows > 0 && cols > 0, "{}: '{}': the matrix is empty (shape {})", kCaller, path, matrix.shape());
  check(options.cell > 0, "{}: '{}': cell must be positive, got {}", kCaller, path, options.cell);
  check(options.row_labels.empty() || std::int64_t(options.row_labels.size()) == rows,
        "{}: '{}': {} row labels for {} rows", kCaller, path, options.row_labels.size(), rows);
  check(options.col_labels.empty() || std::int64_t(options.col_labels.size()) == cols,
        "{}: '{}': {} column labels for {} columns", kCaller, path, options.col_labels.size(), cols);

  check_text(kCaller, path, options.title, "title");
  for (const std::string& label : options.row_labels) check_text(kCaller, path, label, "row label");
  for (const std::string& label : options.col_labels) check_text(kCaller, path, label, "column label");
  // Before the values are read: a huge matrix stops here.
  check(rows <= kMaxSide && cols <= kMaxSide, "{}: '{}': a matrix of shape {} has more cells per side than a picture "
        "of at most {} pixels", kCaller, path, matrix.shape(), kMaxSide);
  const std::int64_t grid_width = cols * options.cell, grid_height = rows * options.cell;
  check_side(kCaller, path, grid_width, grid_height);

  const std::vector<double> values = matrix.to_vector<double>();
  for (std::size_t i = 0; i < values.size(); ++i)
    check(std::isfinite(values[i]), "{}: '{}': entry [{}, {}] is {}, not a finite number", kCaller, path,
          std::int64_t(i) / cols, std::int64_t(i) % cols, values[i]);
  const double vmin = options.vmin.value_or(*std::min_element(values.begin(), values.end()));
  const double vmax = options.vmax.value_or(*std::max_element(values.begin(), values.end()));
  check(std::isfinite(vmin) && std::isfinite(vmax) && vmin <= vmax,
        "{}: '{}': expected finite vmin <= vmax, got vmin = {}, vmax = {}", kCaller, path, vmin, vmax);

  // Layout, left to right: row labels, the grid, the colour bar, its value labels; top to bottom: the title,
  // column labels (in two staggered lines when one is wider than a cell), the grid.
  const int cell = options.cell;
  const bool staggered = widest(options.col_labels) > cell - 2;
  const int col_label_lines = options.col_labels.empty() ? 0 : staggered ? 2 : 1;
  const int title_height = options.title.empty() ? 0 : 2 * kLineHeight + kPad;
  // Wide enough for the row labels and for half of a column label wider than its cell.
  const int left = kPad + std::max(options.row_labels.empty() ? 0 : widest(options.row_labels) + kPad,
                                   (widest(options.col_labels) - cell) / 2);
  const int top = kPad + title_height + col_label_lines * kLineHeight;
  const int bar_x = left + int(grid_width) + 2 * kPad, bar_width = 12;
  const int bar_height = std::max(int(grid_height), 4 * kLineHeight);
  const std::string vmin_text = format_value(vmin), vmax_text = format_value(vmax);
  const int width = std::max(bar_x + bar_width + kPad + widest({vmin_text, vmax_text}) + kPad,
                             text_width(options.title, 2) + 2 * kPad);
  const int height = top + bar_height + kPad;
  check_side(kCaller, path, width, height);  // the labels and the title widen it

  Canvas canvas(width, height);
  canvas.text((width - text_width(options.title, 2)) / 2, kPad, options.title, kBlack, 2);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      // A constant matrix maps to the bottom of the colour map, as in matplotlib.
      const double t = vmax > vmin ? (values[std::size_t(r * cols + c)] - vmin) / (vmax - vmin) : 0.0;
      canvas.fill_rect(left + int(c) * cell, top + int(r) * cell, cell, cell, viridis(t));
    }
  for (std::size_t r = 0; r < options.row_labels.size(); ++r) {
    const std::string& label = options.row_labels[r];
    canvas.text(left - kPad - text_width(label), top + int(r) * cell + (cell - kGlyphHeight) / 2, label, kBlack);
  }
  for (std::size_t c = 0; c < options.col_labels.size(); ++c) {
    const std::string& label = options.col_labels[c];
    const int line = staggered && c % 2 == 1 ? 2 : 1;  // lines counted upwards from the grid
    canvas.text(left + int(c) * cell + (cell - text_width(label)) / 2, top - line * kLineHeight + 2, label, kBlack);
  }
  // The colour bar: vmax at the top, vmin at the bottom.
  for (int y = 0; y < bar_height; ++y)
    canvas.fill_rect(bar_x, top + y, bar_width, 1, viridis(1.0 - double(y) / double(bar_height - 1)));
  canvas.text(bar_x + bar_width + kPad / 2, top, vmax_text, kBlack);
  canvas.text(bar_x + bar_width + kPad / 2, top + bar_height - kGlyphHeight, vmin_text, kBlack);
  encode_and_write(kCaller, path, canvas.rgb, width, height);
}

// ---- line chart ----

namespace {

/// matplotlib's default colour cycle ("tab10").
constexpr std::array<Color, 10> kSeriesColors{{{31, 119, 180},
                                               {255, 127, 14},
                                               {44, 160, 44},
                                               {214, 39, 40},
                                               {148, 103, 189},
                                               {140, 86, 75},
                                               {227, 119, 194},
                                               {127, 127, 127},
                                               {188, 189, 34},
                                               {23, 190, 207}}};

/// Tick positions in [lo, hi] at a round step (1, 2 or 5 times a power of ten, at least min_step) that gives
/// about `target` ticks.
std::vector<double> nice_ticks(double lo, double hi, int target, double min_step = 0.0) {
  const double raw = std::max((hi - lo) / target, min_step);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10.0 * magnitude;
  for (double multiple : {1.0, 2.0, 5.0})
    if (raw <= multiple * magnitude) {
      step = multiple * magnitude;
      break;
    }
  std::vector<double> ticks;
  // Multiples of the step (not a running sum) so that 0 is exactly 0; adding +0 turns -0 into 0. Counted in
  // integers: past 2^53 a double k + 1 is k again. The callers' ranges give about `target` ticks; at most
  // 4 * target + 2 are kept whatever rounding does.
  if (!(step > 0.0) || !std::isfinite(step)) return ticks;  // a range of a few denormals: (hi - lo) / target is 0
  const double first = std::ceil(lo / step), last = std::floor(hi / step);
  if (!(last >= first)) return ticks;
  const auto count = std::int64_t(std::min(last - first + 1.0, 4.0 * target + 2.0));
  for (std::int64_t i = 0; i < count; ++i) ticks.push_back((first + double(i)) * step + 0.0);
  return ticks;
}

}  // namespace

void save_line_chart_png(const std::string& path, const std::vector<Series>& series, LineChartOptions options) {
  constexpr const char* kCaller = "save_line_chart_png";
  check(!series.empty(), "{}: '{}': no series to draw", kCaller, path);
  // Smaller pictures leave no room for the axes, tick labels and legend.
  check(options.width >= 200 && options.height >= 150, "{}: '{}': the chart must be at least 200x150 pixels, got {}x{}",
        kCaller, path, options.width, options.height);
  check_side(kCaller, path, options.width, options.height);
  check_text(kCaller, path, options.title, "title");
  check_text(kCaller, path, options.x_label, "x_label");
  check_text(kCaller, path, options.y_label, "y_label");
  check(std::int64_t(series.size()) * kLineHeight <= options.height,
        "{}: '{}': {} series do not fit in the legend of a chart {} pixels high", kCaller, path, series.size(),
        options.height);
  std::size_t longest = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    check_text(kCaller, path, s.name, "series name");
    check(!s.values.empty(), "{}: '{}': series '{}' has no values", kCaller, path, s.name);
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      const double v = s.values[i];
      check(std::isfinite(v), "{}: '{}': series '{}' value {} (x = {}) is {}, not a finite number", kCaller, path,
            s.name, i, i + 1, v);
      check(!options.log_y || v > 0, "{}: '{}': log_y needs values > 0, but series '{}' value {} (x = {}) is {}",
            kCaller, path, s.name, i, i + 1, v);
      const double y = options.log_y ? std::log10(v) : v;
      lo = std::min(lo, y), hi = std::max(hi, y);
    }
    longest = std::max(longest, s.values.size());
  }
  // The y range: the data plus 5% on either side; a flat line gets a range around it (a decade on log axes).
  // A range below a billionth of the values is flat too: its ticks would be indistinguishable numbers.
  const double data_lo = lo, data_hi = hi;
  if (hi - lo <= 1e-9 * std::max(std::abs(lo), std::abs(hi))) {
    const double half = options.log_y || lo == 0 ? 1.0 : std::abs(lo) * 0.5;
    lo -= half, hi += half;
  } else {
    const double margin = 0.05 * (hi - lo);
    lo -= margin, hi += margin;
  }
  check(std::isfinite(lo) && std::isfinite(hi) && std::isfinite(hi - lo),
        "{}: '{}': values from {} to {} span more than a double holds, with the axis' margins", kCaller, path,
        data_lo, data_hi);
  const double x_lo = 1.0, x_hi = double(std::max<std::size_t>(longest, 2));

  // y ticks in plot coordinates (log10 of the value on a log axis): there, powers of ten; within less than a
  // decade, round values placed logarithmically.
  std::vector<double> y_ticks = nice_ticks(lo, hi, 5, options.log_y ? 1.0 : 0.0);
  if (options.log_y && y_ticks.size() < 2) {
    y_ticks.clear();
    for (double v : nice_ticks(std::pow(10.0, lo), std::pow(10.0, hi), 5))
      if (v > 0) y_ticks.push_back(std::log10(v));
  }
  const std::vector<double> x_ticks = nice_ticks(x_lo, x_hi, 8, 1.0);
  std::vector<std::string> y_tick_texts;
  for (double t : y_ticks) y_tick_texts.push_back(format_value(options.log_y ? std::pow(10.0, t) : t));

  // The plot area; around it: title and y label above, tick labels left, tick labels and x label below.
  const int title_height = options.title.empty() ? 0 : 2 * kLineHeight + kPad;
  const int x0 = kPad + widest(y_tick_texts) + kPad, x1 = options.width - 2 * kPad;
  const int y0 = kPad + title_height + kLineHeight + kPad, y1 = options.height - (2 * kLineHeight + 2 * kPad);
  auto px = [&](double x) { return x0 + int(std::lround((x - x_lo) / (x_hi - x_lo) * (x1 - x0))); };
  auto py = [&](double y) { return y1 - int(std::lround((y - lo) / (hi - lo) * (y1 - y0))); };

  Canvas canvas(options.width, options.height);
  canvas.text((options.width - text_width(options.title, 2)) / 2, kPad, options.title, kBlack, 2);
  canvas.text(x0, y0 - kLineHeight - 1, options.y_label, kBlack);
  canvas.text((x0 + x1 - text_width(options.x_label)) / 2, y1 + kLineHeight + kPad, options.x_label, kBlack);
  for (std::size_t i = 0; i < y_ticks.size(); ++i) {
    const int y = py(y_ticks[i]);
    canvas.line(x0, y, x1, y, kGridGrey);
    canvas.line(x0 - 3, y, x0, y, kBlack);
    canvas.text(x0 - 4 - text_width(y_tick_texts[i]), y - kGlyphHeight / 2, y_tick_texts[i], kBlack);
  }
  for (double t : x_ticks) {
    const int x = px(t);
    const std::string label = fmt::format("{}", std::llround(t));
    canvas.line(x, y0, x, y1, kGridGrey);
    canvas.line(x, y1, x, y1 + 3, kBlack);
    canvas.text(x - text_width(label) / 2, y1 + 5, label, kBlack);
  }

  for (std::size_t k = 0; k < series.size(); ++k) {
    const Color color = kSeriesColors[k % kSeriesColors.size()];
    const std::vector<double>& v = series[k].values;
    auto point_y = [&](std::size_t i) { return py(options.log_y ? std::log10(v[i]) : v[i]); };
    if (v.size() == 1) canvas.fill_rect(px(1.0) - 2, point_y(0) - 2, 4, 4, color);  // a lone point: a dot
    for (std::size_t i = 1; i < v.size(); ++i)
      canvas.line(px(double(i)), point_y(i - 1), px(double(i + 1)), point_y(i), color, 2);
  }
  // The axes, drawn over the lines' ends.
  canvas.line(x0, y0, x0, y1, kBlack);
  canvas.line(x0, y1, x1, y1, kBlack);

  // The legend, in the right-hand corner away from where the lines end (top for falling losses, bottom for
  // rising accuracies): a short line in each series' colour and its name.
  std::vector<std::string> names;
  int ends_in_upper_half = 0;
  for (const Series& s : series) {
    names.push_back(s.name);
    const double end = options.log_y ? std::log10(s.values.back()) : s.values.back();
    ends_in_upper_half += end > (lo + hi) / 2 ? 1 : -1;
  }
  const int swatch = 16;
  const int legend_width = kPad + swatch + kPad + widest(names) + kPad;
  const int legend_height = int(series.size()) * kLineHeight + kPad;
  const int lx = x1 - legend_width - kPad;
  const int ly = ends_in_upper_half > 0 ? y1 - kPad - legend_height : y0 + kPad;
  canvas.fill_rect(lx, ly, legend_width, legend_height, kGrey);
  canvas.fill_rect(lx + 1, ly + 1, legend_width - 2, legend_height - 2, kWhite);
  for (std::size_t k = 0; k < series.size(); ++k) {
    const int row_y = ly + kPad / 2 + int(k) * kLineHeight + kLineHeight / 2;
    canvas.line(lx + kPad, row_y, lx + kPad + swatch, row_y, kSeriesColors[k % kSeriesColors.size()], 2);
    canvas.text(lx + 2 * kPad + swatch, row_y - kGlyphHeight / 2, series[k].name, kBlack);
  }
  encode_and_write(kCaller, path, canvas.rgb, options.width, options.height);
}

}  // namespace loom::io
