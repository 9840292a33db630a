#pragma once
// Add (keras.layers.Add): the elementwise sum of a list of tensors, e.g. a residual connection.
//
//   L::Add residual;
//   Tensor y = residual({x, block(x)});
//
// The inputs follow Keras's merge rules (layers/merging/merge.hpp): one batch size, the other axes broadcast
// right-aligned, a lower-rank input gets size-1 axes after its batch axis. Without masks on the inputs the output
// has none; with one on every input it has their OR (Keras).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct AddOptions {
  std::optional<std::string> name = std::nullopt;
};

class Add : public Merge {
 public:
  explicit Add(AddOptions options = {});

  std::string class_name() const override { return "Add"; }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Add>(std::move(*this)); }
};

}  // namespace loom::layers
