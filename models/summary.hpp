#pragma once
// The text of Keras's model.summary(): a title, a table of layers drawn the way rich draws it (heavy-head box,
// a line between rows, long cells word-wrapped inside their column) and the parameter totals:
//
//   Model: "sequential"
//   ┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┓
//   ┃ Layer (type)                         ┃ Output Shape                ┃         Param # ┃
//   ┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━┩
//   │ dense (Dense)                        │ (None, 64)                  │          50,240 │
//   ├──────────────────────────────────────┼─────────────────────────────┼─────────────────┤
//   │ batch_normalization                  │ (None, 64)                  │             256 │
//   │ (BatchNormalization)                 │                             │                 │
//   └──────────────────────────────────────┴─────────────────────────────┴─────────────────┘
//    Total params: 50,496 (197.25 KB)
//    Trainable params: 50,368 (196.75 KB)
//    Non-trainable params: 128 (512.00 B)
//
// Plain text only: Keras's colours and bold come from rich's styling, which rich drops when the output is not a
// terminal (and always when Keras captures the summary for a print_fn); this is that text.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/tensor/shape.hpp"

namespace loom::layers {

/// One row of the table, already formatted.
struct SummaryRow {
  std::string layer;         // "dense (Dense)"
  std::string output_shape;  // "(None, 64)", or "?" when unknown
  std::string params;        // "50,240", or "0 (unbuilt)"
  std::string connected_to = {};  // "embedding[0][0], embedding[0][0]" (Functional models)
};

/// The footer's counts and sizes in bytes. total = trainable + non_trainable + optimizer_params, as in Keras;
/// the optimizer line is printed only when the optimizer is built (both optional fields set).
struct SummaryTotals {
  std::int64_t total = 0, trainable = 0, non_trainable = 0;
  std::int64_t total_bytes = 0, trainable_bytes = 0, non_trainable_bytes = 0;
  std::optional<std::int64_t> optimizer_params = std::nullopt, optimizer_bytes = std::nullopt;
};

/// The whole summary, each line ending in "\n", for a table `line_length` columns wide (Keras's layout of three
/// columns at 45% / 80% / 100% of it; with `connections`, a fourth, "Connected to", at 30% / 56% / 74% / 100%).
/// Cells are single-line text; a character counts one column.
/// Throws loom::Error when a column would be narrower than 4 (Keras's "Insufficient console width"), the line
/// is longer than kMaxLineLength or a cell holds a control character.
inline constexpr int kMaxLineLength = 10'000;
std::string render_summary(const std::string& model_name, const std::vector<SummaryRow>& rows,
                           const SummaryTotals& totals, int line_length = 88, bool connections = false);

/// Keras's f"{count:,}": "50,240".
std::string format_param_count(std::int64_t count);
/// Keras's readable_memory_size: "199.79 KB" (steps of 1024, B to PB, two decimals).
std::string format_bytes(std::int64_t bytes);
/// "(None, 64)": each dimension, with a free one (negative, as the batch dimension -1) shown as None.
std::string format_output_shape(const Shape& shape);
/// Keras's default width: min(widest, terminal columns - 4), the columns taken from $COLUMNS, else from the
/// terminal on stdout, else 80 (so 76 when stdout is not a terminal), and at least 40, which every layout fits.
/// Keras's widest: 88, or 108 for a table with "Connected to".
int default_summary_line_length(int widest = 88);

}  // namespace loom::layers
