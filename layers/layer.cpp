#include "layers/layer.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"

namespace loom::layers {

namespace {

/// The layer whose call is the outermost one in progress on this thread (Keras's call context); none between
/// calls.
thread_local const Layer* outermost_call = nullptr;
/// Above zero while a symbolic call runs its stand-ins: their losses are not kept (Keras's symbolic calls add
/// none).
thread_local int stand_in_runs = 0;

struct StandInRuns {
  StandInRuns() { ++stand_in_runs; }
  ~StandInRuns() { --stand_in_runs; }
  StandInRuns(const StandInRuns&) = delete;
  StandInRuns& operator=(const StandInRuns&) = delete;
};

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
    : base_name_(default_name),
      name_(name ? std::move(*name) : unique_layer_name(default_name)),
      path_(name_),
      remat_mode_(current_remat_mode()),
      dtype_policy_(mixed_precision::global_policy()) {
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
      last_output_shape_(std::move(other.last_output_shape_)),
      call_losses_(std::move(other.call_losses_)),
      activity_regularizer_(std::move(other.activity_regularizer_)),
      remat_mode_(std::move(other.remat_mode_)),
      dtype_policy_(std::move(other.dtype_policy_)) {
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
  call_losses_ = std::move(other.call_losses_);
  activity_regularizer_ = std::move(other.activity_regularizer_);
  remat_mode_ = std::move(other.remat_mode_);
  dtype_policy_ = std::move(other.dtype_policy_);
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
  std::vector<Tensor> outputs;
  {
    const StandInRuns stand_ins;
    outputs = graph::record(name_, class_name(), inputs, std::move(function), handle, handle->nodes,
                            std::move(attributes), std::move(output_specs));
  }
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
  const CallScope scope(*this);
  maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  if (graph::is_symbolic(x)) {
    auto call = [](Layer& layer, const std::vector<Tensor>& v, bool t) { return std::vector<Tensor>{layer(v[0], t)}; };
    return record_call({x}, call, nullptr, {}, single_spec(compute_output_spec(x))).front();
  }
  const Tensor mask = x.keras_mask();
  const Tensor y = call_on_data(x, mask, training);
  note_output(y);
  if (activity_regularizer_) add_activity_loss(y);
  // As Keras: a layer that supports masking gives its output compute_mask's mask unless call() set one.
  if (!supports_masking() || y.keras_mask().defined()) return y;
  const Tensor out_mask = compute_mask(x, mask);
  return out_mask.defined() ? y.with_keras_mask(out_mask) : y;
}

Tensor Layer::call_on_data(const Tensor& x, const Tensor& mask, bool training) {
  auto compute = [mask](Layer& self, const std::vector<Tensor>& in, bool t) {
    return std::vector<Tensor>{mask.defined() ? self.call_with_mask(in[0], mask, t) : self.call(in[0], t)};
  };
  if (!remat_mode_) return compute(*this, {x}, training)[0];
  const auto output_shapes = [&] { return std::vector<Shape>{compute_output_shape(x.shape())}; };
  return rematerialized_call({x}, training, output_shapes, compute)[0];
}

Tensor Layer::compute_mask(const Tensor&, const Tensor& mask) const { return supports_masking() ? mask : Tensor(); }

Tensor Layer::call_with_mask(const Tensor& x, const Tensor&, bool training) { return call(x, training); }

void Layer::maybe_build(const Shape& input_shape, DType dtype) {
  if (built_) return;
  check(std::all_of(input_shape.begin(), input_shape.end(), [](std::int64_t d) { return d >= -1; }),
        "{}: cannot build for input shape {}: sizes must be >= 0, or -1 where unknown", path_, input_shape);
  dtype_ = dtype_policy_.mixed_bfloat16 ? DType::f32 : dtype;  // mixed precision keeps variables float32
  NoGradGuard no_grad;  // initial values are constants, not part of any computation to differentiate
  build(input_shape);
  built_ = true;
}

void Layer::set_dtype_policy(const std::string& name) {
  check(!built_, "{}: the dtype policy must be set before the layer is built", path_);
  dtype_policy_ = DTypePolicy::from_name(name, path_);
}

Tensor Layer::matmul_operand(const Tensor& t) const {
  return dtype_policy_.mixed_bfloat16 ? ops::cast(t, DType::bf16) : t;
}

void Layer::mark_built(DType dtype) {
  dtype_ = dtype_policy_.mixed_bfloat16 ? DType::f32 : dtype;
  built_ = true;
}

void Layer::build(const Shape&) {}

Tensor Layer::call(const Tensor&, bool) {
  throw Error(fmt::format("{}: this layer does not take a single input tensor", name_));
}

Shape Layer::compute_output_shape(const Shape& input_shape) const { return input_shape; }

std::optional<graph::OutputSpec> Layer::compute_output_spec(const Tensor&) const { return std::nullopt; }

Variable Layer::add_weight(const std::string& name, const Shape& shape, const Initializer& initializer,
                           bool trainable, std::optional<Fans> fans, const Regularizer& regularizer,
                           const Constraint& constraint) {
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
  const std::string weight = fmt::format("{}: weight '{}'", path_, name);
  if (regularizer) regularizer.check_applicable(shape, weight);
  if (constraint) constraint.check_applicable(shape, weight);
  Variable variable(value, path_ + "/" + name, trainable && trainable_);
  if (regularizer)
    variable.set_regularizer([regularizer, path = variable.name()](const Tensor& w) { return regularizer(w, path); });
  if (constraint)
    variable.set_constraint([constraint, path = variable.name()](const Tensor& w) { return constraint(w, path); });
  weights_.push_back({variable, trainable});
  return variable;
}

Layer::CallScope::CallScope(Layer& layer) : outermost_(outermost_call == nullptr) {
  if (!outermost_) return;
  outermost_call = &layer;
  layer.clear_losses();
}

Layer::CallScope::~CallScope() {
  if (outermost_) outermost_call = nullptr;
}

bool Layer::rematerializes(const std::function<std::vector<Shape>()>& output_shapes) const {
  if (!remat_mode_ || !remat_mode_->mode || rematerializing_) return false;
  const std::string& mode = *remat_mode_->mode;
  if (mode == "full") return true;
  if (mode == "list_of_layers")
    return std::find(remat_mode_->layer_names.begin(), remat_mode_->layer_names.end(), name_) !=
           remat_mode_->layer_names.end();
  if (mode != "larger_than") return false;
  // Keras's count: the outputs' sizes summed, unknown sizes as 1. Counting stops past the threshold, so that it
  // cannot overflow.
  const std::int64_t threshold = remat_mode_->output_size_threshold;
  std::int64_t total = 0;
  for (const Shape& shape : output_shapes()) {
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) continue;
    std::int64_t elements = 1;
    for (const std::int64_t d : shape) {
      if (d < 0) continue;
      if (elements > (threshold - total) / d) return true;
      elements *= d;
    }
    total += elements;
    if (total > threshold) return true;
  }
  return false;
}

std::vector<Layer*> Layer::self_and_sublayers() {
  std::vector<Layer*> out{this};
  std::set<const Layer*> seen{this};
  for (std::size_t i = 0; i < out.size(); ++i)
    for (const auto& child : out[i]->layers())
      if (seen.insert(child.get()).second) out.push_back(child.get());
  return out;
}

namespace {
/// While alive, a layer call is in progress on this thread (the recomputation of a rematerialized call runs
/// in the backward pass, outside any call): the calls inside are not outermost, so they keep their losses.
class InsideCall {
 public:
  explicit InsideCall(const Layer& layer) : set_(outermost_call == nullptr) {
    if (set_) outermost_call = &layer;
  }
  ~InsideCall() {
    if (set_) outermost_call = nullptr;
  }
  InsideCall(const InsideCall&) = delete;
  InsideCall& operator=(const InsideCall&) = delete;

 private:
  bool set_;
};
}  // namespace

std::vector<Tensor> Layer::rematerialized_call(const std::vector<Tensor>& inputs, bool training,
                                               const std::function<std::vector<Shape>()>& output_shapes,
                                               LayerCall call) {
  if (!rematerializes(output_shapes)) return call(*this, inputs, training);
  // The call losses added inside (add_loss, sublayers' activity regularizers) become outputs of the function,
  // so that they hang on the remat node, and go back to their layers afterwards: (layer, count) in order.
  using AddedLosses = std::vector<std::pair<std::shared_ptr<LayerHandle>, std::size_t>>;
  auto added = std::make_shared<AddedLosses>();
  std::shared_ptr<std::size_t> output_count = std::make_shared<std::size_t>(0);
  RematFunction fn = [handle = handle(), call = std::move(call), training, added,
                      output_count](const std::vector<Tensor>& in) {
    Layer& self = handle->get("remat");
    const InsideCall inside(self);
    const bool was_rematerializing = std::exchange(self.rematerializing_, true);
    struct Reset {
      Layer& layer;
      bool value;
      ~Reset() { layer.rematerializing_ = value; }
    } reset{self, was_rematerializing};
    std::map<const Layer*, std::size_t> before;
    for (const Layer* layer : self.self_and_sublayers()) before[layer] = layer->call_losses_.size();
    std::vector<Tensor> out = call(self, in, training);
    *output_count = out.size();
    added->clear();
    for (Layer* layer : self.self_and_sublayers()) {
      const auto it = before.find(layer);
      const std::size_t from = it == before.end() ? 0 : std::min(it->second, layer->call_losses_.size());
      if (layer->call_losses_.size() == from) continue;
      added->emplace_back(layer->handle(), layer->call_losses_.size() - from);
      out.insert(out.end(), layer->call_losses_.begin() + std::ptrdiff_t(from), layer->call_losses_.end());
      layer->call_losses_.resize(from);
    }
    return out;
  };
  std::vector<Tensor> out = remat(std::move(fn))(inputs);
  auto loss = out.begin() + std::ptrdiff_t(*output_count);
  for (const auto& [layer, count] : *added) {
    auto& losses = layer->get("remat").call_losses_;
    losses.insert(losses.end(), loss, loss + std::ptrdiff_t(count));
    loss += std::ptrdiff_t(count);
  }
  out.resize(*output_count);
  return out;
}

Tensor Layer::apply_activation(const std::function<Tensor(const Tensor&)>& activation, const Tensor& x) const {
  if (!remat_mode_ || remat_mode_->mode != "activations") return activation(x);
  return remat([activation](const std::vector<Tensor>& in) { return std::vector<Tensor>{activation(in[0])}; })({x})[0];
}

void Layer::clear_losses() {
  call_losses_.clear();
  for (auto& child : layers()) child->clear_losses();
}

void Layer::add_loss(const Tensor& loss) {
  check(loss.defined(), "{}.add_loss: the loss is undefined", name_);
  check(!graph::is_symbolic(loss), "{}.add_loss: got a symbolic tensor of shape {}; add_loss takes the tensors "
        "computed in call() on real inputs (as Keras, where add_loss is eager only)", name_, loss.shape());
  if (stand_in_runs > 0) return;
  call_losses_.push_back(is_floating(loss.dtype()) ? loss : loss.to(DType::f32));
}

void Layer::add_activity_loss(const Tensor& y) {
  Tensor loss = activity_regularizer_(y);
  // Keras divides by the batch size (divide_no_nan: an empty batch gives 0), so that the weighting against
  // the weight penalties does not change with it.
  if (y.ndim() > 0) {
    const std::int64_t batch = y.shape()[0];
    loss = batch == 0 ? Tensor::zeros(loss.shape(), loss.dtype()) : loss / double(batch);
  }
  add_loss(loss);
}

std::vector<Tensor> Layer::losses() const {
  std::vector<Tensor> out = call_losses_;
  // Keras's _flatten_layers(include_self=False): a deque, each layer's children put back at its front.
  std::deque<std::shared_ptr<Layer>> pending;
  for (const auto& child : layers()) pending.push_back(child);
  std::set<const Layer*> seen;
  while (!pending.empty()) {
    const std::shared_ptr<Layer> layer = pending.front();
    pending.pop_front();
    if (!seen.insert(layer.get()).second) continue;
    out.insert(out.end(), layer->call_losses_.begin(), layer->call_losses_.end());
    for (const auto& child : layer->layers()) pending.push_front(child);
  }
  for (const Variable& v : trainable_weights())
    if (v.regularizer()) out.push_back(v.regularizer()(v.value()));
  return out;
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
