#pragma once
// Symbolic tensors (Keras's KerasTensor) and the graph nodes that make them: what the Functional API records.
//
//   Tensor x = graph::input({-1, 12}, DType::i64, "tokens");   // users write layers::Input({12}, {...})
//   Tensor y = ops::relu(ops::cast(x, DType::f32));             // two op nodes; y is symbolic, shape [-1, 12]
//
// A symbolic tensor has a shape (-1 where the size is known only when data comes: the batch, free axes) and a
// dtype, but no data: reading its elements is an error. An op or layer called on one records a Node that
// replays the call on real tensors, and learns its outputs' shapes and dtypes by running the call on small
// stand-in inputs (every -1 set to 2, then to 3: the sizes that differ between the two runs are -1 in the
// output), so a shape error shows when the graph is built, with the op's own message.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::graph {

/// What a node computes: the values of its inputs (in the order of Node::inputs; the constants among them
/// as recorded) and the call's training flag, to the values of its outputs.
using NodeFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, bool training)>;

/// An argument of a call that is not a tensor (an op's axis, a layer call's flag), kept by its Keras name so
/// that a saved graph can write it: none, a flag, an integer, a number, a string or a list of integers.
using Attribute = std::variant<std::monostate, bool, std::int64_t, double, std::string, std::vector<std::int64_t>>;
using Attributes = std::vector<std::pair<std::string, Attribute>>;

/// One call of an operation (a layer, an op, or an Input) on symbolic tensors.
struct Node {
  /// The operation's name ("dense_1", "add") and Keras class name ("Dense", "Add").
  std::string name;
  std::string class_name;
  /// The call's tensor arguments: symbolic ones (the graph's edges) and constants.
  std::vector<Tensor> inputs;
  NodeFunction function;
  /// Identifies the operation (a layer called twice makes two nodes with one operation) and keeps it alive
  /// (opaque here: the layers floor puts its layer handle in); null for ops, each call of which is its own.
  std::shared_ptr<void> operation;
  /// Which call of the operation this is (0, 1, ...): Keras's node_index, shown by summaries.
  std::size_t node_index = 0;
  /// The outputs' shapes (-1 where free) and dtypes, and whether each carries a Keras mask.
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  std::vector<bool> output_masked;
  /// The call's other arguments, as recorded (models/saving writes them into Keras's config).
  Attributes attributes;
  bool is_input() const { return !function; }
};

/// An output's shape (-1 where free) and dtype, when a caller knows them without a run (Keras's
/// compute_output_spec); such an output carries no Keras mask.
struct OutputSpec {
  Shape shape;
  DType dtype = DType::f32;
};

/// Where a symbolic tensor comes from: output `index` of `node`.
struct Origin {
  std::shared_ptr<const Node> node;
  std::size_t index = 0;
};

bool is_symbolic(const Tensor& t);
template <class... Tensors>
bool any_symbolic(const Tensors&... tensors) {
  return (is_symbolic(tensors) || ...);
}
bool any_symbolic(const std::vector<Tensor>& tensors);

/// The node that made a symbolic tensor, and which of its outputs the tensor is.
const Origin& origin(const Tensor& t);

/// A graph input: a symbolic tensor of this shape (batch dimension included, -1 where free) made by an Input
/// node named `name`; `operation` identifies the layer that stands for it.
Tensor input(const Shape& shape, DType dtype, const std::string& name, const std::string& class_name = "InputLayer",
             std::shared_ptr<void> operation = nullptr);

/// Records `function` applied to `inputs` (at least one symbolic) as a node, after running it on stand-ins to
/// learn its outputs; returns the symbolic outputs. Errors of the stand-in run propagate as they are. Given
/// `outputs`, those are the outputs and nothing runs: for calls whose output sizes the stand-ins cannot
/// reveal (a free size seen through a stride, or a window longer than a stand-in).
std::vector<Tensor> record(const std::string& name, const std::string& class_name, const std::vector<Tensor>& inputs,
                           NodeFunction function, std::shared_ptr<void> operation = nullptr,
                           std::size_t node_index = 0, Attributes attributes = {},
                           std::optional<std::vector<OutputSpec>> outputs = std::nullopt);

/// record() for an op with one output, replayed as `function(values)`; the node is named as keras.ops names
/// the op ("mul" records "multiply", then "multiply_1", ...). `attributes` are the op's other arguments by
/// keras.ops's names ({"axis", -1}).
Tensor record_op(const char* op, const std::vector<Tensor>& inputs,
                 std::function<Tensor(const std::vector<Tensor>& values)> function, Attributes attributes = {});

/// Keras's class name for a snake_case name: "multi_head_attention" -> "MultiHeadAttention".
std::string camel_case(std::string_view snake);

/// Keras's auto-naming, shared by layers and ops: the first `base` gets `base`, the next `base_1`, ...
/// (per thread).
std::string unique_name(std::string_view base);
/// Forgets the names given so far on this thread (Keras clear_session).
void reset_names();

/// "KerasTensor(shape=[-1, 12], dtype=i64, from 'embedding')", for messages and printing.
std::string describe(const Tensor& t);

}  // namespace loom::graph
