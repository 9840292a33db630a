#pragma once
// Reads the tab-separated text fixtures written by tests/fixtures/make_progbar_fixtures.py: one item per line,
// fields separated by TAB, text fields with control bytes and the backslash escaped as \xNN. Lines starting
// with '#' are comments. Include after <catch2/catch.hpp>.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace loom::testing {

/// Undoes the fixture escaping: "\x1b[1m" -> ESC "[1m".
inline std::string unescape_text(const std::string& escaped) {
  std::string out;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '\\') {
      REQUIRE(i + 3 < escaped.size());  // "\xNN" needs three more characters
      REQUIRE(escaped[i + 1] == 'x');
      out += char(std::stoi(escaped.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += escaped[i];
    }
  }
  return out;
}

/// The fixture escaping, so that a failed comparison prints control characters visibly.
inline std::string escape_text(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char code[5];
      std::snprintf(code, sizeof code, "\\x%02x", c);
      out += code;
    } else {
      out += char(c);
    }
  }
  return out;
}

/// The fields of every non-comment line of tests/fixtures/<file_name>.
inline std::vector<std::vector<std::string>> read_text_fixture(const std::string& file_name) {
  std::ifstream file(std::string(LOOM_FIXTURES_DIR) + "/" + file_name);
  INFO("fixture file " << file_name);
  REQUIRE(file.good());
  std::vector<std::vector<std::string>> lines;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::size_t from = 0;
    for (std::size_t tab; (tab = line.find('\t', from)) != std::string::npos; from = tab + 1)
      fields.push_back(line.substr(from, tab - from));
    fields.push_back(line.substr(from));
    lines.push_back(fields);
  }
  return lines;
}

}  // namespace loom::testing
