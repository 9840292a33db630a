#include "layers/attention/transformer_encoder.hpp"

#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"

namespace loom::layers {

TransformerEncoder::TransformerEncoder(TransformerEncoderOptions options)
    : Layer("transformer_encoder", options.name), options_(std::move(options)) {
  const auto& o = options_;
  check(o.num_heads > 0, "{}: num_heads must be a positive integer, got {}", name(), o.num_heads);
  check(!o.key_dim || *o.key_dim > 0, "{}: key_dim must be a positive integer or unset, got {}", name(),
        o.key_dim.value_or(0));
  check(!o.d_model || *o.d_model > 0, "{}: d_model must be a positive integer or unset, got {}", name(),
        o.d_model.value_or(0));
  check(o.key_dim || !o.d_model || *o.d_model % o.num_heads == 0,
        "{}: d_model {} is not divisible by num_heads {}; give key_dim (the size of each head)", name(),
        o.d_model.value_or(0), o.num_heads);
  check(o.ff_dim > 0, "{}: ff_dim must be a positive integer, got {}", name(), o.ff_dim);
  check(o.dropout >= 0.0 && o.dropout < 1.0, "{}: dropout must be in [0, 1), got {}", name(), o.dropout);
  check(o.attention_dropout >= 0.0 && o.attention_dropout < 1.0, "{}: attention_dropout must be in [0, 1), got {}",
        name(), o.attention_dropout);
  check(o.epsilon > 0.0, "{}: epsilon must be positive, got {}", name(), o.epsilon);
  activations::get(o.activation, name());  // an unknown name fails here, not at the first call
}

void TransformerEncoder::build(const Shape& input_shape) {
  check(input_shape.size() == 3, "{}: expected an input of rank 3 [batch, seq, d_model], got {}", name(),
        input_shape);
  const std::int64_t width = input_shape.back();
  check(!options_.d_model || *options_.d_model == width,
        "{}: the input's last dimension must be d_model = {}, got an input of shape {}", name(),
        options_.d_model.value_or(0), input_shape);
  check(options_.key_dim || width % options_.num_heads == 0,
        "{}: d_model {} (the input's last dimension, shape {}) is not divisible by num_heads {}; give key_dim", name(),
        width, input_shape, options_.num_heads);
  const std::int64_t key_dim = options_.key_dim.value_or(width / options_.num_heads);

  attention_ = &add_layer(MultiHeadAttention({.num_heads = options_.num_heads,
                                              .key_dim = key_dim,
                                              .dropout = options_.attention_dropout,
                                              .flash_attention = options_.flash_attention,
                                              .name = "self_attention_layer",
                                              .dtype = dtype_policy().name}));
  attention_norm_ = &add_layer(LayerNormalization({.epsilon = options_.epsilon, .name = "self_attention_layer_norm"}));
  attention_dropout_ = &add_layer(Dropout(options_.dropout, {.name = "self_attention_dropout"}));
  feedforward_norm_ = &add_layer(LayerNormalization({.epsilon = options_.epsilon, .name = "feedforward_layer_norm"}));
  intermediate_ = &add_layer(Dense(options_.ff_dim, {.activation = options_.activation,
                                                     .name = "feedforward_intermediate_dense",
                                                     .dtype = dtype_policy().name}));
  output_ = &add_layer(Dense(width, {.name = "feedforward_output_dense", .dtype = dtype_policy().name}));
  feedforward_dropout_ = &add_layer(Dropout(options_.dropout, {.name = "feedforward_dropout"}));

  // Every child sees [batch, seq, width] (the intermediate Dense's output goes to the output Dense).
  attention_->maybe_build(input_shape, dtype());
  attention_norm_->maybe_build(input_shape, dtype());
  feedforward_norm_->maybe_build(input_shape, dtype());
  intermediate_->maybe_build(input_shape, dtype());
  output_->maybe_build(intermediate_->compute_output_shape(input_shape), dtype());
}

Tensor TransformerEncoder::forward(const Tensor& x, const TransformerEncoderCall& o) {
  const bool training = o.training;
  auto attend = [&](const Tensor& h) {
    return (*attention_dropout_)((*attention_)(h, h,
                                               {.value_mask = o.padding_mask,
                                                .attention_mask = o.attention_mask,
                                                .training = training,
                                                .use_causal_mask = o.use_causal_mask}),
                                 training);
  };
  auto feed_forward = [&](const Tensor& h) {
    return (*feedforward_dropout_)((*output_)((*intermediate_)(h, training), training), training);
  };
  if (options_.norm_first) {
    const Tensor h = x + attend((*attention_norm_)(x, training));
    return h + feed_forward((*feedforward_norm_)(h, training));
  }
  const Tensor h = (*attention_norm_)(x + attend(x), training);
  return (*feedforward_norm_)(h + feed_forward(h), training);
}

Tensor TransformerEncoder::call(const Tensor& x, bool training) { return forward(x, {.training = training}); }

std::vector<Tensor> TransformerEncoder::record_encoder(const Tensor& x, const TransformerEncoderCall& options,
                                                       std::shared_ptr<Layer> owner) {
  auto call = [options](Layer& self, const std::vector<Tensor>& v, bool training) {
    TransformerEncoderCall o = options;
    o.padding_mask = v[1];
    o.attention_mask = v[2];
    o.training = training;
    return std::vector<Tensor>{static_cast<TransformerEncoder&>(self)(v[0], o)};
  };
  return record_call({x, options.padding_mask, options.attention_mask}, call, std::move(owner));
}

Tensor TransformerEncoder::operator()(const Tensor& x, const TransformerEncoderCall& options) && {
  if (!graph::any_symbolic(x, options.padding_mask, options.attention_mask)) return (*this)(x, options);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  return static_cast<TransformerEncoder&>(*owned).record_encoder(x, options, owned)[0];
}

Tensor TransformerEncoder::operator()(const Tensor& x, const TransformerEncoderCall& options) & {
  check(x.defined(), "{}: the input is undefined", name());
  if (graph::any_symbolic(x, options.padding_mask, options.attention_mask))
    return record_encoder(x, options, nullptr)[0];
  maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  // Checked here, so that the message names this layer rather than its attention child.
  if (options.padding_mask.defined()) {
    const Shape tokens{x.size(0), x.size(1)};
    check(options.padding_mask.shape() == tokens,
          "{}: padding_mask must have shape {} ([batch, seq] of the input {}), got {}", name(), tokens, x.shape(),
          options.padding_mask.shape());
  }
  auto run = [options](Layer& self, const std::vector<Tensor>& in, bool training) {
    TransformerEncoderCall o = options;
    o.training = training;
    return std::vector<Tensor>{static_cast<TransformerEncoder&>(self).forward(in[0], o)};
  };
  const Tensor y = rematerialized_call({x}, options.training, [&] { return std::vector<Shape>{x.shape()}; }, run)[0];
  note_output(y);
  return y;
}

}  // namespace loom::layers
