// The summary table, after keras/src/utils/summary_utils.py (print_summary) and the parts of rich it relies on:
// Table._calculate_column_widths with fixed-width columns, rich._ratio.ratio_reduce, rich._wrap.divide_line,
// Text.wrap (overflow "ellipsis") and the HEAVY_HEAD box. Text is handled as code points, one column each.
#include "models/summary.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "framework/tensor/error.hpp"

namespace loom::layers {

namespace {

enum class Justify { left, right };

struct Column {
  std::u32string header;
  Justify justify;
  int width;  // of the content, without the cell padding
};

std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const int length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (int k = 1; k < length && i + k < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += c;
    i += length;
  }
  return out;
}

std::string encode_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) {
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += {char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};
    } else if (c < 0x10000) {
      out += {char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
    } else {
      out += {char(0xF0 | (c >> 18)), char(0x80 | ((c >> 12) & 0x3F)), char(0x80 | ((c >> 6) & 0x3F)),
              char(0x80 | (c & 0x3F))};
    }
  }
  return out;
}

/// Python's str.isspace() beyond the control characters (which cells may not hold).
bool is_space(char32_t c) {
  return c == U' ' || c == U'\u0085' || c == U'\u00a0' || c == U'\u1680' || (c >= U'\u2000' && c <= U'\u200a') ||
         c == U'\u2028' || c == U'\u2029' || c == U'\u202f' || c == U'\u205f' || c == U'\u3000';
}

std::size_t trailing_spaces(const std::u32string& s) {
  std::size_t n = 0;
  while (n < s.size() && is_space(s[s.size() - 1 - n])) ++n;
  return n;
}

/// rich's divide_line without folding: where to break a line so that words fit `width` columns. A word is a run
/// of spaces, non-spaces and spaces (Python's r"\s*\S+\s*"); one too long for any line stays whole (cropped
/// later).
std::vector<std::size_t> break_offsets(const std::u32string& text, std::size_t width) {
  std::vector<std::size_t> breaks;
  std::size_t cell_offset = 0, position = 0;
  while (true) {
    std::size_t end = position;
    while (end < text.size() && is_space(text[end])) ++end;
    if (end == text.size()) break;  // no more non-space characters: no more words
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::size_t visible_end = end;
    while (end < text.size() && is_space(text[end])) ++end;
    const std::size_t start = position, word_length = visible_end - start, length = end - start;
    const bool fits = cell_offset <= width && width - cell_offset >= word_length;
    if (fits) {
      cell_offset += length;
    } else if (word_length > width) {
      if (start != 0) breaks.push_back(start);
      cell_offset = length;
    } else if (cell_offset != 0 && start != 0) {
      breaks.push_back(start);
      cell_offset = length;
    }
    position = end;
  }
  return breaks;
}

/// rich's Text.truncate with overflow "ellipsis": a line longer than `width` ends in "…".
void truncate(std::u32string& line, std::size_t width) {
  if (line.size() > width) line = line.substr(0, width - 1) + U"\u2026";
}

/// The lines of one cell, each exactly `width` columns: Text.wrap followed by Lines.justify.
std::vector<std::u32string> wrap_cell(const std::u32string& text, std::size_t width, Justify justify) {
  std::vector<std::u32string> lines;
  std::size_t from = 0;
  std::vector<std::size_t> cuts = break_offsets(text, width);
  cuts.push_back(text.size());
  for (std::size_t cut : cuts) {
    std::u32string line = text.substr(from, cut - from);
    from = cut;
    if (line.size() > width) line.resize(line.size() - std::min(trailing_spaces(line), line.size() - width));
    if (justify == Justify::left) {
      truncate(line, width);
      line.resize(width, U' ');
    } else {
      line.resize(line.size() - trailing_spaces(line));
      truncate(line, width);
      line.insert(0, width - line.size(), U' ');
    }
    lines.push_back(line);
  }
  return lines;
}

/// rich's ratio_reduce: takes `total` off `values`, shared by `ratios` (rounded half to even, as Python's
/// round), none taking more than its maximum.
std::vector<int> ratio_reduce(int total, std::vector<int> ratios, const std::vector<int>& maximums,
                              std::vector<int> values) {
  for (std::size_t i = 0; i < ratios.size(); ++i)
    if (maximums[i] == 0) ratios[i] = 0;
  int total_ratio = std::accumulate(ratios.begin(), ratios.end(), 0);
  int remaining = total;
  for (std::size_t i = 0; i < values.size() && total_ratio > 0; ++i) {
    if (ratios[i] == 0) continue;
    const int share = int(std::nearbyint(double(ratios[i]) * remaining / total_ratio));
    const int distributed = std::min(maximums[i], share);
    values[i] -= distributed;
    remaining -= distributed;
    total_ratio -= ratios[i];
  }
  return values;
}

struct BoxChars {
  std::string left, horizontal, cross, right;
};

std::string rule(const BoxChars& box, const std::vector<int>& cell_widths) {
  std::string line = box.left;
  for (std::size_t i = 0; i < cell_widths.size(); ++i) {
    if (i > 0) line += box.cross;
    for (int k = 0; k < cell_widths[i]; ++k) line += box.horizontal;
  }
  return line + box.right + "\n";
}

enum class Align { top, bottom };

/// One table row: every cell wrapped and padded by one space each side, shorter cells filled with blank lines
/// below (body rows) or above (the header row, which rich aligns to the bottom).
std::string row_lines(const std::vector<std::u32string>& cells, const std::vector<Column>& columns,
                      const std::string& vertical, Align align) {
  std::vector<std::vector<std::u32string>> wrapped;
  std::size_t height = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    wrapped.push_back(wrap_cell(cells[i], std::size_t(columns[i].width), columns[i].justify));
    height = std::max(height, wrapped.back().size());
  }
  std::string out;
  for (std::size_t line = 0; line < height; ++line) {
    out += vertical;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::size_t width = std::size_t(columns[i].width);
      out += ' ';
      const std::size_t blank_above = align == Align::bottom ? height - wrapped[i].size() : 0;
      const bool has_text = line >= blank_above && line - blank_above < wrapped[i].size();
      out += encode_utf8(has_text ? wrapped[i][line - blank_above] : std::u32string(width, U' '));
      out += ' ';
      out += vertical;
    }
    out += "\n";
  }
  return out;
}

/// Keras's column widths (int(position * line_length) - previous, at least 4), then rich fitting them into the
/// line: each column asks for its width plus 2 of padding, and the excess over the line less the borders is
/// taken off evenly.
std::vector<int> content_widths(int line_length, const std::vector<double>& positions) {
  check(line_length <= kMaxLineLength, "render_summary: line_length {} is more than {} columns", line_length,
        kMaxLineLength);
  std::vector<int> widths;
  int current = 0;
  for (double position : positions) {
    const int width = int(position * line_length) - current;
    check(width >= 4,
          "render_summary: line_length {} leaves a column {} wide (positions {}); at least 4 is needed "
          "(Keras: Insufficient console width to print summary)",
          line_length, width, fmt::join(positions, ", "));
    widths.push_back(width + 2);
    current += width;
  }
  const int borders = int(widths.size()) + 1;
  const int excess = std::accumulate(widths.begin(), widths.end(), 0) - (line_length - borders);
  if (excess > 0) widths = ratio_reduce(excess, std::vector<int>(widths.size(), 1), widths, widths);
  for (int& width : widths) {
    width -= 2;
    check(width >= 1, "render_summary: line_length {} leaves no room for a column's text", line_length);
  }
  return widths;
}

std::u32string cell_text(const std::string& text, const char* field) {
  for (unsigned char c : text)
    check(c >= 0x20 && c != 0x7f, "render_summary: the {} cell '{}' holds a control character; cells are one line",
          field, text);
  return decode_utf8(text);
}

std::string footer_line(const std::string& label, std::int64_t count, std::int64_t bytes) {
  return " " + label + " params: " + format_param_count(count) + " (" + format_bytes(bytes) + ")\n";
}

}  // namespace

std::string render_summary(const std::string& model_name, const std::vector<SummaryRow>& rows,
                           const SummaryTotals& totals, int line_length, bool connections) {
  check(totals.optimizer_params.has_value() == totals.optimizer_bytes.has_value(),
        "render_summary: optimizer_params and optimizer_bytes must be given together");
  check(totals.total == totals.trainable + totals.non_trainable + totals.optimizer_params.value_or(0),
        "render_summary: total params {} != trainable {} + non-trainable {} + optimizer {}", totals.total,
        totals.trainable, totals.non_trainable, totals.optimizer_params.value_or(0));
  // Keras's positions: three columns, or four for a Functional model's "Connected to".
  const std::vector<double> positions =
      connections ? std::vector<double>{0.3, 0.56, 0.74, 1.0} : std::vector<double>{0.45, 0.80, 1.0};
  const std::vector<int> widths = content_widths(line_length, positions);
  std::vector<Column> columns = {{U"Layer (type)", Justify::left, widths[0]},
                                 {U"Output Shape", Justify::left, widths[1]},
                                 {U"Param #", Justify::right, widths[2]}};
  if (connections) columns.push_back({U"Connected to", Justify::left, widths[3]});
  std::vector<int> cell_widths;
  std::vector<std::u32string> headers;
  for (const Column& column : columns) {
    cell_widths.push_back(column.width + 2);
    headers.push_back(column.header);
  }

  std::string out = "Model: \"" + model_name + "\"\n";
  out += rule({"┏", "━", "┳", "┓"}, cell_widths);
  out += row_lines(headers, columns, "┃", Align::bottom);
  out += rule({"┡", "━", "╇", "┩"}, cell_widths);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out += rule({"├", "─", "┼", "┤"}, cell_widths);
    std::vector<std::u32string> cells = {cell_text(rows[i].layer, "layer"),
                                         cell_text(rows[i].output_shape, "output shape"),
                                         cell_text(rows[i].params, "param #")};
    if (connections) cells.push_back(cell_text(rows[i].connected_to, "connected to"));
    out += row_lines(cells, columns, "│", Align::top);
  }
  out += rule({"└", "─", "┴", "┘"}, cell_widths);
  out += footer_line("Total", totals.total, totals.total_bytes);
  out += footer_line("Trainable", totals.trainable, totals.trainable_bytes);
  out += footer_line("Non-trainable", totals.non_trainable, totals.non_trainable_bytes);
  if (totals.optimizer_params) out += footer_line("Optimizer", *totals.optimizer_params, *totals.optimizer_bytes);
  return out;
}

std::string format_param_count(std::int64_t count) {
  const std::string digits = std::to_string(count);
  const std::size_t first = count < 0 ? 1 : 0;
  std::string out = digits.substr(0, first);
  for (std::size_t i = first; i < digits.size(); ++i) {
    if (i > first && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_bytes(std::int64_t bytes) {
  static const char* const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  double size = double(bytes);
  char buffer[64];
  for (const char* unit : units) {
    if (size / 1024 < 1) {
      std::snprintf(buffer, sizeof buffer, "%.2f %s", size, unit);
      return buffer;
    }
    size /= 1024;
  }
  // Keras divides once more before falling back to PB: 3 * 1024**6 bytes prints as "3.00 PB".
  std::snprintf(buffer, sizeof buffer, "%.2f PB", size);
  return buffer;
}

std::string format_output_shape(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += shape[i] < 0 ? "None" : std::to_string(shape[i]);
  }
  return out + ")";
}

int default_summary_line_length(int widest) {
  long columns = 0;
  if (const char* env = std::getenv("COLUMNS")) {
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(env, &end, 10);
    while (end && (*end == ' ' || *end == '\t' || *end == '\n')) ++end;
    if (errno == 0 && end != env && end && *end == '\0') columns = value;
  }
  if (columns <= 0) {
    winsize size{};
    columns = ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 ? size.ws_col : 80;
  }
  // A terminal narrower than every layout needs gets lines that wrap there, not an error.
  constexpr long kNarrowest = 40;
  return int(std::max(kNarrowest, std::min(long(widest), columns - 4)));
}

}  // namespace loom::layers
