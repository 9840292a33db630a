#pragma once
// The graph of a Functional model (keras.Model(inputs, outputs)): the nodes between its inputs and outputs,
// ordered as Keras orders them (keras/src/ops/function.py, map_graph), and their replay on real tensors.
// Internal to models/: Model holds one and answers through it.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/graph/symbolic.hpp"
#include "layers/layer.hpp"

namespace loom::layers::detail {

/// One operation of the graph: a layer (with every node it has in this graph) or one op call.
struct GraphOperation {
  std::shared_ptr<LayerHandle> layer;  // null for an op
  std::string name, class_name;
  std::vector<const graph::Node*> nodes;  // in the graph, in call order
};

class FunctionalGraph {
 public:
  /// Checks the graph (every output computable from the inputs, operation names unique) and orders it.
  /// `model` names the model in messages.
  FunctionalGraph(std::vector<Tensor> inputs, std::vector<Tensor> outputs, const std::string& model);

  /// The outputs for these input values (one per input, in order): cast to the input's dtype, a trailing
  /// size-1 axis added or dropped where the rank differs by it (as Keras), fixed sizes checked.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, bool training) const;

  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }
  /// Keras's model._operations: by depth from the inputs, ties in the order the outputs' traversal met them.
  const std::vector<GraphOperation>& operations() const { return operations_; }

  /// Keras's summary: a chain of single-input nodes, no shared layer (then the table has no "Connected to").
  bool sequential_like() const;
  /// "embedding[0][0], embedding[0][0]": the tensors each node of the operation was called on.
  std::string connections(const GraphOperation& operation) const;
  /// "(None, 12, 16)": the output shape of the operation's last node; a list for several outputs.
  std::string output_shape(const GraphOperation& operation) const;

 private:
  std::vector<Tensor> inputs_, outputs_;
  std::string model_;
  std::vector<const graph::Node*> nodes_;  // every non-input node, in execution order
  std::vector<std::vector<const graph::Node*>> nodes_by_depth_;  // deepest first (as summary's checks need)
  std::vector<GraphOperation> operations_;
};

}  // namespace loom::layers::detail
