#pragma once
// Keras 3's weights files (.weights.h5), both ways: what keras.Model.save_weights writes and load_weights
// reads, and the model.weights.h5 member of a .keras archive. Model::save_weights and load_weights use these
// for a path ending in ".weights.h5" (docs/file-formats.md).
//
// The layout is Keras's (keras/src/saving/saving_lib.py): the model's own variables in `vars/`, each layer of
// a Sequential or Functional model in `layers/<class name in snake_case>[_<k>]/vars/<i>` (the k-th layer of
// that class, by position, not by auto-name), sub-layers below their layer under Keras's attribute names
// (`layers/multi_head_attention/query_dense/vars/0`), an empty group for each layer without variables, every
// `vars` group with the layer's name as its "name" attribute, and the optimizer's variables in
// `optimizer/vars/<i>`: iterations (int32), the learning rate (float32; absent for a schedule), then the
// slots in Keras's creation order. The layers of a subclassed model (and of a custom layer) are keyed by
// class the same way, below their parent's group.
//
// Reading checks the whole file before any weight changes: every group the model needs with exactly its
// number of variables, each of the variable's shape and a floating dtype (converted to the weight's, as
// Keras's assign does), no variable the model lacks, hard links only. Then the model's weights are replaced
// at once. A subclassed model whose file has other group names (Keras keys a subclassed model's layers by
// attribute name) loads by order: each of its layers, in order, takes the first group not taken yet, in
// Keras's visiting order, whose variables have the layer's shapes; every group must be taken. Files loom
// writes for subclassed models use loom's keys, which Keras's subclassed models do not know.
#include <string>
#include <string_view>

#include "models/model.hpp"

namespace loom::models {

/// What a load does with the optimizer variables of the file.
enum class OptimizerVariables {
  ignore,            ///< leave the optimizer as it is
  load,              ///< the model must be compiled and the file must hold its variables: loaded
  load_if_matching,  ///< loaded when the model is compiled and their number matches (Keras's load_model)
};

/// The bytes of a .weights.h5 file with the model's weights, and its optimizer's variables when
/// `include_optimizer` (the model must be compiled then).
std::string keras_weights_file_image(const layers::Model& model, bool include_optimizer);
/// Writes keras_weights_file_image atomically (a temporary file renamed over `path`).
void save_keras_weights(const layers::Model& model, const std::string& path, bool include_optimizer);

/// Loads a .weights.h5 file into the model (built, with the architecture that wrote it).
void load_keras_weights(layers::Model& model, const std::string& path, OptimizerVariables optimizer);
/// The same from the bytes of such a file; `origin` names it in messages ("m.keras: model.weights.h5").
void load_keras_weights_image(layers::Model& model, std::string_view image, const std::string& origin,
                              OptimizerVariables optimizer);

/// True for a path Keras would write a weights file to: it ends in ".weights.h5".
bool is_keras_weights_path(std::string_view path);

}  // namespace loom::models
