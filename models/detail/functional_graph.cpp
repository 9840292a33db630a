#include "models/detail/functional_graph.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/ranges.h>

#include "framework/ops/ops.hpp"
#include "models/summary.hpp"

namespace loom::layers::detail {

namespace {

using graph::Node;

/// What identifies an operation: the layer's handle, or the node itself for an op (each call is its own).
const void* operation_key(const Node* node) { return node->operation ? node->operation.get() : node; }

/// A node's parents: the nodes of its symbolic inputs, in argument order.
std::vector<const Node*> parents(const Node* node) {
  std::vector<const Node*> out;
  for (const auto& t : node->inputs)
    if (graph::is_symbolic(t)) out.push_back(graph::origin(t).node.get());
  return out;
}

/// Keras's _build_map: depth-first from each output, nodes appended once their parents are; an operation's
/// index is the order in which the traversal first met it.
struct Traversal {
  const std::set<const TensorImpl*>& declared;
  std::vector<const Node*> nodes;  // inputs -> outputs
  std::map<const void*, std::size_t> operation_index;
  std::set<const Node*> finished;

  void visit(const Tensor& t) {
    const Node* node = graph::origin(t).node.get();
    if (finished.count(node)) return;
    if (!node->is_input() && declared.count(&t.impl())) {  // an intermediate tensor given as an input
      finished.insert(node);
      return;
    }
    operation_index.try_emplace(operation_key(node), operation_index.size());
    if (!node->is_input())
      for (const auto& input : node->inputs)
        if (graph::is_symbolic(input)) visit(input);
    finished.insert(node);
    nodes.push_back(node);
  }
};

/// An insertion-ordered map from node to depth (Keras keeps a dict, whose order decides ties).
struct Depths {
  std::vector<std::pair<const Node*, std::size_t>> entries;
  std::map<const Node*, std::size_t> where;
  std::size_t& at(const Node* node) {
    auto [it, added] = where.try_emplace(node, entries.size());
    if (added) entries.emplace_back(node, 0);
    return entries[it->second].second;
  }
  bool has(const Node* node) const { return where.count(node) > 0; }
};

}  // namespace

FunctionalGraph::FunctionalGraph(std::vector<Tensor> inputs, std::vector<Tensor> outputs, const std::string& model)
    : inputs_(std::move(inputs)), outputs_(std::move(outputs)), model_(model) {
  check(!inputs_.empty(), "{}: a Functional model needs at least one input", model_);
  check(!outputs_.empty(), "{}: a Functional model needs at least one output", model_);
  std::set<const TensorImpl*> declared;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    check(graph::is_symbolic(inputs_[i]), "{}: input {} is not a symbolic tensor (make inputs with layers::Input), "
          "got a tensor of shape {}", model_, i, inputs_[i].defined() ? inputs_[i].shape() : Shape{});
    check(declared.insert(&inputs_[i].impl()).second, "{}: input {} ({}) is given twice", model_, i,
          graph::describe(inputs_[i]));
  }
  for (std::size_t i = 0; i < outputs_.size(); ++i)
    check(graph::is_symbolic(outputs_[i]), "{}: output {} is not a symbolic tensor (it must come from the inputs "
          "through layers and ops), got a tensor of shape {}", model_, i,
          outputs_[i].defined() ? outputs_[i].shape() : Shape{});

  Traversal traversal{declared, {}, {}, {}};
  for (const auto& t : outputs_) traversal.visit(t);

  // Keras's map_graph: a node's depth is the longest path to an output; an operation takes the greatest
  // depth of its nodes, and its nodes take that too.
  Depths node_depth;
  std::map<const void*, std::size_t> operation_depth;
  const std::set<const Node*> in_graph(traversal.nodes.begin(), traversal.nodes.end());
  for (auto it = traversal.nodes.rbegin(); it != traversal.nodes.rend(); ++it) {
    const Node* node = *it;
    std::size_t depth = node_depth.at(node);
    depth = std::max(depth, operation_depth[operation_key(node)]);
    operation_depth[operation_key(node)] = depth;
    node_depth.at(node) = depth;
    for (const Node* parent : parents(node)) {
      if (!in_graph.count(parent)) continue;
      std::size_t& d = node_depth.at(parent);
      d = std::max(depth + 1, d);
    }
  }
  // Inputs that no output needs are still part of the model (depth 0), as in Keras.
  for (const auto& t : inputs_) {
    const Node* node = graph::origin(t).node.get();
    if (node->is_input() && !operation_depth.count(operation_key(node))) {
      operation_depth[operation_key(node)] = 0;
      traversal.operation_index[operation_key(node)] = std::size_t(-1);
      node_depth.at(node) = 0;
    }
  }

  std::size_t max_depth = 0;
  for (const auto& [node, depth] : node_depth.entries) max_depth = std::max(max_depth, depth);
  nodes_by_depth_.assign(max_depth + 1, {});
  for (const auto& [node, depth] : node_depth.entries) nodes_by_depth_[max_depth - depth].push_back(node);

  // Every tensor a node needs must come from the inputs or an earlier node.
  std::set<std::pair<const Node*, std::size_t>> computable;
  for (const auto& t : inputs_) computable.insert({graph::origin(t).node.get(), graph::origin(t).index});
  std::vector<std::string> reached;
  for (const auto& level : nodes_by_depth_)
    for (const Node* node : level) {
      if (node->is_input()) {
        check(computable.count({node, 0}) > 0, "{}: graph disconnected: the outputs need the input '{}' ({}), which "
              "is not among the model's inputs; operations reached so far: [{}]", model_, node->name,
              format_output_shape(node->output_shapes[0]), fmt::join(reached, ", "));
        continue;
      }
      for (const auto& t : node->inputs) {
        if (!graph::is_symbolic(t)) continue;
        const auto& o = graph::origin(t);
        check(computable.count({o.node.get(), o.index}) > 0, "{}: graph disconnected: cannot find the parent of {} "
              "at operation '{}'; operations reached so far: [{}]", model_, graph::describe(t), node->name,
              fmt::join(reached, ", "));
      }
      reached.push_back(node->name);
      for (std::size_t i = 0; i < node->output_shapes.size(); ++i) computable.insert({node, i});
      nodes_.push_back(node);
    }

  // Operations ordered by depth (deepest first), ties by traversal order.
  std::map<const void*, std::size_t> where;
  std::vector<std::pair<std::pair<std::size_t, std::size_t>, const Node*>> order;  // ((-depth, index), node)
  for (const auto& [node, depth] : node_depth.entries) {
    const void* key = operation_key(node);
    if (where.count(key)) continue;
    where[key] = 0;
    order.push_back({{max_depth - operation_depth[key], traversal.operation_index[key] + 1}, node});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  where.clear();
  for (const auto& [rank, node] : order) {
    where[operation_key(node)] = operations_.size();
    GraphOperation op;
    op.layer = node->operation ? std::static_pointer_cast<LayerHandle>(node->operation) : nullptr;
    op.name = node->name;
    op.class_name = node->class_name;
    operations_.push_back(std::move(op));
  }
  for (const auto& [node, depth] : node_depth.entries) operations_[where[operation_key(node)]].nodes.push_back(node);
  for (auto& op : operations_)
    std::sort(op.nodes.begin(), op.nodes.end(), [](const Node* a, const Node* b) { return a->node_index < b->node_index; });

  std::map<std::string, int> names;
  for (const auto& op : operations_) ++names[op.name];
  for (const auto& [name, count] : names)
    check(count == 1, "{}: the name \"{}\" is used {} times in the model: all operation names must be unique",
          model_, name, count);
}

std::vector<Tensor> FunctionalGraph::run(const std::vector<Tensor>& given, bool training) const {
  check(given.size() == inputs_.size(), "{}: expected {} input(s), got {}", model_, inputs_.size(), given.size());
  std::map<std::pair<const Node*, std::size_t>, Tensor> values;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    const Tensor& ref = inputs_[i];
    Tensor x = given[i];
    check(x.defined() && !graph::is_symbolic(x), "{}: input {} ('{}') must be a tensor with data", model_, i,
          graph::origin(ref).node->name);
    if (x.dtype() != ref.dtype()) x = ops::cast(x, ref.dtype()).with_keras_mask(x.keras_mask());
    const Shape& want = ref.shape();
    if (x.ndim() == std::int64_t(want.size()) + 1 && x.shape().back() == 1) x = ops::squeeze(x, -1);
    else if (x.ndim() + 1 == std::int64_t(want.size()) && want.back() == 1) x = ops::expand_dims(x, -1);
    bool fits = x.ndim() == std::int64_t(want.size());
    for (std::size_t d = 0; fits && d < want.size(); ++d) fits = want[d] == -1 || want[d] == x.shape()[d];
    check(fits, "{}: input {} ('{}') expects shape {} (-1: any size), got {}", model_, i,
          graph::origin(ref).node->name, want, given[i].shape());
    values[{graph::origin(ref).node.get(), graph::origin(ref).index}] = x;
  }
  for (const Node* node : nodes_) {
    std::vector<Tensor> args;
    args.reserve(node->inputs.size());
    for (const auto& t : node->inputs) {
      if (!graph::is_symbolic(t)) {
        args.push_back(t);
        continue;
      }
      const auto& o = graph::origin(t);
      args.push_back(values.at({o.node.get(), o.index}));
    }
    std::vector<Tensor> outputs = node->function(args, training);
    check(outputs.size() == node->output_shapes.size(), "{}: operation '{}' returned {} outputs, the graph has {}",
          model_, node->name, outputs.size(), node->output_shapes.size());
    for (std::size_t i = 0; i < outputs.size(); ++i) values[{node, i}] = std::move(outputs[i]);
  }
  std::vector<Tensor> out;
  for (const auto& t : outputs_) out.push_back(values.at({graph::origin(t).node.get(), graph::origin(t).index}));
  return out;
}

bool FunctionalGraph::sequential_like() const {
  std::set<const Node*> nodes;
  for (const auto& level : nodes_by_depth_) {
    std::size_t symbolic_inputs = 0;
    if (level.size() == 1)
      for (const auto& t : level[0]->inputs) symbolic_inputs += graph::is_symbolic(t) ? 1 : 0;
    if (level.size() > 1 || symbolic_inputs > 1) return false;
    nodes.insert(level.begin(), level.end());
  }
  for (const auto& op : operations_)
    if (op.layer && op.nodes.size() > 1) return false;
  return true;
}

std::string FunctionalGraph::connections(const GraphOperation& operation) const {
  std::string out;
  for (const Node* node : operation.nodes)
    for (const auto& t : node->inputs) {
      if (!graph::is_symbolic(t)) continue;
      const auto& o = graph::origin(t);
      if (!out.empty()) out += ", ";
      out += fmt::format("{}[{}][{}]", o.node->name, o.node->node_index, o.index);
    }
  return out.empty() ? "-" : out;
}

std::string FunctionalGraph::output_shape(const GraphOperation& operation) const {
  const Node* last = operation.nodes.back();
  if (last->output_shapes.size() == 1) return format_output_shape(last->output_shapes[0]);
  std::vector<std::string> shapes;
  for (const auto& s : last->output_shapes) shapes.push_back(format_output_shape(s));
  return fmt::format("[{}]", fmt::join(shapes, ", "));
}

}  // namespace loom::layers::detail
