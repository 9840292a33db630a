#include "layers/layer.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "framework/autograd/tape.hpp"

namespace loom::layers {

namespace {
std::map<std::string, int, std::less<>>& used_names() {
  thread_local std::map<std::string, int, std::less<>> names;
  return names;
}
}  // namespace

std::string unique_layer_name(std::string_view base) {
  auto [it, first] = used_names().try_emplace(std::string(base), 0);
  if (first) return it->first;
  return fmt::format("{}_{}", base, ++it->second);
}

void reset_layer_names() { used_names().clear(); }

Layer::Layer(std::string_view default_name, std::optional<std::string> name)
    : base_name_(default_name), name_(name ? std::move(*name) : unique_layer_name(default_name)), path_(name_) {
  check(!name_.empty() && name_.find('/') == std::string::npos,
        "Layer: a layer name must be non-empty and contain no '/', got '{}'", name_);
}

Tensor Layer::operator()(const Tensor& x, bool training) {
  check(x.defined(), "{}: the input is undefined", name_);
  maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  return call(x, training);
}

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
  for (const auto& existing : children_)
    check(existing->name() != child->name(), "{}: a child layer named '{}' exists already", path_, child->name());
  child->set_path(path_);
  if (!trainable_) child->set_trainable(false);
  children_.push_back(std::move(child));
}

void Layer::set_path(const std::string& parent_path) {
  path_ = parent_path.empty() ? name_ : parent_path + "/" + name_;
  for (auto& w : weights_) {
    const std::string& old = w.variable.name();
    w.variable.set_name(path_ + old.substr(old.rfind('/')));
  }
  for (auto& child : children_) child->set_path(path_);
}

std::string Layer::class_name() const {
  std::string out;
  bool upper = true;
  for (char c : base_name_) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

void Layer::remove_layer(const Layer& child) {
  auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.get() == &child; });
  check(it != children_.end(), "{}: remove_layer: '{}' is not a child of this layer", path_, child.name());
  (*it)->set_path("");
  children_.erase(it);
}

std::vector<Variable> Layer::own_weights() const {
  std::vector<Variable> out;
  for (bool trainable : {true, false})
    for (const auto& w : weights_)
      if (w.trainable == trainable) out.push_back(w.variable);
  return out;
}

std::vector<Variable> Layer::weights() const {
  std::vector<Variable> out = own_weights();
  for (const auto& child : children_)
    for (auto& v : child->weights()) out.push_back(v);
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
  for (auto& child : children_) child->set_trainable(trainable);
}

}  // namespace loom::layers
