#include "framework/graph/symbolic.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/ranges.h>

#include "framework/autograd/numerics.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom::graph {

namespace {

/// The two sizes a free (-1) dimension takes in the stand-in runs. Neither is 1, so that a free size never
/// broadcasts where real data would not.
constexpr std::array<std::int64_t, 2> kStandInSizes = {2, 3};

/// A symbolic tensor: no storage, the shape with -1 where free, strides of zeros (never used), and where
/// it comes from. `mask_shape`, when given, is the shape of the Keras mask it carries.
std::shared_ptr<TensorImpl> make_symbolic(const Shape& shape, DType dtype, Origin origin,
                                          const std::optional<Shape>& mask_shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->id = next_tensor_id();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->strides = Strides(shape.size(), 0);
  impl->offset = 0;
  impl->symbolic = std::make_shared<const Origin>(std::move(origin));
  if (mask_shape) impl->keras_mask = make_symbolic(*mask_shape, DType::boolean, {}, std::nullopt);
  return impl;
}

bool has_free_dimension(const Tensor& t) {
  const auto& s = t.shape();
  return std::find(s.begin(), s.end(), std::int64_t(-1)) != s.end();
}

Shape stand_in_shape(const Shape& shape, std::int64_t size) {
  Shape out = shape;
  for (auto& d : out)
    if (d == -1) d = size;
  return out;
}

/// Real data for a symbolic tensor: ones (zeros for integers: a valid index for any lookup, true for
/// booleans), with an all-true mask if the symbolic one carries a mask.
Tensor stand_in(const Tensor& t, std::int64_t size) {
  if (!is_symbolic(t)) return t;
  const Shape shape = stand_in_shape(t.shape(), size);
  Tensor value = t.dtype() == DType::i64 ? Tensor::zeros(shape, t.dtype()) : Tensor::ones(shape, t.dtype());
  const Tensor mask = t.keras_mask();
  if (mask.defined()) value = value.with_keras_mask(Tensor::ones(stand_in_shape(mask.shape(), size), DType::boolean));
  return value;
}

/// The symbolic shape from the stand-in runs' shapes: sizes that differ are free.
Shape merge_shapes(const std::vector<Shape>& runs, const std::string& name) {
  const Shape& first = runs.front();
  Shape out = first;
  for (const Shape& other : runs) {
    check(other.size() == first.size(), "{}: the rank of the output depends on the input's free sizes ({} and {}): "
          "a graph needs a fixed rank", name, first, other);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (other[i] != first[i]) out[i] = -1;
  }
  return out;
}

std::map<std::string, int, std::less<>>& used_names() {
  thread_local std::map<std::string, int, std::less<>> names;
  return names;
}

/// The name keras.ops gives an op whose loom name differs ("mul" is keras.ops.multiply).
std::string_view keras_op_name(std::string_view op) {
  static const std::map<std::string_view, std::string_view> renamed = {
      {"sub", "subtract"}, {"mul", "multiply"}, {"div", "true_divide"}, {"neg", "negative"},
      {"pow", "power"},    {"abs", "absolute"}, {"concat", "concatenate"}};
  const auto it = renamed.find(op);
  return it == renamed.end() ? op : it->second;
}

}  // namespace

std::string camel_case(std::string_view snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

std::string unique_name(std::string_view base) {
  auto [it, first] = used_names().try_emplace(std::string(base), 0);
  if (first) return it->first;
  return fmt::format("{}_{}", base, ++it->second);
}

void reset_names() { used_names().clear(); }

bool is_symbolic(const Tensor& t) { return t.defined() && t.impl().symbolic != nullptr; }

bool any_symbolic(const std::vector<Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return is_symbolic(t); });
}

const Origin& origin(const Tensor& t) {
  check(is_symbolic(t), "graph::origin: the tensor of shape {} is not symbolic", t.defined() ? t.shape() : Shape{});
  return *t.impl().symbolic;
}

Tensor input(const Shape& shape, DType dtype, const std::string& name, const std::string& class_name,
             std::shared_ptr<void> operation) {
  for (auto d : shape)
    check(d >= -1, "Input '{}': sizes must be >= 0, or -1 where free, got shape {}", name, shape);
  auto node = std::make_shared<Node>();
  node->name = name;
  node->class_name = class_name;
  node->operation = std::move(operation);
  node->output_shapes = {shape};
  node->output_dtypes = {dtype};
  node->output_masked = {false};
  return Tensor(make_symbolic(shape, dtype, {node, 0}, std::nullopt));
}

std::vector<Tensor> record(const std::string& name, const std::string& class_name, const std::vector<Tensor>& inputs,
                           NodeFunction function, std::shared_ptr<void> operation, std::size_t node_index,
                           Attributes attributes, std::optional<std::vector<OutputSpec>> outputs) {
  check(any_symbolic(inputs), "{}: graph::record needs a symbolic input", name);
  auto node = std::make_shared<Node>();
  node->name = name;
  node->class_name = class_name;
  node->inputs = inputs;
  node->function = std::move(function);
  node->operation = std::move(operation);
  node->node_index = node_index;
  node->attributes = std::move(attributes);
  std::vector<std::vector<Tensor>> runs;  // the stand-in runs' outputs, when the outputs are not given
  if (outputs) {
    check(!outputs->empty(), "{}: a graph node needs at least one output", name);
    for (const auto& spec : *outputs) {
      node->output_shapes.push_back(spec.shape);
      node->output_dtypes.push_back(spec.dtype);
      node->output_masked.push_back(false);
    }
  } else {
    const bool free = std::any_of(inputs.begin(), inputs.end(),
                                  [](const Tensor& t) { return is_symbolic(t) && has_free_dimension(t); });
    // No tape sees the stand-in runs and check_numerics ignores their made-up values.
    NoGradGuard no_grad;
    numerics::SuspendChecks no_checks;
    for (std::size_t r = 0; r < (free ? kStandInSizes.size() : 1); ++r) {
      std::vector<Tensor> values;
      values.reserve(inputs.size());
      for (const auto& t : inputs) values.push_back(stand_in(t, kStandInSizes[r]));
      try {
        runs.push_back(node->function(values, /*training=*/false));
      } catch (const Error& e) {
        std::vector<std::string> shapes;
        for (const auto& t : inputs)
          if (t.defined()) shapes.push_back(fmt::format("{}", t.shape()));
        throw Error(fmt::format("{} [building the graph: '{}' on inputs of shapes {}, each free size (-1) tried as "
                                "{}]", e.what(), name, fmt::join(shapes, ", "), kStandInSizes[r]));
      }
      check(!runs.back().empty() && runs.back().size() == runs.front().size(), "{}: a graph node must return the "
            "same number of outputs (at least one) on every call, got {} and {}", name, runs.front().size(),
            runs.back().size());
    }
    for (std::size_t i = 0; i < runs.front().size(); ++i) {
      std::vector<Shape> shapes, mask_shapes;
      for (const auto& run : runs) {
        check(run[i].defined(), "{}: output {} of the graph node is undefined", name, i);
        check(!is_symbolic(run[i]), "{}: output {} of the graph node is symbolic on real inputs", name, i);
        shapes.push_back(run[i].shape());
        if (run[i].keras_mask().defined()) mask_shapes.push_back(run[i].keras_mask().shape());
      }
      node->output_shapes.push_back(merge_shapes(shapes, name));
      node->output_dtypes.push_back(runs.front()[i].dtype());
      node->output_masked.push_back(mask_shapes.size() == runs.size());
    }
  }
  std::vector<Tensor> symbolic;
  for (std::size_t i = 0; i < node->output_shapes.size(); ++i) {
    std::optional<Shape> mask_shape;
    if (node->output_masked[i]) {
      std::vector<Shape> shapes;
      for (const auto& run : runs) shapes.push_back(run[i].keras_mask().shape());
      mask_shape = merge_shapes(shapes, name);
    }
    symbolic.push_back(Tensor(make_symbolic(node->output_shapes[i], node->output_dtypes[i], {node, i}, mask_shape)));
  }
  return symbolic;
}

Tensor record_op(const char* op, const std::vector<Tensor>& inputs,
                 std::function<Tensor(const std::vector<Tensor>& values)> function, Attributes attributes) {
  auto call = [function = std::move(function)](const std::vector<Tensor>& values, bool) {
    return std::vector<Tensor>{function(values)};
  };
  const std::string_view name = keras_op_name(op);
  return record(unique_name(name), camel_case(name), inputs, std::move(call), nullptr, 0, std::move(attributes))
      .front();
}

std::string describe(const Tensor& t) {
  if (!is_symbolic(t)) return fmt::format("Tensor(shape={}, dtype={})", t.shape(), t.dtype());
  const Origin& o = origin(t);
  if (!o.node) return fmt::format("KerasTensor(shape={}, dtype={})", t.shape(), t.dtype());
  return fmt::format("KerasTensor(shape={}, dtype={}, from '{}')", t.shape(), t.dtype(), o.node->name);
}

}  // namespace loom::graph
