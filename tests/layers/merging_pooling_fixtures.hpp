#pragma once
// Reads the cases of tests/fixtures/merging_pooling_fixtures.txt (make_merging_pooling_fixtures.py; the format
// is described there) and compares a layer's output, and the Keras mask it carries, with Keras's.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "framework/ops/ops.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

namespace loom::testing {

/// The cases whose layer class (the case's first word) is `layer`.
inline std::vector<FixtureCase> merging_pooling_cases(const std::string& layer) {
  std::vector<FixtureCase> out;
  for (auto& c : read_fixture_cases("merging_pooling_fixtures.txt"))
    if (!c.words.empty() && c.words[0] == layer) out.push_back(c);
  REQUIRE(!out.empty());
  return out;
}

/// 0/1 values as a boolean mask.
inline Tensor bool_mask(const std::vector<double>& v, const Shape& shape) {
  return ops::greater(Tensor::from_vector(v, shape), Tensor::scalar(0.5, DType::f64));
}
inline Tensor fixture_mask(const FixtureArray& a) { return bool_mask(a.values, a.shape); }

/// The case's inputs x0, x1, ... in `dtype`, each carrying its Keras mask m<i> when the case has one.
inline std::vector<Tensor> fixture_inputs(const FixtureCase& c, DType dtype) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; c.has(fmt::format("x{}", i)); ++i) {
    Tensor x = c.array(fmt::format("x{}", i)).tensor(dtype);
    const std::string m = fmt::format("m{}", i);
    out.push_back(c.has(m) ? x.with_keras_mask(fixture_mask(c.array(m))) : x);
  }
  REQUIRE(!out.empty());
  return out;
}

/// The case's comma-separated integer list option ("1,2").
inline std::vector<std::int64_t> int_list_option(const FixtureCase& c, const std::string& key) {
  std::vector<std::int64_t> out;
  std::istringstream in(c.option(key));
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

/// y against the case's y (float64 to 1e-12, float32 to 1e-5), and its Keras mask against y_mask (> 0.5, so a
/// numeric mask that Keras passes on compares as the boolean loom passes on), or none when out_mask=0.
inline void check_fixture_output(const FixtureCase& c, const Tensor& y) {
  INFO("case " << c.name << " in " << fmt::format("{}", y.dtype()));
  const double tol = y.dtype() == DType::f64 ? 1e-12 : 1e-5;
  CHECK(y.shape() == c.array("y").shape);
  check_close(values(y), c.array("y").values, tol, tol);
  if (c.option("out_mask") == "1") {
    REQUIRE(y.keras_mask().defined());
    CHECK(y.keras_mask().shape() == c.array("y_mask").shape);
    CHECK(values(y.keras_mask()) == values(fixture_mask(c.array("y_mask"))));
  } else {
    CHECK_FALSE(y.keras_mask().defined());
  }
}

}  // namespace loom::testing
