#pragma once
// loom::Error and the check helper every op uses to reject bad input with a readable message.
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom {

/// The one exception type loom throws for bad input. Messages name the op or layer, the shapes involved and
/// what was expected, e.g. "matmul: inner dimensions differ: [2, 3] @ [4, 5] (3 != 4)".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Throws loom::Error with a fmt-formatted message when `condition` is false. The arguments are evaluated
/// whether or not it fails: each must be valid when the condition holds (no `*optional` it guards).
template <class... Args>
inline void check(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace loom
