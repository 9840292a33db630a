#pragma once
// A custom layer as a Keras program writes one, and its registration so that .keras archives holding it load
// and save: the learned position table keras.io's text classification example adds to its token embeddings.
// Keras's side is train_in_keras.py's PositionEmbedding, registered as "loom_example>PositionEmbedding".
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <fmt/ranges.h>

#include "loom.hpp"

namespace loom_example {

/// Adds a learned embedding of each position, [sequence_length, output_dim], to inputs [batch, steps,
/// output_dim] (steps <= sequence_length); passes the mask on.
class PositionEmbedding : public loom::layers::Layer {
 public:
  PositionEmbedding(std::int64_t sequence_length, std::int64_t output_dim, std::optional<std::string> name = {})
      : Layer("position_embedding", std::move(name)), sequence_length_(sequence_length), output_dim_(output_dim) {}
  std::string class_name() const override { return "PositionEmbedding"; }
  bool supports_masking() const override { return true; }
  std::int64_t sequence_length() const { return sequence_length_; }
  std::int64_t output_dim() const { return output_dim_; }

 protected:
  void build(const loom::Shape&) override {
    embeddings_ = add_weight("embeddings", {sequence_length_, output_dim_}, "random_normal");
  }
  loom::Tensor call(const loom::Tensor& x, bool) override {
    const std::int64_t steps = x.ndim() == 3 ? x.shape()[1] : -1;
    if (steps < 0 || steps > sequence_length_ || x.shape()[2] != output_dim_) {
      throw loom::Error(fmt::format("{}: expected inputs [batch, steps <= {}, {}], got {}", name(),
                                    sequence_length_, output_dim_, x.shape()));
    }
    return x + loom::ops::slice(embeddings_, 0, 0, steps).reshape({1, steps, output_dim_});
  }
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<PositionEmbedding>(std::move(*this));
  }

 private:
  std::int64_t sequence_length_, output_dim_;
  loom::Variable embeddings_;
};

/// How load_model makes a PositionEmbedding from its config, and how Model::save writes one.
inline loom::models::LayerClass position_embedding_class() {
  return {.from_config =
              [](const loom::models::Config& c) {
                return std::make_shared<PositionEmbedding>(c.get_int("sequence_length"), c.get_int("output_dim"),
                                                           c.get_string("name"));
              },
          .get_config =
              [](const loom::layers::Layer& layer) {
                const auto& p = dynamic_cast<const PositionEmbedding&>(layer);
                loom::models::Config c;
                c.set_int("sequence_length", p.sequence_length());
                c.set_int("output_dim", p.output_dim());
                return c;
              }};
}

/// Keras's registered name for the class (register_keras_serializable(package="loom_example")).
inline const char* const position_embedding_name = "loom_example>PositionEmbedding";

}  // namespace loom_example
