#pragma once
// Dropout (keras.layers.Dropout): while training, zeroes each input element with probability `rate` and
// scales the others by 1 / (1 - rate); the identity otherwise (training = false, the default).
//
//   L::Dropout drop(0.1, {.seed = 7});
//   Tensor y = drop(x, /*training=*/true);
//
// With a seed the layer owns a generator seeded once (Keras's SeedGenerator): successive calls draw different
// masks, and the sequence of masks is the same in every run. Without one it draws from this thread's
// generator (random::set_seed). `noise_shape` (the input's rank; -1 = the input's size there, Keras's None)
// shares one mask entry along the axes where it is 1, e.g. {-1, 1, -1} drops the same features at every
// time step of a [batch, time, features] input.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "framework/tensor/random.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct DropoutOptions {
  std::optional<Shape> noise_shape = std::nullopt;
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

class Dropout : public Layer {
 public:
  /// rate in [0, 1]; 1 drops everything (zeros while training), as Keras.
  explicit Dropout(double rate, DropoutOptions options = {});
  /// Passes the input's Keras mask on, as Keras.
  bool supports_masking() const override { return true; }

  double rate() const { return rate_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const DropoutOptions& options() const { return options_; }

 protected:
  /// For the layers built on Dropout's mechanics (SpatialDropout1D/2D): their Keras default name.
  Dropout(std::string_view default_name, double rate, DropoutOptions options);

  Tensor call(const Tensor& x, bool training) override;

 private:
  double rate_;
  DropoutOptions options_;
  std::optional<Shape> noise_shape_;
  std::optional<random::Generator> generator_;  // set when seeded

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Dropout>(std::move(*this)); }
};

}  // namespace loom::layers
