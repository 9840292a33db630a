#pragma once
// Internal to models/saving: Keras's serialized form of layers, models and compile settings, both ways
// (keras/src/saving/serialization_lib.py, keras/src/models/functional.py, sequential.py, trainer.py).
//   layer_config.cpp    every built-in layer class, initializers, activations, dtype policies, the registry
//   model_config.cpp    Sequential and Functional (layers with inbound_nodes, op nodes, input/output layers)
//   compile_config.cpp  optimizer, loss, loss_weights, metrics
//   metric_config.cpp   every metric class loom saves
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/layer.hpp"
#include "models/model.hpp"
#include "models/saving/detail/json.hpp"
#include "models/saving/layer_registry.hpp"

namespace loom::models::detail {

/// What reading a config needs besides the JSON: the user's classes for this load (custom_objects), looked
/// up before the registered ones.
struct LoadContext {
  const std::map<std::string, LayerClass>* custom_objects = nullptr;
};

// ---- layers (layer_config.cpp) ----

/// How a Functional graph calls a layer of this class, which decides how a node's args and kwargs map to it.
enum class CallStyle {
  single,     // layer(x)
  masked,     // layer(x, mask=m): GlobalAveragePooling1D, Softmax
  merge,      // layer([x1, x2, ...])
  attention,  // layer(query, value, key=..., *_mask=..., use_causal_mask=..., return_attention_scores=...)
  model,      // a nested model: model(x) or model([x1, x2, ...])
};
CallStyle call_style(const layers::Layer& layer);

/// Keras's serialize_keras_object(layer): module, class_name, config, registered_name and, when given,
/// build_config {"input_shape": ...}. A loom::Error naming the layer when its class or one of its settings has
/// no Keras form (a C++ initializer, a loom-only layer, a subclass of a built-in layer).
json serialize_layer(const layers::Layer& layer, const std::optional<Shape>& build_input_shape);
/// A layer from such an entry: a built-in class, a registered one or one of context's. `where` names the
/// entry in messages.
std::shared_ptr<layers::Layer> deserialize_layer(const json& entry, const LoadContext& context,
                                                 const std::string& where);

/// Keras's names for loom's dtypes ("float32", "int64") and back ("int32" reads as int64, loom's index type).
std::string keras_dtype_name(DType dtype);
DType dtype_from_keras(const std::string& name, const std::string& what);

/// The built-in layer classes and op classes, sorted, for the error on an unknown class.
std::vector<std::string> builtin_layer_classes();
std::vector<std::string> builtin_op_classes();

// ---- models (model_config.cpp) ----

/// A Sequential or Functional model's whole entry, as a layer entry is (module, class_name, config,
/// registered_name, build_config).
json serialize_model(const layers::Model& model);
/// A model from its entry ("Sequential" or "Functional").
std::shared_ptr<layers::Model> deserialize_model(const json& entry, const LoadContext& context,
                                                 const std::string& where);
bool is_model_entry(const json& entry);

/// An op node of a Functional graph: its Keras module ("keras.src.ops.numpy"), for the class names loom
/// rebuilds; none otherwise.
std::optional<std::string> op_module(const std::string& class_name);

// ---- metric objects (metric_config.cpp) ----

/// A Keras metric entry {"module": "keras.metrics", "class_name", "config", "registered_name"}; a loom::Error
/// naming `what` for a metric of one's own (a class Keras does not have).
json serialize_metric(const layers::metrics::Metric& metric, const std::string& what);
/// The metric a Keras metric entry describes; a loom::Error naming `what` for an unknown class or option.
std::shared_ptr<layers::metrics::Metric> deserialize_metric(const json& entry, const std::string& what);

// ---- compile (compile_config.cpp) ----

/// Keras's get_compile_config: optimizer, loss, loss_weights, metrics, weighted_metrics, run_eagerly,
/// steps_per_execution, jit_compile. A loom::Error when a loss or metric is a C++ function.
json serialize_compile(const layers::Model& model);
/// compile_from_config: compiles `model` with what the config says.
void compile_from_config(layers::Model& model, const json& config, const std::string& where);

}  // namespace loom::models::detail
