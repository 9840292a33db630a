#pragma once
// Subtract (keras.layers.Subtract): inputs[0] - inputs[1], for exactly two inputs.
//
//   Tensor d = L::Subtract()({a, b});
//
// The inputs follow Keras's merge rules (layers/merging/merge.hpp): one batch size, the other axes broadcast
// right-aligned, a lower-rank input gets size-1 axes after its batch axis. The output's mask: the OR of both inputs'
// masks when both have one (Keras).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/merging/merge.hpp"

namespace loom::layers {

struct SubtractOptions {
  std::optional<std::string> name = std::nullopt;
};

class Subtract : public Merge {
 public:
  explicit Subtract(SubtractOptions options = {});

  std::string class_name() const override { return "Subtract"; }

 protected:
  std::size_t min_inputs() const override { return 2; }
  std::size_t max_inputs() const override { return 2; }
  Tensor merge(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Subtract>(std::move(*this)); }
};

}  // namespace loom::layers
