#pragma once
// Maximum (keras.layers.Maximum): the elementwise maximum of a list of tensors.
//
//   Tensor m = L::Maximum()({a, b});
//
// The inputs follow Keras's merge rules (layers/merging/merge.hpp): one batch size, the other axes broadcast
// right-aligned, a lower-rank input gets size-1 axes after its batch axis. Masks (Keras's
// _apply_merge_op_and_or_mask): a masked position of an input takes the running result's value, so only unmasked
// values compete; when every input has a mask ([batch, steps] for [batch, steps, features] inputs) the output's mask
// is their OR. The gradient goes to the first input on ties.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct MaximumOptions {
  std::optional<std::string> name = std::nullopt;
};

class Maximum : public Merge {
 public:
  explicit Maximum(MaximumOptions options = {});

  std::string class_name() const override { return "Maximum"; }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Maximum>(std::move(*this)); }
};

}  // namespace loom::layers
