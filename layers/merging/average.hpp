#pragma once
// Average (keras.layers.Average): the elementwise mean of a list of tensors.
//
//   Tensor m = L::Average()({a, b, c});
//
// The inputs follow Keras's merge rules (layers/merging/merge.hpp): one batch size, the other axes broadcast
// right-aligned, a lower-rank input gets size-1 axes after its batch axis. The output's mask: the OR of the inputs'
// masks when every input has one (Keras).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct AverageOptions {
  std::optional<std::string> name = std::nullopt;
};

class Average : public Merge {
 public:
  explicit Average(AverageOptions options = {});

  std::string class_name() const override { return "Average"; }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Average>(std::move(*this)); }
};

}  // namespace loom::layers
