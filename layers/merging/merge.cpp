#include "layers/merging/merge.hpp"

#include <algorithm>

#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"

namespace loom::layers {

namespace {

/// "at least one input", "exactly 2 inputs", "between 2 and 3 inputs".
std::string input_count(std::size_t lo, std::size_t hi) {
  if (lo == hi) return fmt::format("exactly {} input{}", lo, lo == 1 ? "" : "s");
  if (hi == std::numeric_limits<std::size_t>::max())
    return lo == 1 ? std::string("at least one input") : fmt::format("at least {} inputs", lo);
  return fmt::format("between {} and {} inputs", lo, hi);
}

}  // namespace

Shape Merge::compute_output_shape(const std::vector<Shape>& input_shapes) const {
  check(input_shapes.size() >= min_inputs() && input_shapes.size() <= max_inputs(),
        "{}: expected a list of {}, got {} (shapes {})", name(), input_count(min_inputs(), max_inputs()),
        input_shapes.size(), input_shapes);
  std::int64_t batch = -1;
  for (const auto& s : input_shapes) {
    check(!s.empty(), "{}: every input needs a batch axis; got shapes {}", name(), input_shapes);
    if (s[0] == -1) continue;
    check(batch == -1 || s[0] == batch, "{}: cannot merge inputs with different batch sizes: shapes {}", name(),
          input_shapes);
    batch = s[0];
  }
  // Keras's _compute_elemwise_op_output_shape, folded over the inputs' non-batch axes: right-aligned, 1
  // broadcasts, -1 (unknown) against anything is unknown.
  Shape out(input_shapes[0].begin() + 1, input_shapes[0].end());
  for (std::size_t k = 1; k < input_shapes.size(); ++k) {
    const Shape s(input_shapes[k].begin() + 1, input_shapes[k].end());
    const Shape& longer = out.size() >= s.size() ? out : s;
    const Shape& shorter = out.size() >= s.size() ? s : out;
    const std::size_t lead = longer.size() - shorter.size();
    Shape merged(longer.begin(), longer.begin() + std::ptrdiff_t(lead));
    for (std::size_t i = 0; i < shorter.size(); ++i) {
      const std::int64_t a = longer[lead + i], b = shorter[i];
      check(a == -1 || b == -1 || a == 1 || b == 1 || a == b, "{}: inputs have incompatible shapes {}", name(),
            input_shapes);
      merged.push_back(a == -1 || b == -1 ? -1 : a == 1 ? b : a);
    }
    out = std::move(merged);
  }
  out.insert(out.begin(), batch);
  return out;
}

void Merge::check_inputs(const std::vector<Tensor>& inputs) const {
  check(inputs.size() >= min_inputs() && inputs.size() <= max_inputs(), "{}: expected a list of {}, got {}", name(),
        input_count(min_inputs(), max_inputs()), inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check(inputs[i].defined(), "{}: input {} is undefined", name(), i);
    check(is_floating(inputs[i].dtype()) && inputs[i].dtype() == inputs[0].dtype(),
          "{}: expected float32 or float64 inputs of one dtype, got {} (input {}) and {} (input 0)", name(),
          inputs[i].dtype(), i, inputs[0].dtype());
  }
}

Tensor Merge::operator()(const std::vector<Tensor>& inputs, bool training) & {
  return run(inputs, training, nullptr);
}

Tensor Merge::operator()(const std::vector<Tensor>& inputs, bool training) && {
  if (!graph::any_symbolic(inputs)) return run(inputs, training, nullptr);
  check_inputs(inputs);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  auto& self = static_cast<Merge&>(*owned);
  return self.run(inputs, training, std::move(owned));
}

Tensor Merge::run(const std::vector<Tensor>& inputs, bool training, std::shared_ptr<Layer> owner) {
  check_inputs(inputs);
  std::vector<Shape> shapes;
  for (const auto& x : inputs) shapes.push_back(x.shape());
  compute_output_shape(shapes);
  if (!built()) mark_built(inputs[0].dtype());
  if (graph::any_symbolic(inputs)) {
    auto call = [](Layer& layer, const std::vector<Tensor>& values, bool t) {
      return std::vector<Tensor>{static_cast<Merge&>(layer)(values, t)};
    };
    return record_call(inputs, call, std::move(owner)).front();
  }
  std::vector<Tensor> masks;
  for (const auto& x : inputs) masks.push_back(x.keras_mask());
  std::vector<Tensor> merged_inputs = inputs;
  if (expands_ranks()) {
    std::int64_t rank = 0;
    for (const auto& x : inputs) rank = std::max(rank, x.ndim());
    // Keras: the new axes go after the batch axis, so the other axes stay right-aligned.
    for (auto& x : merged_inputs)
      while (x.ndim() < rank) x = ops::expand_dims(x, 1);
  }
  auto run = [](Layer& self, const std::vector<Tensor>& in, bool) {
    return std::vector<Tensor>{static_cast<Merge&>(self).merge(in)};
  };
  const Tensor y = rematerialized_call(merged_inputs, training,
                                       [&] { return std::vector<Shape>{compute_output_shape(shapes)}; }, run)[0];
  note_output(y);
  if (y.keras_mask().defined()) return y;
  const Tensor mask = compute_mask(inputs, masks);
  return mask.defined() ? y.with_keras_mask(mask) : y;
}

Tensor Merge::compute_mask(const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks) const {
  check(masks.size() == inputs.size(), "{}: compute_mask got {} masks for {} inputs", name(), masks.size(),
        inputs.size());
  if (std::any_of(masks.begin(), masks.end(), [](const Tensor& m) { return !m.defined(); })) return Tensor();
  Tensor out;
  for (const auto& m : masks) {
    check(m.dtype() == DType::boolean, "{}: a mask must be boolean, got {} of shape {}", name(), m.dtype(), m.shape());
    if (out.defined()) broadcast_shapes(out.shape(), m.shape(), fmt::format("{}: the inputs' masks", name()));
    out = out.defined() ? ops::logical_or(out, m) : m;
  }
  return out;
}

Tensor Merge::mask_over(const Tensor& x, std::size_t index) const {
  const Tensor mask = x.keras_mask();
  if (!mask.defined()) return mask;
  Shape expanded = mask.shape();
  expanded.push_back(1);
  check(broadcasts_to(expanded, x.shape()),
        "{}: the mask of input {} has shape {}, which does not fit the input's shape {} (expected the input's shape "
        "without its last axis)",
        name(), index, mask.shape(), x.shape());
  return ops::broadcast_to(ops::expand_dims(mask, -1), x.shape());
}

Tensor Merge::merge_with_masks(const std::vector<Tensor>& inputs,
                               const std::function<Tensor(const Tensor&, const Tensor&)>& op) const {
  Tensor output, output_mask;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor x = inputs[i];
    const Tensor mask = mask_over(x, i);
    if (!output.defined()) {
      output = x;
      output_mask = mask;
      continue;
    }
    if (mask.defined()) x = ops::where(mask, x, output);
    if (output_mask.defined()) output = ops::where(output_mask, output, x);
    output_mask = mask.defined() && output_mask.defined() ? ops::logical_or(output_mask, mask) : Tensor();
    output = op(output, x);
  }
  return output_mask.defined() ? output.with_keras_mask(any_last_axis(output_mask)) : output;
}

Tensor Merge::any_last_axis(const Tensor& mask) {
  return ops::cast(ops::sum(ops::cast(mask, DType::f32), {-1}), DType::boolean);
}

}  // namespace loom::layers
