#pragma once
// Concatenate (keras.layers.Concatenate): joins a list of tensors along `axis`.
//
//   Tensor h = L::Concatenate()({a, b});                   // [B, T, 3] and [B, T, 5] -> [B, T, 8]
//   Tensor s = L::Concatenate({.axis = 1})({a, b});        // along the steps
//
// The inputs (Keras's rule): at least one, float32 or float64 of one dtype, one rank, equal sizes on every
// axis but `axis` (-1, unknown, matches any size); no broadcasting. Masks (Keras's compute_mask): none when
// no input has one; else an input without a mask counts as all true, a mask of lower rank than its input
// ([B, T] for [B, T, F]) is broadcast over the input, the masks are concatenated along `axis` and reduced with
// any over the last axis: [B, T] masks concatenated on the features stay [B, T], on the steps [B, T1 + T2].
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct ConcatenateOptions {
  std::int64_t axis = -1;
  std::optional<std::string> name = std::nullopt;
};

class Concatenate : public Merge {
 public:
  explicit Concatenate(ConcatenateOptions options = {});

  std::string class_name() const override { return "Concatenate"; }

  std::int64_t axis() const { return axis_; }

  using Merge::compute_mask;
  Tensor compute_mask(const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks) const override;
  using Merge::compute_output_shape;
  /// The inputs' shape with the sizes at `axis` summed (-1 when one is unknown).
  Shape compute_output_shape(const std::vector<Shape>& input_shapes) const override;

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) override;
  bool expands_ranks() const override { return false; }
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Concatenate>(std::move(*this)); }

 private:
  std::int64_t axis_;
};

}  // namespace loom::layers
