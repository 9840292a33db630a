#pragma once
// Merge (Keras's base_merge.Merge): the base of the layers that combine a list of tensors, Add, Subtract,
// Multiply, Average, Maximum, Minimum and Concatenate.
//
//   L::Add add;
//   Tensor y = add({x, block(x)});
//
// The inputs, as Keras checks them: at least one (Subtract: exactly two), defined, float32 or float64 of one
// dtype, each with a batch axis, all of one batch size. For the elementwise merges the other axes broadcast
// right-aligned (1 against any size; -1, unknown, against anything gives -1) and an input of lower rank gets
// size-1 axes inserted after its batch axis before merge() sees it (such an expanded input has no mask then,
// as in Keras). Concatenate has its own shape rule.
//
// Masks (Tensor::keras_mask): the output carries the mask merge() attached (Multiply, Maximum, Minimum), else
// compute_mask(inputs, masks): as Keras, none when some input has no mask, else the logical OR of the masks.
// On symbolic inputs the call is recorded as a graph node (Functional API).
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

class Merge : public Layer {
 public:
  /// Checks the inputs, builds on the first call, then merges them and attaches the output's mask.
  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false) &;
  /// The same for a temporary; on symbolic inputs the temporary moves into the graph.
  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false) &&;

  bool supports_masking() const override { return true; }
  using Layer::compute_mask;  // one input: the Layer's
  /// The output's mask for inputs with these masks (one per input, undefined where an input has none):
  /// undefined when any is undefined, else their logical OR (broadcast together).
  virtual Tensor compute_mask(const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks) const;

  using Layer::compute_output_shape;  // one input shape: the Layer's (identity)
  /// The merged shape (Keras's rule above); a loom::Error naming the layer and the shapes when they do not
  /// merge.
  virtual Shape compute_output_shape(const std::vector<Shape>& input_shapes) const;

 protected:
  Merge(std::string_view default_name, std::optional<std::string> name) : Layer(default_name, std::move(name)) {}

  /// The merge itself, on inputs already checked (and, for elementwise merges, of one rank).
  virtual Tensor merge(const std::vector<Tensor>& inputs) = 0;

  /// The number of inputs the layer takes.
  virtual std::size_t min_inputs() const { return 1; }
  virtual std::size_t max_inputs() const { return std::numeric_limits<std::size_t>::max(); }
  /// Whether lower-rank inputs get size-1 axes after the batch axis (elementwise merges; not Concatenate).
  virtual bool expands_ranks() const { return true; }

  /// The checks every merge shares: the number of inputs, defined, one floating dtype.
  void check_inputs(const std::vector<Tensor>& inputs) const;
  /// x's mask as a boolean of x's shape (Keras's broadcast_to(expand_dims(mask, -1), shape(x))), undefined
  /// when x has no mask; a loom::Error when the mask does not fit x (input `index`).
  Tensor mask_over(const Tensor& x, std::size_t index) const;
  /// Keras's _apply_merge_op_and_or_mask (Maximum, Minimum): folds `op` over the inputs, a masked position of
  /// an input taking the running result's value (and the reverse); the output carries the OR of the masks
  /// (any over the last axis) when every input has one.
  Tensor merge_with_masks(const std::vector<Tensor>& inputs,
                          const std::function<Tensor(const Tensor&, const Tensor&)>& op) const;
  /// Keras's ops.any(mask, axis=-1) of a boolean mask.
  static Tensor any_last_axis(const Tensor& mask);

 private:
  /// The call; on symbolic inputs it records a node, owned by `owner` when given (a moved temporary).
  Tensor run(const std::vector<Tensor>& inputs, bool training, std::shared_ptr<Layer> owner);
};

}  // namespace loom::layers
