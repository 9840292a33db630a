#include "layers/merging/add.hpp"

#include <algorithm>

#include "framework/ops/ops.hpp"

namespace loom::layers {

Add::Add(AddOptions options) : Layer("add", options.name) {}

Shape Add::compute_output_shape(const std::vector<Shape>& input_shapes) const {
  check(!input_shapes.empty(), "{}: expected a list of at least one input", name());
  std::size_t rank = 0;
  for (const auto& s : input_shapes) {
    check(!s.empty(), "{}: every input needs a batch axis; got shapes {}", name(), input_shapes);
    check(s[0] == input_shapes[0][0], "{}: cannot add inputs with different batch sizes: shapes {}", name(),
          input_shapes);
    rank = std::max(rank, s.size());
  }
  // Right-aligned broadcasting of the non-batch axes (Keras's _compute_elemwise_op_output_shape).
  Shape out(rank, 1);
  out[0] = input_shapes[0][0];
  for (const auto& s : input_shapes)
    for (std::size_t i = 1; i < s.size(); ++i) {
      std::int64_t& o = out[rank - s.size() + i];
      check(o == 1 || s[i] == 1 || o == s[i], "{}: inputs have incompatible shapes {}", name(), input_shapes);
      if (s[i] != 1) o = s[i];
    }
  return out;
}

void Add::check_inputs(const std::vector<Tensor>& inputs) const {
  std::vector<Shape> shapes;
  for (const auto& x : inputs) {
    check(x.defined(), "{}: input {} is undefined", name(), shapes.size());
    check(is_floating(x.dtype()) && x.dtype() == inputs[0].dtype(),
          "{}: expected float32 or float64 inputs of one dtype, got {} (input {}) and {} (input 0)", name(), x.dtype(),
          shapes.size(), inputs[0].dtype());
    shapes.push_back(x.shape());
  }
  compute_output_shape(shapes);
}

Tensor Add::operator()(const std::vector<Tensor>& inputs, bool) {
  check_inputs(inputs);
  if (!built()) mark_built(inputs[0].dtype());
  std::size_t rank = 0;
  for (const auto& x : inputs) rank = std::max(rank, std::size_t(x.ndim()));
  Tensor sum;
  for (const auto& x : inputs) {
    Tensor term = x;
    while (std::size_t(term.ndim()) < rank) term = ops::expand_dims(term, 1);  // Keras: new axes after the batch
    sum = sum.defined() ? sum + term : term;
  }
  return sum;
}

}  // namespace loom::layers
