#pragma once
// Minimum (keras.layers.Minimum): the elementwise minimum of a list of tensors.
//
//   Tensor m = L::Minimum()({a, b});
//
// The inputs follow Keras's merge rules (layers/merging/merge.hpp): one batch size, the other axes broadcast
// right-aligned, a lower-rank input gets size-1 axes after its batch axis. Masks as Maximum's (Keras's
// _apply_merge_op_and_or_mask). The gradient goes to the first input on ties.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct MinimumOptions {
  std::optional<std::string> name = std::nullopt;
};

class Minimum : public Merge {
 public:
  explicit Minimum(MinimumOptions options = {});

  std::string class_name() const override { return "Minimum"; }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Minimum>(std::move(*this)); }
};

}  // namespace loom::layers
