#pragma once
// Softmax (keras.layers.Softmax): the softmax over `axis`, one axis or several, with an optional mask.
//
//   L::Softmax softmax;                                    // over the last axis
//   Tensor p = softmax(scores, mask);                      // mask broadcastable to scores, true = keep
//   L::Softmax({.axis = {1, 2}})(x);                       // jointly over two axes: exp(x - logsumexp(x))
//
// The mask (Keras 3's Softmax.call): at most the input's rank, each dimension 1 or the input's (right-aligned);
// boolean, or numeric with > 0.5 meaning keep. Masked positions are set to -1e9 before the softmax and to 0
// after it, so a fully masked row gives zeros. Called on an input that carries a Keras mask, that mask is used
// the same way (it must then broadcast to the input, as in Keras). The output carries the mask it was given
// (Keras passes the call's mask on), as a boolean: a numeric mask is passed on as mask > 0.5, where Keras
// passes the numeric tensor itself.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor/shape.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct SoftmaxOptions {
  Axes axis = -1;
  std::optional<std::string> name = std::nullopt;
};

class Softmax : public Layer {
 public:
  explicit Softmax(SoftmaxOptions options = {});

  using Layer::operator();
  /// Keras's call(inputs, mask=mask); an undefined mask is the same as none (the input's own mask, if any).
  /// On symbolic tensors the call is recorded as a graph node (a temporary moves into the graph).
  Tensor operator()(const Tensor& x, const Tensor& mask, bool training = false) &;
  Tensor operator()(const Tensor& x, const Tensor& mask, bool training = false) &&;

  bool supports_masking() const override { return true; }
  std::string class_name() const override { return "Softmax"; }
  const Axes& axis() const { return axis_; }

 protected:
  Tensor call(const Tensor& x, bool training) override;
  Tensor call_with_mask(const Tensor& x, const Tensor& mask, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Softmax>(std::move(*this)); }

 private:
  /// The call with an explicit mask; on symbolic tensors it records a node, owned by `owner` when given.
  Tensor run_with_mask(const Tensor& x, const Tensor& mask, bool training, std::shared_ptr<Layer> owner);
  /// The mask as a boolean, checked against x.
  Tensor keep_mask(const Tensor& x, const Tensor& mask) const;
  Axes axis_;
};

}  // namespace loom::layers
