#pragma once
// Whole models in Keras 3's .keras archives, both ways (Keras's model.save / keras.saving.load_model):
//
//   classifier.save("m.keras");                      // Sequential or Functional; compiled: with its optimizer state
//   auto restored = models::load_model("m.keras");   // std::shared_ptr<Model>, compiled as saved
//   restored->predict(x);   restored->fit(x, y);     // training continues where it stopped
//
// The archive is a zip with metadata.json, config.json (Keras's serialized model: every layer with its config,
// the Functional graph as Keras writes it, the compile settings) and model.weights.h5 (Keras's HDF5 weights
// layout, optimizer state included). Archives written by Keras 3 load when every layer class is loom's
// (models::builtin_layer_classes(), plus the ops of keras.ops listed in docs/file-formats.md) or registered
// (models/saving/layer_registry.hpp); archives loom writes load in Keras 3 and predict the same values.
// Not supported, each a loom::Error naming the setting: regularizers, constraints, quantization, dtype
// policies other than float32 and float64, subclassed models, losses and metrics given as C++ functions,
// optimizers other than Adam, AdamW, SGD and RMSprop.
//
// Reading checks everything it reads: a file that is not a zip, a missing member, members larger than loom
// reads (JSON over 64 MiB, weights over 64 GiB, or expanding more than 1000 times), JSON nested deeper than
// 256 levels, unknown classes, wrong types and wrong weight shapes are loom::Errors naming the archive and the
// entry; nothing is read past what the archive declares.
#include <map>
#include <memory>
#include <string>

#include "models/model.hpp"
#include "models/saving/layer_registry.hpp"

namespace loom::models {

/// load_model's options, in the order of Keras's arguments.
struct LoadModelOptions {
  /// Layer classes for this load only, by registered name or class name (Keras's custom_objects); they take
  /// precedence over register_layer_class's.
  std::map<std::string, LayerClass> custom_objects = {};
  /// Compile the model with the archive's compile settings and restore its optimizer state, as Keras's
  /// compile=True; false leaves the model uncompiled.
  bool compile = true;
};

/// The model a .keras archive holds (written by Model::save or by Keras 3), built and compiled as saved
/// unless options.compile is false, with the archive's weights (and, compiled, its optimizer state when it
/// fits the optimizer, as Keras's load_model).
std::shared_ptr<layers::Model> load_model(const std::string& path, LoadModelOptions options = {});

}  // namespace loom::models
