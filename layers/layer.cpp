#include "layers/layer.hpp"

#include <algorithm>
#include <set>

#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"

namespace loom::layers {

namespace {

/// A single output's spec as record_call takes it.
std::optional<std::vector<graph::OutputSpec>> single_spec(std::optional<graph::OutputSpec> spec) {
  if (!spec) return std::nullopt;
  return std::vector<graph::OutputSpec>{std::move(*spec)};
}

}  // namespace

std::string unique_layer_name(std::string_view base) { return graph::unique_name(base); }

void reset_layer_names() { graph::reset_names(); }

Layer& LayerHandle::get(std::string_view user) const {
  check(layer != nullptr, "{}: the layer '{}' it calls was destroyed (a layer object called on symbolic tensors "
        "must outlive the models built from it; hold it by std::shared_ptr, or call a temporary)", user, name);
  return *layer;
}

Layer::Layer(std::string_view default_name, std::optional<std::string> name)
    : base_name_(default_name), name_(name ? std::move(*name) : unique_layer_name(default_name)), path_(name_) {
  check(!name_.empty() && name_.find('/') == std::string::npos,
        "Layer: a layer name must be non-empty and contain no '/', got '{}'", name_);
}

Layer::~Layer() {
  if (auto handle = handle_.lock(); handle && handle->layer == this) handle->layer = nullptr;
}

Layer::Layer(Layer&& other) noexcept
    : base_name_(std::move(other.base_name_)),
      name_(std::move(other.name_)),
      path_(std::move(other.path_)),
      built_(other.built_),
      trainable_(other.trainable_),
      dtype_(other.dtype_),
      weights_(std::move(other.weights_)),
      children_(std::move(other.children_)),
      handle_(std::move(other.handle_)),
      last_output_shape_(std::move(other.last_output_shape_)) {
  if (auto handle = handle_.lock()) handle->layer = this;
}

Layer& Layer::operator=(Layer&& other) noexcept {
  if (this == &other) return *this;
  if (auto handle = handle_.lock(); handle && handle->layer == this) handle->layer = nullptr;
  base_name_ = std::move(other.base_name_);
  name_ = std::move(other.name_);
  path_ = std::move(other.path_);
  built_ = other.built_;
  trainable_ = other.trainable_;
  dtype_ = other.dtype_;
  weights_ = std::move(other.weights_);
  children_ = std::move(other.children_);
  handle_ = std::move(other.handle_);
  last_output_shape_ = std::move(other.last_output_shape_);
  if (auto handle = handle_.lock()) handle->layer = this;
  return *this;
}

std::shared_ptr<LayerHandle> Layer::handle() {
  auto handle = handle_.lock();
  if (!handle) {
    handle = std::make_shared<LayerHandle>();
    handle->layer = this;
    handle->name = name_;
    handle_ = handle;
  }
  return handle;
}

std::shared_ptr<Layer> Layer::move_into_shared() && {
  throw Error(fmt::format("{}: a temporary {} was called on a symbolic tensor, but its class does not override "
                          "move_into_shared(): keep the layer in a variable (or a std::shared_ptr) for the model's "
                          "life, or override move_into_shared", name_, class_name()));
}

std::vector<Tensor> Layer::record_call(const std::vector<Tensor>& inputs, LayerCall call,
                                       std::shared_ptr<Layer> owner, graph::Attributes attributes,
                                       std::optional<std::vector<graph::OutputSpec>> output_specs) {
  auto handle = this->handle();
  if (!owner) owner = weak_from_this().lock();  // a layer held by a shared_ptr: the graph shares it
  if (owner) handle->owned = std::move(owner);
  auto function = [handle, call = std::move(call)](const std::vector<Tensor>& values, bool training) {
    Layer& self = handle->get("a Functional model");
    return call(self, values, training);
  };
  auto outputs =
      graph::record(name_, class_name(), inputs, std::move(function), handle, handle->nodes, std::move(attributes),
                    std::move(output_specs));
  ++handle->nodes;
  return outputs;
}

Tensor Layer::operator()(const Tensor& x, bool training) && {
  if (!graph::is_symbolic(x)) return (*this)(x, training);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  Layer& self = *owned;
  self.maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  auto call = [](Layer& layer, const std::vector<Tensor>& v, bool t) { return std::vector<Tensor>{layer(v[0], t)}; };
  return self.record_call({x}, call, std::move(owned), {}, single_spec(self.compute_output_spec(x))).front();
}

Tensor Layer::operator()(const Tensor& x, bool training) & {
  check(x.defined(), "{}: the input is undefined", name_);
  maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  if (graph::is_symbolic(x)) {
    auto call = [](Layer& layer, const std::vector<Tensor>& v, bool t) { return std::vector<Tensor>{layer(v[0], t)}; };
    return record_call({x}, call, nullptr, {}, single_spec(compute_output_spec(x))).front();
  }
  const Tensor mask = x.keras_mask();
  const Tensor y = mask.defined() ? call_with_mask(x, mask, training) : call(x, training);
  note_output(y);
  // As Keras: a layer that supports masking gives its output compute_mask's mask unless call() set one.
  if (!supports_masking() || y.keras_mask().defined()) return y;
  const Tensor out_mask = compute_mask(x, mask);
  return out_mask.defined() ? y.with_keras_mask(out_mask) : y;
}

Tensor Layer::compute_mask(const Tensor&, const Tensor& mask) const { return supports_masking() ? mask : Tensor(); }

Tensor Layer::call_with_mask(const Tensor& x, const Tensor&, bool training) { return call(x, training); }

void Layer::maybe_build(const Shape& input_shape, DType dtype) {
  if (built_) return;
  check(std::all_of(input_shape.begin(), input_shape.end(), [](std::int64_t d) { return d >= -1; }),
        "{}: cannot build for input shape {}: sizes must be >= 0, or -1 where unknown", path_, input_shape);
  dtype_ = dtype;
  NoGradGuard no_grad;  // initial values are constants, not part of any computation to differentiate
  build(input_shape);
  built_ = true;
}

void Layer::mark_built(DType dtype) {
  dtype_ = dtype;
  built_ = true;
}

void Layer::build(const Shape&) {}

Tensor Layer::call(const Tensor&, bool) {
  throw Error(fmt::format("{}: this layer does not take a single input tensor", name_));
}

Shape Layer::compute_output_shape(const Shape& input_shape) const { return input_shape; }

std::optional<graph::OutputSpec> Layer::compute_output_spec(const Tensor&) const { return std::nullopt; }

Variable Layer::add_weight(const std::string& name, const Shape& shape, const Initializer& initializer,
                           bool trainable, std::optional<Fans> fans) {
  for (const auto& w : weights_)
    check(w.variable.name() != path_ + "/" + name, "{}: a weight named '{}' exists already", path_, name);
  check(std::all_of(shape.begin(), shape.end(), [](std::int64_t d) { return d >= 0; }),
        "{}: weight '{}' would have shape {}: a size it takes from the input shape is unknown (-1)", path_, name,
        shape);
  Tensor value;
  {
    NoGradGuard no_grad;
    value = initializer(shape, dtype_, fans);
  }
  Variable variable(value, path_ + "/" + name, trainable && trainable_);
  weights_.push_back({variable, trainable});
  return variable;
}

void Layer::register_child(std::shared_ptr<Layer> child) {
  check(child != nullptr, "{}: add_layer was given no layer", path_);
  auto handle = child->handle();
  handle->owned = std::move(child);
  register_child(std::move(handle), /*re_root=*/true);
}

void Layer::adopt_layer(std::shared_ptr<LayerHandle> layer) { register_child(std::move(layer), /*re_root=*/false); }

void Layer::register_child(std::shared_ptr<LayerHandle> handle, bool re_root) {
  Layer& child = handle->get(name_);
  for (const auto& existing : layers())
    check(existing->name() != child.name(), "{}: a child layer named '{}' exists already", path_, child.name());
  if (re_root) child.set_path(path_);
  if (!trainable_) child.set_trainable(false);
  children_.push_back(std::move(handle));
}

std::vector<std::shared_ptr<Layer>> Layer::layers() const {
  std::vector<std::shared_ptr<Layer>> out;
  out.reserve(children_.size());
  // Aliasing pointers: they keep the handle alive and point at the layer wherever it now lives.
  for (const auto& handle : children_) out.emplace_back(handle, &handle->get(name_));
  return out;
}

void Layer::set_path(const std::string& parent_path) {
  path_ = parent_path.empty() ? name_ : parent_path + "/" + name_;
  for (auto& w : weights_) {
    const std::string& old = w.variable.name();
    w.variable.set_name(path_ + old.substr(old.rfind('/')));
  }
  for (auto& child : layers()) child->set_path(path_);
}

std::string Layer::class_name() const { return graph::camel_case(base_name_); }

void Layer::remove_layer(const Layer& child) {
  auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c->layer == &child; });
  check(it != children_.end(), "{}: remove_layer: '{}' is not a child of this layer", path_, child.name());
  (*it)->get(name_).set_path("");
  children_.erase(it);
}

std::vector<Variable> Layer::own_weights() const {
  std::vector<Variable> out;
  for (bool trainable : {true, false})
    for (const auto& w : weights_)
      if (w.trainable == trainable) out.push_back(w.variable);
  return out;
}

// A layer reached twice (shared by two sub-models) and a variable held twice count once, where first met, as
// Keras's weights do: the optimizer then steps each variable once per batch.
std::vector<Variable> Layer::weights() const {
  std::vector<Variable> out;
  std::set<const Layer*> seen_layers;
  std::set<std::uint64_t> seen_variables;
  auto visit = [&](auto& self, const Layer& layer) -> void {
    if (!seen_layers.insert(&layer).second) return;
    for (const Variable& v : layer.own_weights())
      if (seen_variables.insert(v.id()).second) out.push_back(v);
    for (const auto& child : layer.layers()) self(self, *child);
  };
  visit(visit, *this);
  return out;
}

std::vector<Variable> Layer::trainable_weights() const {
  std::vector<Variable> out;
  for (const auto& v : weights())
    if (v.trainable()) out.push_back(v);
  return out;
}

std::vector<Variable> Layer::non_trainable_weights() const {
  std::vector<Variable> out;
  for (const auto& v : weights())
    if (!v.trainable()) out.push_back(v);
  return out;
}

std::int64_t Layer::count_params() const {
  std::int64_t n = 0;
  for (const auto& v : weights()) n += v.value().numel();
  return n;
}

void Layer::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (auto& w : weights_) w.variable.set_trainable(w.trainable && trainable);
  for (auto& child : layers()) child->set_trainable(trainable);
}

}  // namespace loom::layers
