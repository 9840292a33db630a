#pragma once
// The bad-input batteries: tables of calls that must be rejected with a loom::Error whose message names the
// op or layer and the offending shapes. Header-only; include after <catch2/catch.hpp>.
//
//   run_bad_inputs("matmul", {
//       {"inner dimensions differ", [] { ops::matmul(a23, a45); }, {"matmul", "[2, 3]", "[4, 5]"}},
//   });
#include <catch2/catch.hpp>

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "framework/tensor/error.hpp"

namespace loom::testing {

/// One bad input: what is wrong, the call that must throw, and the texts its message must contain (the op or
/// layer name first, then the shapes or values at fault).
struct BadInput {
  std::string description;
  std::function<void()> call;
  std::vector<std::string> expected;
};

/// What happened when a bad input was tried; empty when it was rejected as it must be.
inline std::string bad_input_failure(const BadInput& bad) {
  try {
    bad.call();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& text : bad.expected)
      if (message.find(text) == std::string::npos) return "the message lacks \"" + text + "\": " + message;
    return {};
  } catch (const std::exception& e) {
    return std::string("threw a non-loom exception: ") + e.what();
  } catch (...) {
    return "threw something that is not a std::exception";
  }
  return "did not throw";
}

/// Tries every case of a family; each must throw loom::Error with every expected text in its message.
/// Returns the number of cases, which the battery reports (run with -s to see them).
inline std::size_t run_bad_inputs(const std::string& family, const std::vector<BadInput>& cases) {
  for (const auto& bad : cases) {
    const std::string failure = bad_input_failure(bad);
    INFO(family << ": " << bad.description << ": " << failure);
    CHECK(failure.empty());
  }
  SUCCEED(family << ": " << cases.size() << " bad inputs rejected");
  return cases.size();
}

}  // namespace loom::testing
