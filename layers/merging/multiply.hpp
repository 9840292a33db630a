#pragma once
// Multiply (keras.layers.Multiply): the elementwise product of a list of tensors.
//
//   Tensor gated = L::Multiply()({x, gate});
//
// The inputs follow Keras's merge rules (layers/merging/merge.hpp): one batch size, the other axes broadcast
// right-aligned, a lower-rank input gets size-1 axes after its batch axis. Masks (Keras's Multiply): a masked
// position of an input counts as 1; when every input has a mask ([batch, steps] for [batch, steps, features]
// inputs), positions masked in all inputs give 0 and the output's mask is the OR of the masks.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct MultiplyOptions {
  std::optional<std::string> name = std::nullopt;
};

class Multiply : public Merge {
 public:
  explicit Multiply(MultiplyOptions options = {});

  std::string class_name() const override { return "Multiply"; }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Multiply>(std::move(*this)); }
};

}  // namespace loom::layers
