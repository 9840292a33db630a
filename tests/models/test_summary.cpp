#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "framework/runtime/detail/scoped_environment.hpp"
#include "framework/tensor/error.hpp"
#include "layers/layers.hpp"
#include "models/models.hpp"
#include "models/summary.hpp"
#include "tests/models/text_fixtures.hpp"

using namespace loom;
using namespace loom::layers;
using namespace loom::testing;

namespace {

/// A case of tests/fixtures/summary_fixtures.txt: the rows and totals Keras computed for a real model, and the
/// text its model.summary() printed.
struct SummaryCase {
  std::string name, model_name;
  int line_length = 0;
  std::vector<SummaryRow> rows;
  SummaryTotals totals;
  std::string expected;
};

struct SummaryFixtures {
  std::vector<SummaryCase> cases;
  std::vector<std::pair<std::int64_t, std::string>> bytes, counts;  // Keras's formatting of these numbers
};

std::optional<std::int64_t> optional_integer(const std::string& field) {
  if (field == "-") return std::nullopt;
  return std::stoll(field);
}

SummaryFixtures read_fixtures() {
  SummaryFixtures f;
  for (const std::vector<std::string>& fields : read_text_fixture("summary_fixtures.txt")) {
    const std::string& kind = fields[0];
    INFO("line kind " << kind);
    if (kind == "bytes" || kind == "count") {
      REQUIRE(fields.size() == 3);
      (kind == "bytes" ? f.bytes : f.counts).emplace_back(std::stoll(fields[1]), fields[2]);
    } else if (kind == "case") {
      REQUIRE(fields.size() == 4);
      f.cases.push_back({fields[1], unescape_text(fields[2]), std::stoi(fields[3]), {}, {}, {}});
    } else if (kind == "row") {
      REQUIRE(fields.size() == 4);
      REQUIRE(!f.cases.empty());
      f.cases.back().rows.push_back({unescape_text(fields[1]), unescape_text(fields[2]), unescape_text(fields[3])});
    } else if (kind == "totals") {
      REQUIRE(fields.size() == 9);
      REQUIRE(!f.cases.empty());
      f.cases.back().totals = {std::stoll(fields[1]), std::stoll(fields[2]), std::stoll(fields[3]),
                               std::stoll(fields[4]), std::stoll(fields[5]), std::stoll(fields[6]),
                               optional_integer(fields[7]), optional_integer(fields[8])};
    } else {
      REQUIRE(kind == "expect");
      REQUIRE(fields.size() == 2);
      REQUIRE(!f.cases.empty());
      f.cases.back().expected = unescape_text(fields[1]);
    }
  }
  return f;
}

}  // namespace

TEST_CASE("render_summary reproduces Keras summary text for the same rows", "[summary]") {
  const SummaryFixtures fixtures = read_fixtures();
  REQUIRE(fixtures.cases.size() >= 20);
  for (const SummaryCase& c : fixtures.cases) {
    INFO("case " << c.name << "\n" << c.expected);
    CHECK(render_summary(c.model_name, c.rows, c.totals, c.line_length) == c.expected);
  }
}

TEST_CASE("format_param_count and format_bytes match Keras", "[summary]") {
  const SummaryFixtures fixtures = read_fixtures();
  REQUIRE(!fixtures.bytes.empty());
  REQUIRE(!fixtures.counts.empty());
  for (const auto& [bytes, text] : fixtures.bytes) CHECK(format_bytes(bytes) == text);
  for (const auto& [count, text] : fixtures.counts) CHECK(format_param_count(count) == text);
}

TEST_CASE("format_output_shape shows free dimensions as None", "[summary]") {
  CHECK(format_output_shape({-1, 64}) == "(None, 64)");
  CHECK(format_output_shape({-1, 10, -1}) == "(None, 10, None)");
  CHECK(format_output_shape({-1}) == "(None)");  // Keras joins the dimensions: no trailing comma
  CHECK(format_output_shape({3, 4}) == "(3, 4)");
  CHECK(format_output_shape({}) == "()");
}

TEST_CASE("default_summary_line_length follows COLUMNS like Keras", "[summary]") {
  {
    ScopedEnvironment columns("COLUMNS", "120");
    CHECK(default_summary_line_length() == 88);
  }
  {
    ScopedEnvironment columns("COLUMNS", "60");
    CHECK(default_summary_line_length() == 56);
  }
  {
    ScopedEnvironment columns("COLUMNS", " 70 ");  // Python's int() allows surrounding spaces
    CHECK(default_summary_line_length() == 66);
  }
  {
    ScopedEnvironment columns("COLUMNS", "wide");  // ignored: the terminal's width, else 80
    const int length = default_summary_line_length();
    CHECK(length <= 88);
    if (!isatty(1)) CHECK(length == 76);
  }
}

TEST_CASE("render_summary rejects narrow lines, control characters and inconsistent totals", "[summary]") {
  const std::vector<SummaryRow> rows = {{"dense (Dense)", "(None, 4)", "20"}};
  const SummaryTotals totals{.total = 20, .trainable = 20, .total_bytes = 80, .trainable_bytes = 80};
  CHECK_NOTHROW(render_summary("m", rows, totals, 16));
  CHECK_THROWS_AS(render_summary("m", rows, totals, 15), Error);
  CHECK_THROWS_AS(render_summary("m", {{"dense\n(Dense)", "(None, 4)", "20"}}, totals, 88), Error);
  SummaryTotals wrong = totals;
  wrong.total = 21;
  CHECK_THROWS_AS(render_summary("m", rows, wrong, 88), Error);
  SummaryTotals half_optimizer = totals;
  half_optimizer.optimizer_params = 0;
  CHECK_THROWS_AS(render_summary("m", rows, half_optimizer, 88), Error);
}

TEST_CASE("render_summary with no rows draws the header and the bottom rule", "[summary]") {
  // Checked against rich: an empty table goes straight from the header rule to the bottom rule.
  const std::string text = render_summary("empty", {}, {}, 20);
  CHECK(text ==
        "Model: \"empty\"\n"
        "┏━━━━━━━━┳━━━━━┳━━━┓\n"
        "┃ Layer  ┃ Ou… ┃ … ┃\n"
        "┃ (type) ┃ Sh… ┃ # ┃\n"
        "┡━━━━━━━━╇━━━━━╇━━━┩\n"
        "└────────┴─────┴───┘\n"
        " Total params: 0 (0.00 B)\n"
        " Trainable params: 0 (0.00 B)\n"
        " Non-trainable params: 0 (0.00 B)\n");
}

TEST_CASE("summary counts a built optimizer's variables as Keras does: iterations\\, learning_rate\\, slots",
          "[summary]") {
  const SummaryFixtures fixtures = read_fixtures();
  const auto keras = std::find_if(fixtures.cases.begin(), fixtures.cases.end(),
                                  [](const SummaryCase& c) { return c.name == "compiled_with_optimizer"; });
  REQUIRE(keras != fixtures.cases.end());
  // The footer lines ("Total params: 80 (320.00 B)", ..., "Optimizer params: 54 (216.00 B)").
  const auto footer = [](const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
      if (text.compare(start, 1, " ") == 0 && text.find("params:", start) < end)
        lines.push_back(text.substr(start, end - start));
    return lines;
  };
  REQUIRE(footer(keras->expected).size() == 4);
  auto model = Sequential({Input({3}), Dense(5), Dense(1)});  // the fixture's model
  model.compile({.optimizer = "adam", .loss = "mse"});
  CHECK(footer(model.summary_string()).size() == 3);  // no optimizer line before its first step
  model.train_on_batch(Tensor::randn({4, 3}, DType::f32, 1), Tensor::randn({4, 1}, DType::f32, 2));
  CHECK(footer(model.summary_string()) == footer(keras->expected));
}
