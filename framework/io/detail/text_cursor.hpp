#pragma once
// TextCursor: a read position in a file header's text, the common ground of the strict hand-written header
// parsers of the file readers (.npy's Python literal, .safetensors's JSON). Each parser derives from it and
// adds its grammar and its own error messages.
#include <cstddef>
#include <string_view>

namespace loom::io {

class TextCursor {
 protected:
  explicit TextCursor(std::string_view text) : text_(text) {}

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  /// Skips JSON's whitespace (space, tab, newline, carriage return), which is also what NumPy writes.
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }
  /// Moves past `c` if it comes next.
  bool consume(char c) {
    if (at_end() || peek() != c) return false;
    ++pos_;
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace loom::io
