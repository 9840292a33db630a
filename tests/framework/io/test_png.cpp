#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "framework/io/png.hpp"
#include "tests/temp_files.hpp"

// The reader is only needed here, to look at what was written; static, so its symbols stay in this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

using namespace loom;
using namespace loom::testing;
namespace fs = std::filesystem;

namespace {

struct Rgb {
  int r, g, b;
  bool operator==(const Rgb&) const = default;
};

// Reference colours: matplotlib.colormaps["viridis"](t)[:3] * 255, rounded, for t = 0, 0.5, 1; and the first
// two colours of matplotlib's default cycle (tab10), which the chart's first two series use.
constexpr Rgb kViridisMin{68, 1, 84}, kViridisMid{33, 145, 140}, kViridisMax{253, 231, 37};
constexpr Rgb kBlue{31, 119, 180}, kOrange{255, 127, 14};

/// A PNG read back with stb_image, as 8-bit RGB.
struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;

  explicit Image(const std::string& path) {
    int channels = 0;
    stbi_uc* data = stbi_load(path.c_str(), &width, &height, &channels, 3);
    REQUIRE(data != nullptr);
    rgb.assign(data, data + std::size_t(width) * std::size_t(height) * 3);
    stbi_image_free(data);
  }
  Rgb at(int x, int y) const {
    const std::uint8_t* p = &rgb[(std::size_t(y) * std::size_t(width) + std::size_t(x)) * 3];
    return {p[0], p[1], p[2]};
  }
  /// The top-left corner of the first size x size square (in row-major order) filled with `color`.
  std::optional<std::pair<int, int>> find_square(Rgb color, int size) const {
    for (int y = 0; y + size <= height; ++y)
      for (int x = 0; x + size <= width; ++x) {
        bool filled = true;
        for (int dy = 0; dy < size && filled; ++dy)
          for (int dx = 0; dx < size && filled; ++dx) filled = at(x + dx, y + dy) == color;
        if (filled) return std::pair{x, y};
      }
    return std::nullopt;
  }
  /// The mean row of the pixels of `color` in column x (-1 if there are none).
  double mean_row(int x, Rgb color) const {
    double sum = 0;
    int count = 0;
    for (int y = 0; y < height; ++y)
      if (at(x, y) == color) sum += y, ++count;
    return count > 0 ? sum / count : -1.0;
  }
};

}  // namespace

TEST_CASE("save_png round trip is byte exact", "[png]") {
  TempDir dir("png");
  const int width = 3, height = 2;
  const std::vector<std::uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 1, 2, 3, 128, 64, 32, 250, 251, 252};
  io::save_png(dir.file("small.png"), rgb, width, height);
  const Image image(dir.file("small.png"));
  CHECK(image.width == width);
  CHECK(image.height == height);
  CHECK(image.rgb == rgb);
}

TEST_CASE("save_png rejects wrong sizes and leaves no file", "[png]") {
  TempDir dir("png");
  const std::string path = dir.file("bad.png");
  const std::vector<std::uint8_t> rgb(2 * 2 * 3, 0);
  REQUIRE_THROWS_WITH(io::save_png(path, rgb, 3, 2),
                      Catch::Contains("save_png") && Catch::Contains("3x2") && Catch::Contains("18 bytes, got 12") &&
                          Catch::Contains("bad.png"));
  REQUIRE_THROWS_WITH(io::save_png(path, {}, 0, 2), Catch::Contains("save_png") && Catch::Contains("0x2"));
  REQUIRE_THROWS_WITH(io::save_png(path, rgb, -2, -2), Catch::Contains("save_png") && Catch::Contains("-2x-2"));
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("save_png into a missing folder throws and leaves no file", "[png]") {
  TempDir dir("png");
  const std::string path = dir.file("missing/image.png");
  REQUIRE_THROWS_WITH(io::save_png(path, std::vector<std::uint8_t>(3, 0), 1, 1),
                      Catch::Contains("save_png") && Catch::Contains("missing/image.png"));
  CHECK_FALSE(fs::exists(dir.path / "missing"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({2, 2})), Catch::Contains("save_heatmap_png"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {1.0, 0.5}}}), Catch::Contains("save_line_chart_png"));
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("save_heatmap_png maps the max to viridis yellow and the min to purple", "[png]") {
  TempDir dir("png");
  const int cell = 10;
  // The max 4 at [0, 2], the min 0 at [1, 0], the midpoint 2 at [0, 1].
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor matrix = Tensor::from_vector(std::vector<double>{0.5, 2, 4, 0, 1, 3}, Shape{2, 3}).to(dtype);
    io::save_heatmap_png(dir.file("heatmap.png"), matrix, {.cell = cell});
    const Image image(dir.file("heatmap.png"));
    CHECK(image.width > 3 * cell + 12);  // the grid and the colour bar
    CHECK(image.height >= 2 * cell);
    const auto max_cell = image.find_square(kViridisMax, cell);
    REQUIRE(max_cell.has_value());
    const auto [x, y] = *max_cell;
    CHECK(image.find_square(kViridisMin, cell) == std::pair{x - 2 * cell, y + cell});
    CHECK(image.find_square(kViridisMid, cell) == std::pair{x - cell, y});
  }
}

TEST_CASE("save_heatmap_png clamps to the given vmin and vmax", "[png]") {
  TempDir dir("png");
  // 4 is the middle of [0, 8]; 9 is above vmax.
  io::save_heatmap_png(dir.file("heatmap.png"), Tensor::from_vector(std::vector<float>{4, 9}, Shape{1, 2}),
                       {.cell = 12, .vmin = 0.0, .vmax = 8.0});
  const Image image(dir.file("heatmap.png"));
  const auto mid = image.find_square(kViridisMid, 12);
  REQUIRE(mid.has_value());
  CHECK(image.find_square(kViridisMax, 12) == std::pair{mid->first + 12, mid->second});
}

TEST_CASE("save_heatmap_png makes room for labels and a title", "[png]") {
  TempDir dir("png");
  const Tensor matrix = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, Shape{2, 2});
  io::save_heatmap_png(dir.file("plain.png"), matrix);
  io::save_heatmap_png(dir.file("labelled.png"), matrix,
                       {.row_labels = {"query one", "q2"}, .col_labels = {"k1", "key two"}, .title = "Attention"});
  const Image plain(dir.file("plain.png")), labelled(dir.file("labelled.png"));
  CHECK(labelled.width > plain.width);
  CHECK(labelled.height > plain.height + 2 * 12);  // the title and two staggered lines of column labels
  // Both grids are drawn whole: the max cell is yellow in each.
  CHECK(plain.find_square(kViridisMax, 16).has_value());
  CHECK(labelled.find_square(kViridisMax, 16).has_value());
}

TEST_CASE("save_heatmap_png rejects bad input", "[png]") {
  TempDir dir("png");
  const std::string path = dir.file("bad.png");
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({2, 2, 2})),
                      Catch::Contains("save_heatmap_png") && Catch::Contains("2-D") && Catch::Contains("[2, 2, 2]"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({4})), Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({0, 3})), Catch::Contains("empty"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::from_vector(std::vector<double>{1, 2, nan, 4}, Shape{2, 2})),
                      Catch::Contains("entry [1, 0]") && Catch::Contains("nan"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({2, 2}), {.row_labels = {"a"}}),
                      Catch::Contains("1 row labels for 2 rows"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({2, 2}), {.col_labels = {"a", "b", "c"}}),
                      Catch::Contains("3 column labels for 2 columns"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({2, 2}), {.cell = 0}), Catch::Contains("cell"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::zeros({2, 2}), {.vmin = 1.0, .vmax = 0.0}),
                      Catch::Contains("vmin = 1, vmax = 0"));
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("save_line_chart_png draws each series in its own colour", "[png]") {
  TempDir dir("png");
  // Rising and falling lines that cross in the middle: left of it "rising" is below "falling", right of it above.
  io::save_line_chart_png(dir.file("chart.png"), {{"rising", {1, 2, 3, 4}}, {"falling", {4, 3, 2, 1}}},
                          {.title = "two lines"});
  const Image image(dir.file("chart.png"));
  REQUIRE(image.width == 640);
  REQUIRE(image.height == 400);
  const int left = image.width / 4, right = 3 * image.width / 5;  // clear of the legend in the top-right corner
  const double rising_left = image.mean_row(left, kBlue), falling_left = image.mean_row(left, kOrange);
  const double rising_right = image.mean_row(right, kBlue), falling_right = image.mean_row(right, kOrange);
  REQUIRE(rising_left >= 0);
  REQUIRE(falling_left >= 0);
  REQUIRE(rising_right >= 0);
  REQUIRE(falling_right >= 0);
  CHECK(rising_left > falling_left + 20);  // rows count downwards
  CHECK(rising_right < falling_right - 20);
  // The two lines are mirror images about the middle row of the plot.
  CHECK(std::abs((rising_left + falling_left) - (rising_right + falling_right)) < 4);
}

TEST_CASE("save_line_chart_png draws a logarithmic y axis", "[png]") {
  TempDir dir("png");
  // 1, 10, 100, 1000 are evenly spaced on a log axis: the line is straight, so its row falls by equal steps.
  io::save_line_chart_png(dir.file("log.png"), {{"loss", {1000, 100, 10, 1}}}, {.width = 300, .height = 200, .log_y = true});
  const Image image(dir.file("log.png"));
  REQUIRE(image.width == 300);
  REQUIRE(image.height == 200);
  std::vector<double> rows;
  for (int x : {80, 120, 160}) rows.push_back(image.mean_row(x, kBlue));
  REQUIRE(rows[0] >= 0);
  CHECK(rows[0] < rows[1]);
  CHECK(std::abs((rows[1] - rows[0]) - (rows[2] - rows[1])) < 2);
}

TEST_CASE("save_line_chart_png rejects bad input", "[png]") {
  TempDir dir("png");
  const std::string path = dir.file("bad.png");
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {}), Catch::Contains("save_line_chart_png") && Catch::Contains("no series"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {1.0}}, {"val_loss", {}}}),
                      Catch::Contains("'val_loss' has no values"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {1.0, inf}}}),
                      Catch::Contains("'loss' value 1 (x = 2) is inf"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {1.0, 0.0}}}, {.log_y = true}),
                      Catch::Contains("log_y") && Catch::Contains("value 1 (x = 2) is 0"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {-1.0}}}, {.log_y = true}), Catch::Contains("log_y"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {1.0}}}, {.width = 100, .height = 50}),
                      Catch::Contains("100x50"));
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("save_line_chart_png ends on converged and huge values: a flat line, few ticks", "[png]") {
  TempDir dir("png");
  // Ranges far below the values' spacing of ticks once made tick loops that never advanced.
  for (const std::vector<double>& values : std::vector<std::vector<double>>{
           {0.5, 0.5000000000000001}, {1e17, 1e17 + 16}, {1e300, 1.0000000000001e300}, {-1e-300, 1e-300},
           {1.0, 1.0 + 1e-10}, {0.0, 5e-324}}) {
    INFO("values " << values[0] << ", " << values[1]);
    io::save_line_chart_png(dir.file("flat.png"), {{"loss", values}});
    const Image image(dir.file("flat.png"));
    CHECK(image.width == 640);
  }
  io::save_line_chart_png(dir.file("log.png"), {{"loss", {0.5, 0.5000000000000001}}}, {.log_y = true});
  for (const std::vector<double>& values : std::vector<std::vector<double>>{{1e308, -1e308}, {1.7e308, 1.7e308}})
    CHECK_THROWS_WITH(io::save_line_chart_png(dir.file("wide.png"), {{"loss", values}}),
                      Catch::Contains("span more than a double holds"));
}

TEST_CASE("heatmap and chart texts and sizes are bounded before any drawing", "[png]") {
  TempDir dir("png");
  const std::string path = dir.file("big.png");
  const Tensor m = Tensor::ones({2, 2});
  const std::string long_label(1'000'000, 'x');
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, m, {.row_labels = {long_label, "b"}}),
                      Catch::Contains("save_heatmap_png") && Catch::Contains("row label is 1000000 characters"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, m, {.col_labels = {"a", long_label}}),
                      Catch::Contains("column label"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, m, {.title = long_label}), Catch::Contains("title"));
  // Labels short enough to measure but too wide for a picture: refused by the picture's final size.
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, m, {.row_labels = {std::string(20'000, 'x'), "b"}}),
                      Catch::Contains("pixels, more than 30000 per side"));
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, m, {.cell = 10'000}), Catch::Contains("more than 50000000 in all"));
  // A matrix of 2^62 columns (a broadcast view) stops before a value is read.
  REQUIRE_THROWS_WITH(io::save_heatmap_png(path, Tensor::ones({1, 1}).broadcast_to({1, std::int64_t(1) << 62})),
                      Catch::Contains("more cells per side"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{long_label, {1.0}}}), Catch::Contains("series name"));
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, {{"loss", {1.0}}}, {.x_label = long_label}),
                      Catch::Contains("x_label"));
  std::vector<io::Series> many(40, io::Series{"s", {1.0}});
  REQUIRE_THROWS_WITH(io::save_line_chart_png(path, many, {.width = 300, .height = 200}),
                      Catch::Contains("40 series do not fit"));
  CHECK_FALSE(fs::exists(path));
}
