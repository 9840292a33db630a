// Keras's configs of Sequential and Functional models, both ways: the layers with their inbound_nodes
// (keras/src/models/functional.py get_config / functional_from_config / serialize_node / deserialize_node),
// the ops recorded on symbolic tensors as op entries (module keras.src.ops.*), input_layers and output_layers.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include <fmt/ranges.h>

#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"
#include "layers/activations/softmax.hpp"
#include "layers/attention/group_query_attention.hpp"
#include "layers/attention/multi_head_attention.hpp"
#include "layers/core/input.hpp"
#include "layers/merging/merge.hpp"
#include "layers/pooling/global_average_pooling1d.hpp"
#include "models/detail/functional_graph.hpp"
#include "models/saving/detail/serialization.hpp"
#include "models/sequential.hpp"

namespace loom::models::detail {

namespace L = loom::layers;
using graph::Node;
using L::Layer;
using L::Model;

DType layer_dtype_policy(const json& entry, const std::string& where);

namespace {

// ---- ops ----

/// An op's other arguments: the node's attributes when saving, the op entry's config when loading.
class OpArguments {
 public:
  OpArguments(const json& config, std::string what) : config_(config), what_(std::move(what)) {}
  bool has(std::string_view key) const { return has_value(config_, key); }
  std::int64_t integer(std::string_view key, std::int64_t fallback) const {
    return has(key) ? as_int(config_[std::string(key)], fmt::format("{}: '{}'", what_, key)) : fallback;
  }
  double number(std::string_view key) const {
    return as_double(member(config_, key, what_), fmt::format("{}: '{}'", what_, key));
  }
  bool boolean(std::string_view key, bool fallback) const {
    return has(key) ? as_bool(config_[std::string(key)], fmt::format("{}: '{}'", what_, key)) : fallback;
  }
  std::vector<std::int64_t> ints(std::string_view key) const {
    const json& v = member(config_, key, what_);
    return v.is_array() ? as_ints(v, fmt::format("{}: '{}'", what_, key))
                        : std::vector<std::int64_t>{as_int(v, fmt::format("{}: '{}'", what_, key))};
  }
  /// Keras's axis=None (every axis) is an empty list.
  Axes axes(std::string_view key) const { return has(key) ? Axes(ints(key)) : Axes(); }
  std::string string(std::string_view key) const {
    return as_string(member(config_, key, what_), fmt::format("{}: '{}'", what_, key));
  }
  const std::string& what() const { return what_; }

 private:
  const json& config_;
  std::string what_;
};

using OpFunction = std::function<Tensor(const std::vector<Tensor>& v, const OpArguments& a)>;

struct OpClass {
  std::string module;  // "keras.src.ops.numpy"
  std::size_t arity;   // tensor arguments; 0 = a list of tensors (concatenate, stack)
  std::vector<std::string> arguments;  // the config keys besides name
  OpFunction function;
};

const std::map<std::string, OpClass, std::less<>>& op_classes() {
  static const std::map<std::string, OpClass, std::less<>> table = [] {
    const std::string np = "keras.src.ops.numpy", nn = "keras.src.ops.nn", math = "keras.src.ops.math",
                      core = "keras.src.ops.core";
    std::map<std::string, OpClass, std::less<>> t;
    auto binary = [&](const char* name, Tensor (*f)(const Tensor&, const Tensor&)) {
      t[name] = {np, 2, {}, [f](const std::vector<Tensor>& v, const OpArguments&) { return f(v[0], v[1]); }};
    };
    auto unary = [&](const char* name, const std::string& module, Tensor (*f)(const Tensor&)) {
      t[name] = {module, 1, {}, [f](const std::vector<Tensor>& v, const OpArguments&) { return f(v[0]); }};
    };
    binary("Add", ops::add);
    binary("Subtract", ops::sub);
    binary("Multiply", ops::mul);
    binary("TrueDivide", ops::div);
    binary("Divide", ops::div);
    binary("Maximum", ops::maximum);
    binary("Minimum", ops::minimum);
    binary("Matmul", ops::matmul);
    binary("Equal", ops::equal);
    binary("NotEqual", ops::not_equal);
    binary("Less", ops::less);
    binary("LessEqual", ops::less_equal);
    binary("Greater", ops::greater);
    binary("GreaterEqual", ops::greater_equal);
    binary("LogicalAnd", ops::logical_and);
    binary("LogicalOr", ops::logical_or);
    t["Power"] = {np, 2, {}, [](const std::vector<Tensor>& v, const OpArguments&) {
                    return ops::pow(v[0], v[1]);
                  }};
    unary("Negative", np, ops::neg);
    unary("Square", np, ops::square);
    unary("Sqrt", np, ops::sqrt);
    unary("Exp", np, ops::exp);
    unary("Log", np, ops::log);
    unary("Absolute", np, ops::abs);
    unary("Sign", np, ops::sign);
    unary("Tanh", np, ops::tanh);
    unary("LogicalNot", np, ops::logical_not);
    unary("Rsqrt", math, ops::rsqrt);
    unary("Erf", math, ops::erf);
    unary("Relu", nn, ops::relu);
    unary("Sigmoid", nn, ops::sigmoid);
    unary("LogSigmoid", nn, ops::log_sigmoid);
    t["Where"] = {np, 3, {}, [](const std::vector<Tensor>& v, const OpArguments&) {
                    return ops::where(v[0], v[1], v[2]);
                  }};
    t["Gelu"] = {nn, 1, {"approximate"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                   return ops::gelu(v[0], a.boolean("approximate", true));
                 }};
    t["Softmax"] = {nn, 1, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                      return ops::softmax(v[0], a.integer("axis", -1));
                    }};
    t["LogSoftmax"] = {nn, 1, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                         return ops::log_softmax(v[0], a.integer("axis", -1));
                       }};
    t["Clip"] = {np, 1, {"x_min", "x_max"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                   return ops::clip(v[0], a.number("x_min"), a.number("x_max"));
                 }};
    t["Cast"] = {core, 1, {"dtype"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                   return ops::cast(v[0], dtype_from_keras(a.string("dtype"), a.what() + ": 'dtype'"));
                 }};
    t["Reshape"] = {np, 1, {"newshape"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                      return ops::reshape(v[0], a.ints("newshape"));
                    }};
    t["Transpose"] = {np, 1, {"axes"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                        if (!a.has("axes")) {  // Keras's default: every axis reversed
                          std::vector<std::int64_t> axes;
                          for (std::int64_t i = v[0].ndim() - 1; i >= 0; --i) axes.push_back(i);
                          return ops::permute(v[0], axes);
                        }
                        return ops::permute(v[0], a.ints("axes"));
                      }};
    t["ExpandDims"] = {np, 1, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                         const auto axes = a.ints("axis");
                         check(axes.size() == 1, "{}: loom expands one axis at a time, got {}", a.what(), axes);
                         return ops::expand_dims(v[0], axes[0]);
                       }};
    t["Squeeze"] = {np, 1, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                      check(a.has("axis"), "{}: loom squeezes one given axis (axis=None is not supported)", a.what());
                      const auto axes = a.ints("axis");
                      check(axes.size() == 1, "{}: loom squeezes one axis at a time, got {}", a.what(), axes);
                      return ops::squeeze(v[0], axes[0]);
                    }};
    t["Concatenate"] = {np, 0, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                          return ops::concat(v, a.integer("axis", 0));
                        }};
    t["Stack"] = {np, 0, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                    return ops::stack(v, a.integer("axis", 0));
                  }};
    t["Take"] = {np, 2, {"axis"}, [](const std::vector<Tensor>& v, const OpArguments& a) {
                   check(a.has("axis"), "{}: loom takes along a given axis (axis=None is not supported)", a.what());
                   return ops::take(v[0], v[1], a.integer("axis", 0));
                 }};
    auto reduction = [&](const char* name, const std::string& module, Tensor (*f)(const Tensor&, const Axes&, bool)) {
      t[name] = {module, 1, {"axis", "keepdims"}, [f](const std::vector<Tensor>& v, const OpArguments& a) {
                   return f(v[0], a.axes("axis"), a.boolean("keepdims", false));
                 }};
    };
    reduction("Sum", np, ops::sum);
    reduction("Mean", np, ops::mean);
    reduction("Var", np, ops::var);
    reduction("Max", np, ops::max);
    reduction("Min", np, ops::min);
    reduction("Logsumexp", math, ops::logsumexp);
    auto arg_reduction = [&](const char* name, Tensor (*f)(const Tensor&, std::int64_t, bool)) {
      t[name] = {np, 1, {"axis", "keepdims"}, [f](const std::vector<Tensor>& v, const OpArguments& a) {
                   check(a.has("axis"), "{}: loom needs a given axis (axis=None is not supported)", a.what());
                   return f(v[0], a.integer("axis", -1), a.boolean("keepdims", false));
                 }};
    };
    arg_reduction("Argmax", ops::argmax);
    arg_reduction("Argmin", ops::argmin);
    return t;
  }();
  return table;
}

/// The Keras class of a loom op node: the node's class name, except for loom names keras.ops spells
/// otherwise.
std::string keras_op_class(const Node& node) {
  if (node.class_name == "Permute") return "Transpose";
  if (node.class_name == "Logsumexp" || node.class_name == "LogSumExp") return "Logsumexp";
  return node.class_name;
}

json attribute_json(const graph::Attribute& a) {
  return std::visit(
      [](const auto& v) -> json {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) return nullptr;
        else return v;
      },
      a);
}

graph::Attribute attribute_from_json(const json& v, const std::string& what) {
  if (v.is_null()) return std::monostate{};
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() || v.is_number_unsigned()) return as_int(v, what);
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  return as_ints(v, what);
}

// ---- tensors in node arguments ----

std::string keras_dtype_of(const Tensor& t) { return keras_dtype_name(t.dtype()); }

/// A constant tensor argument as Keras writes a NumPy array: {"class_name": "__numpy__", "config": {"value":
/// nested lists, "dtype": ...}}; a rank-0 one as a plain number.
json constant_json(const Tensor& t, const std::string& what) {
  check(t.defined(), "{}: an undefined constant argument", what);
  const Tensor flat = ops::contiguous(ops::cast(t, DType::f64));
  const std::vector<double> values = flat.to_vector<double>();
  auto scalar = [&](double v) -> json {
    check(std::isfinite(v), "{}: a constant argument holds {}, which JSON cannot hold", what, v);
    if (t.dtype() == DType::i64) return std::int64_t(v);
    if (t.dtype() == DType::boolean) return v != 0.0;
    return v;
  };
  if (t.ndim() == 0) return scalar(values[0]);
  std::size_t next = 0;
  std::function<json(std::size_t)> nest = [&](std::size_t axis) -> json {
    json out = json::array();
    for (std::int64_t i = 0; i < t.shape()[axis]; ++i)
      out.push_back(axis + 1 == t.shape().size() ? scalar(values[next++]) : nest(axis + 1));
    return out;
  };
  return {{"class_name", "__numpy__"}, {"config", {{"value", nest(0)}, {"dtype", keras_dtype_of(t)}}}};
}

/// A nested list of numbers (a __numpy__ or __tensor__ value) as a tensor of `dtype`.
Tensor constant_from_json(const json& value, DType dtype, const std::string& what) {
  Shape shape;
  const json* level = &value;
  while (level->is_array()) {
    check(shape.size() < 32, "{}: a constant nests deeper than 32 levels", what);
    shape.push_back(std::int64_t(level->size()));
    if (level->empty()) break;
    level = &(*level)[0];
  }
  std::vector<double> values;
  std::function<void(const json&, std::size_t)> walk = [&](const json& v, std::size_t axis) {
    if (axis == shape.size()) {
      if (v.is_boolean()) values.push_back(v.get<bool>() ? 1.0 : 0.0);
      else values.push_back(as_double(v, what));
      return;
    }
    check(v.is_array() && std::int64_t(v.size()) == shape[axis], "{}: a constant's nested lists are not "
          "rectangular (expected shape {})", what, shape);
    for (const auto& item : v) walk(item, axis + 1);
  };
  walk(value, 0);
  Tensor t = Tensor::from_vector(values, shape);
  return ops::cast(t, dtype);
}

// ---- saving a Functional model ----

class FunctionalWriter {
 public:
  FunctionalWriter(const Model& model, const L::detail::FunctionalGraph& graph) : model_(model), graph_(graph) {
    // Keras's node_reindexing_map: each operation's nodes in this graph, numbered from 0 (from 1 for a nested
    // Functional model, which starts with a node of its own).
    for (const auto& op : graph_.operations()) {
      std::size_t index = 0;
      if (op.layer) {
        const auto* nested = dynamic_cast<const Model*>(&op.layer->get(model_.name()));
        if (nested && nested->is_functional()) index = 1;
      }
      for (const Node* node : op.nodes) node_index_[node] = index++;
    }
  }

  json write() const {
    json layers = json::array();
    for (const auto& op : graph_.operations()) layers.push_back(operation_entry(op));
    json config = {{"name", model_.name()}, {"trainable", model_.trainable()}, {"layers", layers}};
    config["input_layers"] = tensor_list(graph_.inputs(), {});
    const auto& names = model_.output_names();
    bool named = false;
    for (std::size_t i = 0; i < graph_.outputs().size(); ++i)
      named = named || names[i] != graph::origin(graph_.outputs()[i]).node->name;
    config["output_layers"] = tensor_list(graph_.outputs(), named ? names : std::vector<std::string>{});
    return {{"module", "keras.src.models.functional"}, {"class_name", "Functional"}, {"config", config},
            {"registered_name", "Functional"}, {"build_config", {{"input_shape", nullptr}}}};
  }

 private:
  /// [name, node index, tensor index] of a symbolic tensor of this graph.
  json history(const Tensor& t) const {
    const auto& o = graph::origin(t);
    const auto it = node_index_.find(o.node.get());
    check(it != node_index_.end(), "{}: saving: the tensor {} does not come from this model's graph", model_.name(),
          graph::describe(t));
    return json::array({o.node->name, it->second, o.index});
  }

  json tensors_or_one(const std::vector<Tensor>& tensors) const {
    if (tensors.size() == 1) return history(tensors[0]);
    json out = json::array();
    for (const auto& t : tensors) out.push_back(history(t));
    return out;
  }

  json tensor_list(const std::vector<Tensor>& tensors, const std::vector<std::string>& names) const {
    if (!names.empty()) {
      json out = json::object();
      for (std::size_t i = 0; i < tensors.size(); ++i) out[names[i]] = history(tensors[i]);
      return out;
    }
    return tensors_or_one(tensors);
  }

  json keras_tensor(const Tensor& t) const {
    if (!t.defined()) return nullptr;
    check(graph::is_symbolic(t), "{}: saving: a layer was called on a tensor with data (shape {}); only ops take "
          "constants", model_.name(), t.shape());
    return {{"class_name", "__keras_tensor__"},
            {"config",
             {{"shape", shape_json(t.shape())}, {"dtype", keras_dtype_of(t)}, {"keras_history", history(t)}}}};
  }

  json argument(const Tensor& t, const std::string& what) const {
    if (graph::is_symbolic(t)) return keras_tensor(t);
    return constant_json(t, what);
  }

  json node_json(const Layer* layer, const Node& node, const std::string& what) const {
    json args = json::array();
    json kwargs = json::object();
    const auto& in = node.inputs;
    if (layer == nullptr) {
      const std::string keras_class = keras_op_class(node);
      const OpClass& op = op_classes().at(keras_class);
      if (op.arity == 0) {
        json list = json::array();
        for (const auto& t : in) list.push_back(argument(t, what));
        args.push_back(list);
      } else {
        for (const auto& t : in) args.push_back(argument(t, what));
        // loom's pow(x, exponent) keeps the exponent as an attribute: Keras's Power takes it as x2.
        for (const auto& [key, value] : node.attributes)
          if (key == "x2") args.push_back(attribute_json(value));
      }
      return {{"args", args}, {"kwargs", kwargs}};
    }
    switch (call_style(*layer)) {
      case CallStyle::single:
        args.push_back(keras_tensor(in.at(0)));
        break;
      case CallStyle::masked:
        args.push_back(keras_tensor(in.at(0)));
        kwargs["mask"] = in.size() > 1 ? keras_tensor(in[1]) : json(nullptr);
        break;
      case CallStyle::merge:
      case CallStyle::model: {
        if (call_style(*layer) == CallStyle::model && in.size() == 1) {
          args.push_back(keras_tensor(in[0]));
          break;
        }
        json list = json::array();
        for (const auto& t : in) list.push_back(keras_tensor(t));
        args.push_back(list);
        break;
      }
      case CallStyle::attention: {
        // An attention layer's node: query, value, key, query_mask, value_mask, key_mask, attention_mask.
        args.push_back(keras_tensor(in.at(0)));
        args.push_back(keras_tensor(in.at(1)));
        static const char* names[] = {"key", "query_mask", "value_mask", "key_mask", "attention_mask"};
        for (std::size_t i = 2; i < in.size() && i < 7; ++i)
          if (in[i].defined()) kwargs[names[i - 2]] = keras_tensor(in[i]);
        if (node.output_shapes.size() == 2) kwargs["return_attention_scores"] = true;
        for (const auto& [key, value] : node.attributes)
          if (key == "use_causal_mask" && std::get<bool>(value)) kwargs["use_causal_mask"] = true;
        break;
      }
    }
    return {{"args", args}, {"kwargs", kwargs}};
  }

  json operation_entry(const L::detail::GraphOperation& op) const {
    const std::string what = fmt::format("{}: saving '{}' ({})", model_.name(), op.name, op.class_name);
    json entry;
    const Layer* layer = nullptr;
    if (op.layer) {
      layer = &op.layer->get(model_.name());
      std::optional<Shape> build_shape;
      const Node& first = *op.nodes.front();
      const CallStyle style = call_style(*layer);
      if ((style == CallStyle::single || style == CallStyle::masked) && !first.is_input() && !first.inputs.empty())
        build_shape = first.inputs[0].shape();
      entry = serialize_layer(*layer, build_shape);
      if (style == CallStyle::attention) {
        json shapes = {{"query_shape", shape_json(first.inputs.at(0).shape())},
                       {"value_shape", shape_json(first.inputs.at(1).shape())}};
        if (first.inputs.size() > 2 && first.inputs[2].defined())
          shapes["key_shape"] = shape_json(first.inputs[2].shape());
        entry["build_config"] = {{"shapes_dict", shapes}};
      }
    } else {
      const std::string keras_class = keras_op_class(*op.nodes.front());
      const auto it = op_classes().find(keras_class);
      check(it != op_classes().end(), "{}: loom cannot save the op '{}' in a .keras archive; the ops it saves are "
            "{}", what, op.class_name, fmt::join(builtin_op_classes(), ", "));
      json config = {{"name", op.name}};
      for (const auto& [key, value] : op.nodes.front()->attributes) {
        if (key == "x2") continue;
        json v = attribute_json(value);
        if (key == "dtype") v = keras_dtype_name(dtype_from_loom(std::get<std::string>(value)));
        config[key] = v;
      }
      for (const auto& key : it->second.arguments)
        check(config.contains(key), "{}: the op's node does not record its argument '{}'", what, key);
      entry = {{"module", it->second.module}, {"class_name", keras_class}, {"config", config},
               {"registered_name", keras_class}};
    }
    entry["name"] = op.name;
    json nodes = json::array();
    for (const Node* node : op.nodes)
      if (!node->is_input()) nodes.push_back(node_json(layer, *node, what));
    entry["inbound_nodes"] = nodes;
    return entry;
  }

  static DType dtype_from_loom(const std::string& name) {
    for (DType d : {DType::f32, DType::f64, DType::i64, DType::boolean, DType::bf16})
      if (dtype_name(d) == name) return d;
    throw Error(fmt::format("saving: unknown dtype '{}'", name));
  }

  const Model& model_;
  const L::detail::FunctionalGraph& graph_;
  std::map<const Node*, std::size_t> node_index_;
};

// ---- saving a Sequential model ----

json sequential_json(const L::Sequential& model) {
  json layers = json::array();
  std::optional<Shape> shape = model.build_input_shape();
  if (const auto& input = model.input_layer()) {
    layers.push_back(serialize_layer(*input, std::nullopt));
  } else if (shape) {
    // As Keras's Sequential.build: an InputLayer for the shape it was built for.
    L::Input built_input(Shape(shape->begin() + 1, shape->end()),
                         {.batch_size = (*shape)[0] >= 0 ? std::optional<std::int64_t>((*shape)[0]) : std::nullopt,
                          .dtype = model.dtype(),
                          .name = L::unique_layer_name("input_layer")});
    layers.push_back(serialize_layer(built_input, std::nullopt));
  }
  for (const auto& layer : model.layers()) {
    layers.push_back(serialize_layer(*layer, shape));
    if (shape) shape = layer->compute_output_shape(*shape);
  }
  json config = {{"name", model.name()},
                 {"trainable", model.trainable()},
                 {"dtype", {{"module", "keras"}, {"class_name", "DTypePolicy"},
                            {"config", {{"name", keras_dtype_name(model.dtype())}}}, {"registered_name", nullptr}}},
                 {"layers", layers}};
  const std::optional<Shape> built = model.build_input_shape();
  if (built) config["build_input_shape"] = shape_json(*built);
  json entry = {{"module", "keras"}, {"class_name", "Sequential"}, {"config", config}, {"registered_name", nullptr}};
  if (built) entry["build_config"] = {{"input_shape", shape_json(*built)}};
  return entry;
}

// ---- loading a Functional model ----

/// An argument of a node after reading: a tensor (symbolic, or a constant), a list, or a plain JSON value.
struct Value {
  enum class Kind { none, tensor, list, scalar } kind = Kind::none;
  Tensor tensor;
  bool constant = false;  // a __numpy__/__tensor__ value rather than a graph tensor
  std::vector<Value> items;
  json scalar;
};

/// Thrown while reading a node whose inputs are not made yet (Keras's IndexError): the node waits.
struct NotReady {};

struct Created {
  std::shared_ptr<Layer> layer;  // null for an op
  std::string class_name;
  std::string module;
  const json* op_config = nullptr;
  DType policy = DType::f32;
  bool functional = false;       // a nested Functional model (its node indices start at 1)
  std::vector<std::vector<Tensor>> outputs;  // per processed node
  std::vector<const json*> pending;          // inbound nodes not processed yet, in order
};

class FunctionalReader {
 public:
  FunctionalReader(const json& config, const LoadContext& context, std::string where)
      : config_(config), context_(context), where_(std::move(where)) {}

  std::shared_ptr<Model> read() {
    const json& layers = expect_array(member(config_, "layers", where_), where_ + ": 'layers'");
    check(!layers.empty(), "{}: 'layers' is empty", where_);
    for (std::size_t i = 0; i < layers.size(); ++i) create(layers[i], i);
    // Keras's loop: each pass tries every layer's waiting nodes in order; a pass that processes none means a
    // node's inputs can never exist.
    bool pending = true;
    while (pending) {
      pending = false;
      bool progress = false;
      for (const std::string& name : order_) {
        Created& c = created_.at(name);
        while (!c.pending.empty()) {
          if (!process(name, c, *c.pending.front())) break;
          c.pending.erase(c.pending.begin());
          progress = true;
        }
        pending = pending || !c.pending.empty();
      }
      if (pending && !progress) {
        std::vector<std::string> waiting;
        for (const std::string& name : order_)
          if (!created_.at(name).pending.empty()) waiting.push_back(name);
        throw Error(fmt::format("{}: the graph cannot be rebuilt: the nodes of [{}] need tensors that no layer "
                                "makes (a loop, or a node index past the layer's nodes)", where_,
                                fmt::join(waiting, ", ")));
      }
    }
    std::vector<Tensor> inputs = tensors_of(member(config_, "input_layers", where_), "input_layers", nullptr);
    std::vector<std::string> output_names;
    std::vector<Tensor> outputs = tensors_of(member(config_, "output_layers", where_), "output_layers", &output_names);
    L::ModelOptions options;
    if (has_value(config_, "name")) options.name = as_string(config_["name"], where_ + ": 'name'");
    if (has_value(config_, "trainable")) options.trainable = as_bool(config_["trainable"], where_ + ": 'trainable'");
    if (!output_names.empty()) {
      std::map<std::string, Tensor> named;
      for (std::size_t i = 0; i < outputs.size(); ++i)
        check(named.emplace(output_names[i], outputs[i]).second, "{}: the output name '{}' is given twice", where_,
              output_names[i]);
      return std::make_shared<Model>(inputs, L::Tensors(named), options);
    }
    return std::make_shared<Model>(inputs, outputs, options);
  }

 private:
  void create(const json& entry, std::size_t index) {
    const std::string where = fmt::format("{}: layers[{}]", where_, index);
    expect_object(entry, where);
    const std::string class_name = as_string(member(entry, "class_name", where), where + ": 'class_name'");
    std::string name;
    if (has_value(entry, "name")) name = as_string(entry["name"], where + ": 'name'");
    else if (has_value(entry, "config") && has_value(entry["config"], "name"))
      name = as_string(entry["config"]["name"], where + ": config 'name'");
    check(!name.empty(), "{} ({}): the layer has no name", where, class_name);
    check(!created_.count(name), "{}: two layers are named '{}'", where_, name);
    Created c;
    c.class_name = class_name;
    const std::string module = has_value(entry, "module") ? as_string(entry["module"], where + ": 'module'") : "";
    const auto op = op_classes().find(class_name);
    if (module.rfind("keras.src.ops.", 0) == 0 || (op != op_classes().end() && module == op->second.module)) {
      check(op != op_classes().end(), "{} ('{}'): loom has no op {}.{}; the ops it rebuilds are {}", where, name,
            module, class_name, fmt::join(builtin_op_classes(), ", "));
      c.module = module;
      c.op_config = has_value(entry, "config") ? &expect_object(entry["config"], where + ": 'config'") : &empty_;
    } else {
      c.layer = deserialize_layer(entry, context_, where);
      // An InputLayer's "dtype" is its tensor's (int32 for token ids), not a dtype policy.
      if (!dynamic_cast<L::Input*>(c.layer.get())) c.policy = layer_dtype_policy(entry, where);
      if (auto* m = dynamic_cast<Model*>(c.layer.get())) c.functional = m->is_functional();
    }
    const json& nodes = entry.contains("inbound_nodes") ? expect_array(entry["inbound_nodes"], where +
                                                                       ": 'inbound_nodes'")
                                                        : empty_array_;
    if (auto* input = dynamic_cast<L::Input*>(c.layer.get())) {
      check(nodes.empty(), "{} ('{}'): an InputLayer has no inbound nodes, got {}", where, name, nodes.size());
      c.outputs.push_back({Tensor(*input)});
    }
    for (const auto& node : nodes) c.pending.push_back(&node);
    if (!c.layer && c.pending.empty())
      throw Error(fmt::format("{} ('{}'): an op entry needs one inbound node", where, name));
    order_.push_back(name);
    created_.emplace(name, std::move(c));
  }

  /// A tensor from [layer name, node index, tensor index]; NotReady while that node is not processed.
  Tensor lookup(const json& history, const std::string& what) const {
    expect_array(history, what);
    check(history.size() == 3, "{}: expected [layer name, node index, tensor index], got {}", what,
          describe(history));
    const std::string name = as_string(history[0], what + "[0]");
    std::int64_t node = as_int(history[1], what + "[1]");
    const std::int64_t tensor = as_int(history[2], what + "[2]");
    const auto it = created_.find(name);
    check(it != created_.end(), "{}: no layer is named '{}'", what, name);
    if (it->second.functional) --node;  // Keras: a Functional model starts with a node of its own
    check(node >= 0 && tensor >= 0, "{}: negative index in {}", what, history.dump());
    if (std::size_t(node) >= it->second.outputs.size()) throw NotReady{};
    const auto& outputs = it->second.outputs[std::size_t(node)];
    check(std::size_t(tensor) < outputs.size(), "{}: '{}' node {} has {} output(s), no output {}", what, name, node,
          outputs.size(), tensor);
    return outputs[std::size_t(tensor)];
  }

  Value read_value(const json& v, const std::string& what, std::size_t depth = 0) const {
    check(depth < 16, "{}: arguments nest deeper than 16 levels", what);
    Value out;
    if (v.is_null()) return out;
    if (v.is_array()) {
      out.kind = Value::Kind::list;
      for (std::size_t i = 0; i < v.size(); ++i)
        out.items.push_back(read_value(v[i], fmt::format("{}[{}]", what, i), depth + 1));
      return out;
    }
    if (!v.is_object()) {
      out.kind = Value::Kind::scalar;
      out.scalar = v;
      return out;
    }
    const std::string class_name = as_string(member(v, "class_name", what), what + ": 'class_name'");
    const json& config = member(v, "config", what);
    if (class_name == "__keras_tensor__") {
      out.kind = Value::Kind::tensor;
      out.tensor = lookup(member(config, "keras_history", what), what + ": 'keras_history'");
      return out;
    }
    if (class_name == "__numpy__" || class_name == "__tensor__") {
      out.kind = Value::Kind::tensor;
      out.constant = true;
      const DType dtype = dtype_from_keras(as_string(member(config, "dtype", what), what + ": 'dtype'"), what);
      out.tensor = constant_from_json(member(config, "value", what), dtype, what + ": 'value'");
      return out;
    }
    if (class_name == "__tuple__" || class_name == "__list__") return read_value(member(config, "value", what), what,
                                                                                  depth + 1);
    throw Error(fmt::format("{}: loom does not read arguments of class '{}'", what, class_name));
  }

  /// The graph tensor of a value that must be one (an undefined tensor for none when `optional`).
  Tensor graph_tensor(const Value& v, const std::string& what, bool optional = false) const {
    if (optional && v.kind == Value::Kind::none) return Tensor();
    check(v.kind == Value::Kind::tensor && !v.constant, "{}: expected a tensor of the graph", what);
    return v.tensor;
  }

  bool flag(const Value& v, const std::string& what) const {
    if (v.kind == Value::Kind::none) return false;
    check(v.kind == Value::Kind::scalar, "{}: expected true or false", what);
    return as_bool(v.scalar, what);
  }

  /// The call's arguments by position then keyword, for a signature (Keras's call arguments in order).
  std::vector<Value> bind(const std::vector<Value>& args, const std::map<std::string, Value>& kwargs,
                          const std::vector<std::string>& signature, const std::string& what) const {
    check(args.size() <= signature.size(), "{}: {} positional arguments, the call takes at most {} ({})", what,
          args.size(), signature.size(), fmt::join(signature, ", "));
    std::vector<Value> out(signature.size());
    for (std::size_t i = 0; i < args.size(); ++i) out[i] = args[i];
    for (const auto& [key, value] : kwargs) {
      const auto it = std::find(signature.begin(), signature.end(), key);
      check(it != signature.end(), "{}: the call has no argument '{}' (it takes {})", what, key,
            fmt::join(signature, ", "));
      const auto i = std::size_t(it - signature.begin());
      check(i >= args.size(), "{}: '{}' is given twice", what, key);
      out[i] = value;
    }
    return out;
  }

  std::vector<Tensor> call_layer(Created& c, const std::string& name, const std::vector<Value>& args,
                                 const std::map<std::string, Value>& kwargs, const std::string& what) {
    Layer& layer = *c.layer;
    if (dynamic_cast<L::Input*>(&layer)) throw Error(fmt::format("{}: an InputLayer cannot be called", what));
    switch (call_style(layer)) {
      case CallStyle::single:
      case CallStyle::masked: {
        const auto a = bind(args, kwargs, {"inputs", "mask", "training"}, what);
        const Tensor x = graph_tensor(a[0], what + ": the input");
        const Tensor mask = graph_tensor(a[1], what + ": 'mask'", true);
        check(!mask.defined() || call_style(layer) == CallStyle::masked, "{}: loom's {} takes no explicit mask",
              what, c.class_name);
        if (!layer.built()) layer.maybe_build(x.shape(), c.policy);
        if (!mask.defined()) return {layer(x)};
        if (auto* pool = dynamic_cast<L::GlobalAveragePooling1D*>(&layer)) return {(*pool)(x, mask)};
        return {static_cast<L::Softmax&>(layer)(x, mask)};
      }
      case CallStyle::merge: {
        const auto a = bind(args, kwargs, {"inputs", "mask", "training"}, what);
        check(a[0].kind == Value::Kind::list, "{}: a merge layer is called on a list of tensors", what);
        check(a[1].kind == Value::Kind::none, "{}: loom's merge layers take no explicit mask", what);
        std::vector<Tensor> xs;
        for (std::size_t i = 0; i < a[0].items.size(); ++i)
          xs.push_back(graph_tensor(a[0].items[i], fmt::format("{}: input {}", what, i)));
        return {static_cast<L::Merge&>(layer)(xs)};
      }
      case CallStyle::attention: {
        const auto a = bind(args, kwargs, {"query", "value", "key", "query_mask", "value_mask", "key_mask",
                                           "attention_mask", "return_attention_scores", "training",
                                           "use_causal_mask"}, what);
        L::MultiHeadAttentionCall call;
        const Tensor query = graph_tensor(a[0], what + ": 'query'");
        const Tensor value = graph_tensor(a[1], what + ": 'value'");
        call.key = graph_tensor(a[2], what + ": 'key'", true);
        call.query_mask = graph_tensor(a[3], what + ": 'query_mask'", true);
        call.value_mask = graph_tensor(a[4], what + ": 'value_mask'", true);
        call.key_mask = graph_tensor(a[5], what + ": 'key_mask'", true);
        call.attention_mask = graph_tensor(a[6], what + ": 'attention_mask'", true);
        call.use_causal_mask = flag(a[9], what + ": 'use_causal_mask'");
        const bool scores = flag(a[7], what + ": 'return_attention_scores'");
        auto attend = [&](auto& attention) -> std::vector<Tensor> {
          if (!scores) return {attention(query, value, call)};
          auto [output, weights] = attention.call_with_scores(query, value, call);
          return {output, weights};
        };
        if (auto* gqa = dynamic_cast<L::GroupQueryAttention*>(&layer)) return attend(*gqa);
        return attend(static_cast<L::MultiHeadAttention&>(layer));
      }
      case CallStyle::model: {
        const auto a = bind(args, kwargs, {"inputs", "training", "mask"}, what);
        auto& model = static_cast<Model&>(layer);
        if (a[0].kind == Value::Kind::list) {
          std::vector<Tensor> xs;
          for (std::size_t i = 0; i < a[0].items.size(); ++i)
            xs.push_back(graph_tensor(a[0].items[i], fmt::format("{}: input {}", what, i)));
          check(model.is_functional(), "{}: a Sequential model takes one input", what);
          return model(xs);
        }
        const Tensor x = graph_tensor(a[0], what + ": the input");
        if (model.is_functional()) return model(std::vector<Tensor>{x});
        return {model(x)};
      }
    }
    throw Error(fmt::format("{}: '{}' cannot be called", what, name));
  }

  std::vector<Tensor> call_op(Created& c, const std::string& name, const std::vector<Value>& args,
                              const std::map<std::string, Value>& kwargs, const std::string& what) {
    const OpClass& op = op_classes().at(c.class_name);
    check(kwargs.empty(), "{}: loom's op {} takes its arguments by position, got keywords", what, c.class_name);
    std::vector<Value> flat;
    if (op.arity == 0) {
      check(args.size() == 1 && args[0].kind == Value::Kind::list, "{}: {} takes one list of tensors", what,
            c.class_name);
      flat = args[0].items;
    } else {
      check(args.size() == op.arity, "{}: {} takes {} argument(s), got {}", what, c.class_name, op.arity,
            args.size());
      flat = args;
    }
    // Plain numbers become constants of the dtype of the op's first tensor argument (Keras's weak scalars).
    DType dtype = DType::f32;
    bool any_tensor = false;
    for (const auto& v : flat)
      if (v.kind == Value::Kind::tensor) {
        dtype = v.tensor.dtype();
        any_tensor = true;
        break;
      }
    check(any_tensor, "{}: the op has no tensor argument", what);
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < flat.size(); ++i) {
      const Value& v = flat[i];
      const std::string arg = fmt::format("{}: argument {}", what, i);
      if (v.kind == Value::Kind::tensor) {
        inputs.push_back(v.tensor);
      } else {
        check(v.kind == Value::Kind::scalar && (v.scalar.is_number() || v.scalar.is_boolean()),
              "{}: expected a tensor or a number", arg);
        const double x = v.scalar.is_boolean() ? double(v.scalar.get<bool>()) : as_double(v.scalar, arg);
        inputs.push_back(Tensor::scalar(x, v.scalar.is_boolean() ? DType::boolean : dtype));
      }
    }
    check(graph::any_symbolic(inputs), "{}: the op has no tensor of the graph among its arguments", what);
    const OpArguments arguments(*c.op_config, what + " config");
    std::set<std::string> known(op.arguments.begin(), op.arguments.end());
    known.insert("name");
    for (const auto& [key, value] : c.op_config->items())
      check(known.count(key) > 0, "{}: loom does not know the argument '{}' of {}", what, key, c.class_name);
    graph::Attributes attributes;
    for (const auto& [key, value] : c.op_config->items()) {
      if (key == "name") continue;
      if (key == "dtype") attributes.emplace_back(key, std::string(dtype_name(dtype_from_keras(
                              as_string(value, what + ": 'dtype'"), what + ": 'dtype'"))));
      else attributes.emplace_back(key, attribute_from_json(value, fmt::format("{}: '{}'", what, key)));
    }
    OpFunction function = op.function;
    // The replay reads its arguments from a copy of the config, so the node outlives the archive's JSON.
    auto config = std::make_shared<json>(*c.op_config);
    auto node_function = [function, config, what](const std::vector<Tensor>& values, bool) {
      return std::vector<Tensor>{function(values, OpArguments(*config, what))};
    };
    return graph::record(name, c.class_name, inputs, node_function, nullptr, 0, std::move(attributes));
  }

  /// Processes one inbound node; false when its inputs are not made yet.
  bool process(const std::string& name, Created& c, const json& node) {
    const std::string what = fmt::format("{}: '{}' ({}) node {}", where_, name, c.class_name, c.outputs.size());
    std::vector<Value> args;
    std::map<std::string, Value> kwargs;
    try {
      if (node.is_array()) {
        throw Error(fmt::format("{}: the node is in the legacy (Keras 2) format, which loom does not read", what));
      }
      expect_object(node, what);
      const json& a = node.contains("args") ? expect_array(node["args"], what + ": 'args'") : empty_array_;
      for (std::size_t i = 0; i < a.size(); ++i) args.push_back(read_value(a[i], fmt::format("{}: args[{}]", what, i)));
      if (node.contains("kwargs"))
        for (const auto& [key, value] : expect_object(node["kwargs"], what + ": 'kwargs'").items())
          kwargs.emplace(key, read_value(value, fmt::format("{}: kwargs['{}']", what, key)));
    } catch (const NotReady&) {
      return false;
    }
    std::vector<Tensor> outputs = c.layer ? call_layer(c, name, args, kwargs, what) : call_op(c, name, args, kwargs,
                                                                                               what);
    c.outputs.push_back(std::move(outputs));
    return true;
  }

  /// input_layers / output_layers: one [name, node, tensor] triple, a list of them, or a dict of them (names
  /// returned through `names`).
  std::vector<Tensor> tensors_of(const json& spec, const std::string& key, std::vector<std::string>* names) const {
    const std::string what = where_ + ": '" + key + "'";
    auto one = [&](const json& triple, const std::string& at) {
      try {
        return lookup(triple, at);
      } catch (const NotReady&) {
        throw Error(fmt::format("{}: {} names a node that the layers do not make", at, triple.dump()));
      }
    };
    std::vector<Tensor> out;
    if (spec.is_object()) {
      check(names != nullptr, "{}: loom takes the inputs as a list, not by name", what);
      for (const auto& [name, triple] : spec.items()) {
        names->push_back(name);
        out.push_back(one(triple, what + "['" + name + "']"));
      }
    } else if (spec.is_array() && spec.size() == 3 && spec[0].is_string()) {
      out.push_back(one(spec, what));
    } else {
      expect_array(spec, what);
      for (std::size_t i = 0; i < spec.size(); ++i) out.push_back(one(spec[i], fmt::format("{}[{}]", what, i)));
    }
    check(!out.empty(), "{}: no tensors", what);
    return out;
  }

  const json& config_;
  const LoadContext& context_;
  std::string where_;
  std::map<std::string, Created> created_;
  std::vector<std::string> order_;
  const json empty_ = json::object();
  const json empty_array_ = json::array();
};

// ---- loading a Sequential model ----

std::shared_ptr<Model> sequential_from(const json& config, const LoadContext& context, const std::string& where) {
  const json& layers = expect_array(member(config, "layers", where), where + ": 'layers'");
  std::optional<std::string> name;
  if (has_value(config, "name")) name = as_string(config["name"], where + ": 'name'");
  auto model = std::make_shared<L::Sequential>(std::vector<L::LayerArg>{}, name);
  std::optional<DType> policy;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string at = fmt::format("{}: layers[{}]", where, i);
    std::shared_ptr<Layer> layer = deserialize_layer(layers[i], context, at);
    if (!dynamic_cast<L::Input*>(layer.get())) {
      const DType d = layer_dtype_policy(layers[i], at);
      if (policy && *policy != d)
        throw Error(fmt::format("{}: the layers' dtype policies differ ({} and {}); loom builds a Sequential model "
                                "in one float dtype", at, keras_dtype_name(*policy), keras_dtype_name(d)));
      policy = d;
    }
    model->add(layer);
  }
  if (!model->built() && has_value(config, "build_input_shape")) {
    const Shape shape = as_shape(config["build_input_shape"], where + ": 'build_input_shape'");
    model->maybe_build(shape, policy.value_or(DType::f32));
  }
  if (policy && model->built() && model->dtype() != *policy)
    throw Error(fmt::format("{}: the layers' dtype policy is {} but the model's input builds them in {}; give the "
                            "InputLayer that dtype",
                            where, keras_dtype_name(*policy), keras_dtype_name(model->dtype())));
  if (has_value(config, "trainable") && !as_bool(config["trainable"], where + ": 'trainable'"))
    model->set_trainable(false);
  return model;
}

}  // namespace

std::vector<std::string> builtin_op_classes() {
  std::vector<std::string> out;
  for (const auto& [name, op] : op_classes()) out.push_back(name);
  return out;
}

std::optional<std::string> op_module(const std::string& class_name) {
  const auto it = op_classes().find(class_name);
  if (it == op_classes().end()) return std::nullopt;
  return it->second.module;
}

bool is_model_entry(const json& entry) {
  if (!entry.is_object() || !entry.contains("class_name") || !entry["class_name"].is_string()) return false;
  const std::string& c = entry["class_name"].get_ref<const std::string&>();
  return c == "Functional" || c == "Sequential" || c == "Model";
}

json serialize_model(const Model& model) {
  if (const auto* sequential = dynamic_cast<const L::Sequential*>(&model)) {
    check(typeid(model) == typeid(L::Sequential), "{}: a subclass of Sequential cannot be saved as a .keras config",
          model.name());
    return sequential_json(*sequential);
  }
  check(model.is_functional() && typeid(model) == typeid(Model), "{}: a subclassed model has no config loom can "
        "write; build it with the Functional API or Sequential, or save its weights (save_weights)", model.name());
  return FunctionalWriter(model, *model.functional_graph()).write();
}

std::shared_ptr<Model> deserialize_model(const json& entry, const LoadContext& context, const std::string& where) {
  expect_object(entry, where);
  const std::string class_name = as_string(member(entry, "class_name", where), where + ": 'class_name'");
  const json& config = expect_object(member(entry, "config", where), where + ": 'config'");
  const std::string what = fmt::format("{} ({})", where, class_name);
  if (class_name == "Sequential") return sequential_from(config, context, what);
  return FunctionalReader(config, context, what).read();
}

}  // namespace loom::models::detail
