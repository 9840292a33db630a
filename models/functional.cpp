// Model's Functional API: construction from symbolic inputs and outputs, calls, get_layer and the summary
// with its "Connected to" column. The graph itself: models/detail/functional_graph.cpp.
#include "models/model.hpp"

#include <fmt/ranges.h>

#include "framework/graph/symbolic.hpp"
#include "models/detail/functional_graph.hpp"
#include "models/summary.hpp"

namespace loom::layers {

Tensors::Tensors(const std::map<std::string, Tensor>& named) {
  for (const auto& [name, tensor] : named) {
    names_.push_back(name);
    tensors_.push_back(tensor);
  }
}

Model::Model(const Tensors& inputs, const Tensors& outputs, ModelOptions options)
    : Layer("functional", std::move(options.name)) {
  check(inputs.names().empty(), "{}: inputs by name are not supported; give them as a list", name());
  graph_ = std::make_shared<const detail::FunctionalGraph>(inputs.tensors(), outputs.tensors(), name());
  output_names_ = outputs.names();
  if (output_names_.empty())
    for (const auto& t : outputs.tensors()) output_names_.push_back(graph::origin(t).node->name);
  for (const auto& op : graph_->operations())
    if (op.layer) adopt_layer(op.layer);
  // The weights exist (every layer ran on stand-ins): the model is built, in its first input's dtype.
  DType dtype = graph_->inputs().front().dtype();
  for (const auto& w : weights()) dtype = w.dtype();
  mark_built(is_floating(dtype) ? dtype : DType::f32);
  if (!options.trainable) set_trainable(false);
}

const std::vector<Tensor>& Model::inputs() const {
  check(graph_ != nullptr, "{}: inputs() is defined for Functional models only", name());
  return graph_->inputs();
}

const std::vector<Tensor>& Model::outputs() const {
  check(graph_ != nullptr, "{}: outputs() is defined for Functional models only", name());
  return graph_->outputs();
}

std::shared_ptr<Layer> Model::get_layer(const std::string& layer_name) const {
  std::vector<std::string> names;
  for (const auto& layer : layers()) {
    if (layer->name() == layer_name) return layer;
    names.push_back(layer->name());
  }
  throw Error(fmt::format("{}: no layer named '{}'; its layers are [{}]", name(), layer_name, fmt::join(names, ", ")));
}

Tensor Model::call(const Tensor& x, bool training) {
  check(graph_ != nullptr, "{}: a subclassed Model must override call()", name());
  check(graph_->inputs().size() == 1 && graph_->outputs().size() == 1, "{}: the model has {} inputs and {} outputs: "
        "call it with a list of inputs", name(), graph_->inputs().size(), graph_->outputs().size());
  return graph_->run({x}, training).front();
}

std::vector<Tensor> Model::record_model_call(const std::vector<Tensor>& inputs, std::shared_ptr<Layer> owner) {
  auto call = [](Layer& self, const std::vector<Tensor>& v, bool training) {
    return static_cast<Model&>(self)(v, training);
  };
  return record_call(inputs, call, std::move(owner));
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs, bool training) & {
  check(graph_ != nullptr, "{}: a list of inputs calls a Functional model; call this one with one tensor", name());
  if (graph::any_symbolic(inputs)) return record_model_call(inputs, nullptr);
  const CallScope scope(*this);  // the outermost call clears the layers' call losses, as Keras
  auto run = [](Layer& self, const std::vector<Tensor>& in, bool t) { return static_cast<Model&>(self).graph_->run(in, t); };
  // The outputs' sizes for a "larger_than" scope: the graph's, its unknown (batch) sizes counted as 1, as Keras.
  const auto output_shapes = [&] {
    std::vector<Shape> shapes;
    for (const Tensor& output : graph_->outputs()) shapes.push_back(output.shape());
    return shapes;
  };
  return rematerialized_call(inputs, training, output_shapes, run);
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs, bool training) && {
  if (!graph::any_symbolic(inputs)) return (*this)(inputs, training);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  return static_cast<Model&>(*owned).record_model_call(inputs, owned);
}

std::string Model::functional_summary(const SummaryOptions& options) const {
  const bool connections = !graph_->sequential_like();
  std::vector<SummaryRow> rows;
  for (const auto& op : graph_->operations()) {
    std::string params = "0";
    if (op.layer) {
      const Layer& layer = op.layer->get(name());
      params = layer.built() || layer.count_params() > 0 ? format_param_count(layer.count_params()) : "0 (unbuilt)";
    }
    rows.push_back({fmt::format("{} ({})", op.name, op.class_name), graph_->output_shape(op), params,
                    connections ? graph_->connections(op) : std::string()});
  }
  const int line_length = options.line_length.value_or(default_summary_line_length(connections ? 108 : 88));
  return render_summary(name(), rows, summary_totals(), line_length, connections);
}

}  // namespace loom::layers
