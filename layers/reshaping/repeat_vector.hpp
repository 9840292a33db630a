#pragma once
// RepeatVector (keras.layers.RepeatVector): repeats each sample's feature vector n times.
//
//   Tensor y = L::RepeatVector(3)(x);                      // [B, F] -> [B, 3, F]
//
// n must be positive; the input must have rank 2. Masks are not passed on (as Keras).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct RepeatVectorOptions {
  std::optional<std::string> name = std::nullopt;
};

class RepeatVector : public Layer {
 public:
  explicit RepeatVector(std::int64_t n, RepeatVectorOptions options = {});

  std::int64_t n() const { return n_; }
  std::string class_name() const override { return "RepeatVector"; }
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<RepeatVector>(std::move(*this)); }

 private:
  std::int64_t n_;
};

}  // namespace loom::layers
