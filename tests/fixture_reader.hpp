#pragma once
// Reads the plain-text reference fixtures under tests/fixtures/ written by the make_*_fixtures.py scripts:
//
//   # comment
//   case <name> <word>... <key>=<value>...       starts a case: words are positional, key=value pairs options
//   <array> <rank> <dims...> <values...>          a row-major array of the current case
//   <key> <value>                                 a scalar of the current case, kept with its options
//
// Include after <catch2/catch.hpp>.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::testing {

struct FixtureArray {
  Shape shape;
  std::vector<double> values;
  /// The values as a tensor of `dtype` (float64 by default, int64 for labels).
  Tensor tensor(DType dtype = DType::f64) const { return Tensor::from_vector(values, shape).to(dtype); }
};

struct FixtureCase {
  std::string name;
  std::vector<std::string> words;
  std::map<std::string, std::string> options;
  std::map<std::string, FixtureArray> arrays;
  std::vector<std::string> array_names;  // in file order: some fixtures list weights in their layer's order

  bool has(const std::string& array) const { return arrays.count(array) != 0; }
  const FixtureArray& array(const std::string& key) const {
    INFO("case " << name << ", array " << key);
    REQUIRE(has(key));
    return arrays.at(key);
  }
  const std::string& option(const std::string& key) const {
    INFO("case " << name << ", option " << key);
    REQUIRE(options.count(key) != 0);
    return options.at(key);
  }
  std::string option_or(const std::string& key, const std::string& fallback) const {
    return options.count(key) ? options.at(key) : fallback;
  }
};

/// All cases of tests/fixtures/<file>, in file order.
inline std::vector<FixtureCase> read_fixture_cases(const std::string& file_name) {
  std::ifstream file(std::string(LOOM_FIXTURES_DIR) + "/" + file_name);
  INFO("fixture file " << file_name);
  REQUIRE(file.good());
  std::vector<FixtureCase> cases;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      FixtureCase c;
      in >> c.name;
      for (std::string token; in >> token;) {
        const auto eq = token.find('=');
        if (eq == std::string::npos) c.words.push_back(token);
        else c.options[token.substr(0, eq)] = token.substr(eq + 1);
      }
      cases.push_back(c);
      continue;
    }
    REQUIRE(!cases.empty());
    std::string first;
    in >> first;
    // An array has a rank and at least one dimension or value after it, so a lone word is a scalar.
    if ((in >> std::ws).eof()) {
      REQUIRE(!first.empty());
      cases.back().options[key] = first;
      continue;
    }
    FixtureArray a;
    a.shape.resize(std::stoull(first));
    for (auto& d : a.shape) in >> d;
    for (double v; in >> v;) a.values.push_back(v);
    REQUIRE(std::int64_t(a.values.size()) == numel(a.shape));
    cases.back().arrays[key] = a;
    cases.back().array_names.push_back(key);
  }
  return cases;
}

}  // namespace loom::testing
