#pragma once
// Layer classes by name, for .keras archives: how models::load_model makes a layer from its config and how
// Model::save writes one. Every built-in layer is known; register your own classes as Keras's
// @keras.saving.register_keras_serializable does (or pass them for one load, as Keras's custom_objects):
//
//   class Scale : public L::Layer { ... double factor() const; ... };
//   models::register_layer_class("my_package>Scale", {
//       .from_config = [](const models::Config& c) { return std::make_shared<Scale>(c.get_double("factor")); },
//       .get_config = [](const L::Layer& layer) {
//         models::Config c;
//         c.set_double("factor", static_cast<const Scale&>(layer).factor());
//         return c;
//       }});
//
// The name is Keras's registered name: "package>ClassName" as register_keras_serializable(package=...) makes
// it, or the bare class name. Loading looks a layer up by its entry's registered_name, then by its
// class_name; saving looks a layer up by its class_name() (the part after '>' of the registered name).
// from_config receives the layer's whole config, "name", "trainable" and "dtype" included; it must give the
// layer the config's "name" (a loom::Error says so otherwise), and loom then applies "trainable". get_config
// returns the class's own arguments; loom adds name, trainable and dtype. A class without get_config loads but
// cannot be saved.
// In a Functional graph a registered layer is called on one tensor, layer(x).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"
#include "models/saving/config.hpp"

namespace loom::models {

struct LayerClass {
  /// Makes the layer from its Keras config (Keras's from_config).
  std::function<std::shared_ptr<layers::Layer>(const Config& config)> from_config;
  /// The layer's constructor arguments as a config (Keras's get_config); optional, needed to save.
  std::function<Config(const layers::Layer& layer)> get_config = nullptr;
};

/// Registers (or replaces) a layer class for every later load and save, on every thread. A loom::Error when
/// the name is empty, names a built-in class, or from_config is missing.
void register_layer_class(const std::string& name, LayerClass layer_class);
/// Removes a registered class; false when none had that name.
bool unregister_layer_class(const std::string& name);
/// The layer classes loom loads and saves by itself, sorted ("Dense", "MultiHeadAttention", ...).
std::vector<std::string> builtin_layer_classes();

}  // namespace loom::models
