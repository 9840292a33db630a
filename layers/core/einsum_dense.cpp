#include "layers/core/einsum_dense.hpp"

#include <algorithm>
#include <cctype>

#include "framework/ops/ops.hpp"

namespace loom::layers {

namespace {
bool has(const std::string& spec, char letter) { return spec.find(letter) != std::string::npos; }

void check_spec(const std::string& spec, const std::string& what, const std::string& layer,
                const std::string& equation) {
  check(!spec.empty(), "{}: equation '{}' has an empty {} spec", layer, equation, what);
  for (std::size_t i = 0; i < spec.size(); ++i) {
    check(std::isalpha(static_cast<unsigned char>(spec[i])) != 0,
          "{}: equation '{}' must have the form <input>,<kernel>-><output> in letters (no ellipsis), got '{}' in "
          "the {} spec",
          layer, equation, spec[i], what);
    check(spec.find(spec[i], i + 1) == std::string::npos, "{}: equation '{}' repeats '{}' in the {} spec", layer,
          equation, spec[i], what);
  }
}
}  // namespace

EinsumDense::EinsumDense(std::string equation, Shape output_shape, EinsumDenseOptions options)
    : Layer("einsum_dense", options.name),
      equation_(std::move(equation)),
      partial_output_shape_(std::move(output_shape)),
      options_(std::move(options)),
      activation_(options_.activation.function(name())) {
  if (options_.dtype) set_dtype_policy(*options_.dtype);
  set_activity_regularizer(options_.activity_regularizer);
  const auto comma = equation_.find(',');
  const auto arrow = equation_.find("->");
  check(comma != std::string::npos && arrow != std::string::npos && comma < arrow,
        "{}: equation '{}' must have the form <input>,<kernel>-><output>, e.g. 'abc,cde->abde'", name(), equation_);
  input_spec_ = equation_.substr(0, comma);
  kernel_spec_ = equation_.substr(comma + 1, arrow - comma - 1);
  output_spec_ = equation_.substr(arrow + 2);
  check_spec(input_spec_, "input", name(), equation_);
  check_spec(kernel_spec_, "kernel", name(), equation_);
  check_spec(output_spec_, "output", name(), equation_);
  for (char c : output_spec_)
    check(has(input_spec_, c) || has(kernel_spec_, c),
          "{}: output letter '{}' of equation '{}' is in neither the input nor the kernel", name(), c, equation_);
  for (char c : kernel_spec_)
    check(has(input_spec_, c) || has(output_spec_, c),
          "{}: kernel letter '{}' of equation '{}' is in neither the input nor the output", name(), c, equation_);

  check(partial_output_shape_.size() + 1 == output_spec_.size(),
        "{}: output_shape {} must give the {} output dimensions after the batch of equation '{}'", name(),
        partial_output_shape_, output_spec_.size() - 1, equation_);
  for (auto d : partial_output_shape_)
    check(d > 0 || d == -1, "{}: output_shape {} must hold positive sizes or -1 (taken from the input)", name(),
          partial_output_shape_);

  const std::size_t contracted = kernel_spec_.find_first_of(output_spec_);
  const std::size_t c = contracted == std::string::npos ? kernel_spec_.size() : contracted;
  const std::string produced = kernel_spec_.substr(c);
  if (c > 0 && c <= input_spec_.size() && input_spec_.ends_with(kernel_spec_.substr(0, c)) &&
      output_spec_ == input_spec_.substr(0, input_spec_.size() - c) + produced &&
      (!options_.bias_axes || (options_.bias_axes->size() == produced.size() &&
                               produced.find_first_not_of(*options_.bias_axes) == std::string::npos)))
    dense_contraction_ = c;

  if (options_.bias_axes) {
    const std::string& axes = *options_.bias_axes;
    check(!axes.empty(), "{}: bias_axes is empty; leave it unset for no bias", name());
    for (std::size_t i = 0; i < axes.size(); ++i) {
      check(has(output_spec_, axes[i]), "{}: bias axis '{}' is not in the output spec '{}' of equation '{}'", name(),
            axes[i], output_spec_, equation_);
      check(axes.find(axes[i], i + 1) == std::string::npos, "{}: bias_axes '{}' repeats '{}'", name(), axes, axes[i]);
    }
  }
}

EinsumDense::Analysis EinsumDense::analyze(const Shape& input_shape) const {
  check(input_shape.size() == input_spec_.size(), "{}: equation '{}' expects an input of rank {}, got shape {}", name(),
        equation_, input_spec_.size(), input_shape);
  Analysis a;
  // As Keras: the output's first dimension is the input's first (the batch), the rest is output_shape, and
  // dimensions left free (-1) take the input's size.
  a.output_shape.push_back(input_shape[0]);
  a.output_shape.insert(a.output_shape.end(), partial_output_shape_.begin(), partial_output_shape_.end());
  for (std::size_t i = 0; i < output_spec_.size(); ++i) {
    const auto at = input_spec_.find(output_spec_[i]);
    if (at == std::string::npos) {
      check(a.output_shape[i] != -1,
            "{}: output_shape {} leaves dimension '{}' of equation '{}' free, but it is not in the input", name(),
            partial_output_shape_, output_spec_[i], equation_);
      continue;
    }
    const std::int64_t size = input_shape[at];
    check(a.output_shape[i] == -1 || a.output_shape[i] == size,
          "{}: input shape {} and output_shape {} differ at dimension '{}' of equation '{}' ({} != {})", name(),
          input_shape, partial_output_shape_, output_spec_[i], equation_, size, a.output_shape[i]);
    a.output_shape[i] = size;
  }

  // A kernel letter takes its size from the output when it appears there, else from the input (Keras's order),
  // and counts toward fan_out or fan_in accordingly (Keras 3.15's input_axes / output_axes).
  a.fans = {1.0, 1.0};
  for (char c : kernel_spec_) {
    const auto out = output_spec_.find(c);
    const std::int64_t size = out != std::string::npos ? a.output_shape[out] : input_shape[input_spec_.find(c)];
    a.kernel_shape.push_back(size);
    (out != std::string::npos ? a.fans.fan_out : a.fans.fan_in) *= double(size);
  }

  if (options_.bias_axes) {
    const std::string& axes = *options_.bias_axes;
    std::size_t first = output_spec_.size();
    for (char c : axes) first = std::min(first, output_spec_.find(c));
    Shape bias;
    for (std::size_t i = first; i < output_spec_.size(); ++i)
      bias.push_back(has(axes, output_spec_[i]) ? a.output_shape[i] : 1);
    a.bias_shape = bias;
  }
  return a;
}

Shape EinsumDense::compute_output_shape(const Shape& input_shape) const { return analyze(input_shape).output_shape; }

void EinsumDense::build(const Shape& input_shape) {
  const Analysis a = analyze(input_shape);
  kernel_ = add_weight("kernel", a.kernel_shape, options_.kernel_initializer, true, a.fans,
                       options_.kernel_regularizer, options_.kernel_constraint);
  if (a.bias_shape)
    bias_ = add_weight("bias", *a.bias_shape, options_.bias_initializer, true, std::nullopt, options_.bias_regularizer,
                       options_.bias_constraint);
}

Tensor EinsumDense::call(const Tensor& input, bool) {
  check(input.dtype() == dtype() || (dtype_policy().mixed_bfloat16 && is_differentiable(input.dtype())),
        "{}: expected a {} input (the dtype of its weights), got {} of shape {}", name(), dtype(), input.dtype(),
        input.shape());
  const Tensor x = matmul_operand(input);
  const Analysis a = analyze(x.shape());
  check(a.kernel_shape == kernel_.shape(),
        "{}: an input of shape {} needs a kernel of shape {} for equation '{}', but the layer was built with {}",
        name(), x.shape(), a.kernel_shape, equation_, kernel_.shape());
  if (auto y = call_as_dense(x, a.output_shape)) return apply_activation(activation_, *y);
  Tensor y = ops::einsum(equation_, x, matmul_operand(kernel_));
  if (bias_.defined()) y = y + bias_.value();  // the bias covers the trailing output axes, so it broadcasts
  return apply_activation(activation_, y);
}

std::optional<Tensor> EinsumDense::call_as_dense(const Tensor& x, const Shape& output_shape) const {
  if (dense_contraction_ == 0) return std::nullopt;
  // Kernel [C..., Q...] as [prod C, prod Q], the input's trailing C axes as one; the bias, when there is
  // one, covers exactly the Q axes (checked in the constructor), so it is [prod Q]. All views of
  // contiguous tensors.
  const Shape& k = kernel_.shape();
  const auto split = k.begin() + std::ptrdiff_t(dense_contraction_);
  const std::int64_t in = numel(Shape(k.begin(), split)), units = numel(Shape(split, k.end()));
  Shape x_shape(x.shape().begin(), x.shape().end() - std::ptrdiff_t(dense_contraction_));
  x_shape.push_back(in);
  const Tensor bias = bias_.defined() ? ops::reshape(bias_.value(), {units}) : Tensor();
  return ops::reshape(ops::dense(ops::reshape(x, x_shape), ops::reshape(matmul_operand(kernel_), {in, units}), bias),
                      output_shape);
}

}  // namespace loom::layers
