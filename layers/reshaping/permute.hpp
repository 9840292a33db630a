#pragma once
// Permute (keras.layers.Permute): reorders the non-batch axes of each sample.
//
//   Tensor y = L::Permute({2, 1})(x);                      // [B, T, F] -> [B, F, T]
//   L::Permute({3, 1, 2});                                 // [B, a, b, c] -> [B, c, a, b]
//
// `dims` numbers the axes from 1 (the batch axis 0 stays first), as Keras: it must be a permutation of
// 1..len(dims), and the input must have rank len(dims) + 1 (empty dims: a rank-1 input, returned as it is).
// Output axis i + 1 is input axis dims[i]. The output is a view of the input (no copy). Masks are not passed on
// (Keras's Permute does not support them).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

struct PermuteOptions {
  std::optional<std::string> name = std::nullopt;
};

class Permute : public Layer {
 public:
  explicit Permute(std::vector<std::int64_t> dims, PermuteOptions options = {});

  const std::vector<std::int64_t>& dims() const { return dims_; }
  std::string class_name() const override { return "Permute"; }
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Permute>(std::move(*this)); }

 private:
  std::vector<std::int64_t> dims_;
};

}  // namespace loom::layers
