#include "models/model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <fmt/ranges.h>

#include "framework/autograd/numerics.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/distributed/collectives.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"
#include "framework/tensor/memory.hpp"
#include "framework/tensor/random.hpp"
#include "models/detail/functional_graph.hpp"
#include "models/losses.hpp"
#include "models/progbar.hpp"
#include "models/saving/keras_weights_h5.hpp"
#include "models/summary.hpp"

namespace loom::layers {

namespace {

// Fisher-Yates with an unbiased bounded draw, so a seed gives the same permutation on every platform.
std::vector<std::int64_t> permutation(std::int64_t n, random::Generator& generator) {
  check_fits_in_memory(n, sizeof(std::int64_t), "fit: the shuffled order of {} samples", n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[std::size_t(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const std::uint64_t bound = std::uint64_t(i) + 1;
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    std::uint64_t draw;
    do draw = generator.next();
    while (draw >= limit);
    std::swap(order[std::size_t(i)], order[std::size_t(draw % bound)]);
  }
  return order;
}

// ceil(n / batch_size) without n + batch_size - 1, which wraps for a batch_size near 2^63.
std::int64_t steps_for(std::int64_t n, std::int64_t batch_size) { return n / batch_size + (n % batch_size != 0); }

// The number of batches evaluate and predict run over x, after checking there is something to batch.
std::int64_t checked_steps(const std::string& model, const char* method, const Tensor& x, std::int64_t batch_size) {
  check(batch_size > 0, "{}.{}: batch_size must be positive, got {}", model, method, batch_size);
  check(x.shape()[0] > 0, "{}.{}: no samples (x has shape {})", model, method, x.shape());
  return steps_for(x.shape()[0], batch_size);
}

// Rows [begin, end) of x, or the rows named by order[begin, end) when shuffling.
Tensor batch_rows(const Tensor& x, const std::vector<std::int64_t>* order, std::int64_t begin, std::int64_t end) {
  if (order == nullptr) return ops::slice(x, 0, begin, end);
  std::vector<std::int64_t> ids(order->begin() + begin, order->begin() + end);
  return ops::take(x, Tensor::from_vector(ids, Shape{end - begin}), 0);
}

// Rows [begin, end) of the data.
struct RowRange {
  std::int64_t begin, end;
  std::int64_t size() const { return end - begin; }
};

// The part of global batch [begin, end) that `rank` of `ranks` trains on: contiguous parts whose sizes differ
// by at most one, the larger ones first, as tf.distribute splits a batch.
RowRange part_of(std::int64_t begin, std::int64_t end, int rank, int ranks) {
  const std::int64_t base = (end - begin) / ranks, larger = (end - begin) % ranks;
  const std::int64_t first = begin + rank * base + std::min<std::int64_t>(rank, larger);
  return {first, first + base + (rank < larger ? 1 : 0)};
}

// Fans a hook out to every callback, in order: the user's, then the progress bar when verbose.
struct CallbackList {
  std::vector<std::shared_ptr<Callback>> callbacks;

  CallbackList(const std::vector<CallbackArg>& args, Model& model, int verbose, std::ostream* out, int epochs,
               std::int64_t steps) {
    for (const auto& a : args) add(a.get(), model);
    if (verbose > 0) {
      auto progbar = std::make_shared<ProgbarLogger>(ProgbarOptions{.verbose = verbose, .out = out});
      progbar->set_params(epochs, steps);
      add(progbar, model);
    }
  }
  void add(std::shared_ptr<Callback> callback, Model& model) {
    check(callback != nullptr, "Model: a callback is null");
    callback->set_model(&model);
    callbacks.push_back(std::move(callback));
  }
  template <class Hook, class... Args>
  void operator()(Hook hook, const Args&... args) const {
    for (const auto& c : callbacks) (c.get()->*hook)(args...);
  }
};

}  // namespace

// ---- options -------------------------------------------------------------------------------------------------

OptimizerArg::OptimizerArg(const char* name) : SharedArg(optim::get(name)) {}
OptimizerArg::OptimizerArg(const std::string& name) : SharedArg(optim::get(name)) {}

Model& Callback::model() const {
  check(model_ != nullptr, "Callback: not attached to a model (fit, evaluate and predict attach it)");
  return *model_;
}

// ---- data ----------------------------------------------------------------------------------------------------

// A step's data: the model's inputs in inputs() order, its targets in output order (none for predict) and
// each output's sample weights (undefined where none, or none at all).
struct Model::Batch {
  std::vector<Tensor> x, y, sample_weight;

  std::int64_t samples() const { return x.front().shape()[0]; }
  Batch rows(const std::vector<std::int64_t>* order, std::int64_t begin, std::int64_t end) const {
    Batch out;
    for (const auto& t : x) out.x.push_back(batch_rows(t, order, begin, end));
    for (const auto& t : y) out.y.push_back(batch_rows(t, order, begin, end));
    for (const auto& t : sample_weight) out.sample_weight.push_back(t.defined() ? batch_rows(t, order, begin, end) : t);
    return out;
  }
  /// The weights of output i, undefined when it has none.
  Tensor weight_of(std::size_t i) const { return i < sample_weight.size() ? sample_weight[i] : Tensor(); }
};

namespace {

// "x" for a model's only input, "x[1]" for one of several.
std::string part_name(const char* what, std::size_t index, std::size_t count) {
  return count == 1 ? std::string(what) : fmt::format("{}[{}]", what, index);
}

// Every tensor defined, with a batch axis, all of one number of samples.
void check_samples(const char* method, const std::vector<Tensor>& x, const std::vector<Tensor>& y) {
  std::int64_t samples = -1;
  std::string first;
  const auto check_part = [&](const Tensor& t, const std::string& part) {
    check(t.defined(), "Model.{}: {} is undefined", method, part);
    check(t.ndim() >= 1, "Model.{}: {} needs a batch dimension, got a scalar", method, part);
    if (samples < 0) {
      samples = t.shape()[0];
      first = fmt::format("{} {}", part, t.shape());
      return;
    }
    check(t.shape()[0] == samples, "Model.{}: {} and {} hold different numbers of samples: {} and {} {} ({} != {})",
          method, first.substr(0, first.find(' ')), part, first, part, t.shape(), samples, t.shape()[0]);
  };
  for (std::size_t i = 0; i < x.size(); ++i) check_part(x[i], part_name("x", i, x.size()));
  for (std::size_t i = 0; i < y.size(); ++i) check_part(y[i], part_name("y", i, y.size()));
}

// Tensors in the order `names` gives, from tensors given by name; a loom::Error naming the missing and the
// unknown names.
std::vector<Tensor> by_names(const Tensors& given, const std::vector<std::string>& names, const std::string& model,
                             const char* method, const char* what) {
  std::map<std::string, Tensor> named;
  for (std::size_t i = 0; i < given.names().size(); ++i) named[given.names()[i]] = given.tensors()[i];
  std::vector<Tensor> out;
  std::vector<std::string> missing, unknown;
  for (const auto& n : names) {
    const auto it = named.find(n);
    if (it == named.end())
      missing.push_back(n);
    else
      out.push_back(it->second);
  }
  for (const auto& entry : named)
    if (std::find(names.begin(), names.end(), entry.first) == names.end()) unknown.push_back(entry.first);
  check(missing.empty() && unknown.empty(),
        "{}.{}: {} by name needs exactly the names [{}]; missing [{}], unknown [{}]", model, method, what, fmt::join(names, ", "), fmt::join(missing, ", "), fmt::join(unknown, ", "));
  return out;
}

// Keras's class_weight_to_sample_weights: each sample weighs its class's weight; the class is the label
// ([N] or [N, 1], rounded) or the argmax of a one-hot [N, C] label.
Tensor class_weight_to_sample_weights(const Tensor& y, const ClassWeight& class_weight, const std::string& model,
                                      const char* method) {
  check(y.ndim() == 1 || y.ndim() == 2,
        "{}.{}: class_weight needs one label per sample ([N], [N, 1] or one-hot [N, C]), got y of shape {}", model,
        method, y.shape());
  const Tensor labels = y.ndim() == 2 && y.shape()[1] != 1 ? ops::argmax(y, -1) : ops::reshape(y, {y.shape()[0]});
  const std::vector<double> ids = labels.to_vector<double>();
  std::vector<double> weights(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const double id = std::round(ids[i]);
    const auto it = std::isfinite(id) ? class_weight.find(std::int64_t(id)) : class_weight.end();
    if (it == class_weight.end()) {
      std::vector<std::int64_t> known;
      for (const auto& entry : class_weight) known.push_back(entry.first);
      throw Error(fmt::format("{}.{}: class_weight has no weight for class {} (the label of sample {}); it weighs "
                              "classes [{}]", model, method, ids[i], i, fmt::join(known, ", ")));
    }
    weights[i] = it->second;
  }
  return Tensor::from_vector(weights, Shape{std::int64_t(weights.size())});
}

}  // namespace

std::size_t Model::output_count() const { return graph_ ? graph_->outputs().size() : 1; }

std::vector<Tensor> Model::arrange_inputs(const Tensors& x, const char* method) const {
  const std::size_t expected = graph_ ? graph_->inputs().size() : 1;
  if (!x.names().empty()) {
    check(graph_ != nullptr, "{}.{}: x by name needs a Functional model (inputs named by their Input layers)",
          name(), method);
    std::vector<std::string> names;
    for (const auto& input : graph_->inputs()) names.push_back(graph::origin(input).node->name);
    return by_names(x, names, name(), method, "x");
  }
  check(x.tensors().size() == expected, "{}.{}: the model has {} input{}, got {} tensors for x", name(), method,
        expected, expected == 1 ? "" : "s", x.tensors().size());
  return x.tensors();
}

std::vector<Tensor> Model::arrange_targets(const Tensors& y, const char* method) const {
  const std::size_t expected = output_count();
  if (!y.names().empty()) {
    check(graph_ != nullptr, "{}.{}: y by name needs a Functional model (outputs named by output_names())", name(),
          method);
    return by_names(y, output_names_, name(), method, "y");
  }
  check(y.tensors().size() == expected, "{}.{}: the model has {} output{}, got {} tensors for y", name(), method,
        expected, expected == 1 ? "" : "s", y.tensors().size());
  return y.tensors();
}

std::vector<Tensor> Model::forward(const std::vector<Tensor>& inputs, bool training) {
  if (graph_) return (*this)(inputs, training);
  return {(*this)(inputs.front(), training)};
}

std::vector<Tensor> Model::arrange_sample_weights(const std::optional<Tensors>& sample_weight,
                                                  const std::optional<ClassWeight>& class_weight,
                                                  const std::vector<Tensor>& y, const char* method) const {
  check(!(sample_weight && class_weight), "{}.{}: give sample_weight or class_weight, not both (as Keras)", name(),
        method);
  const std::size_t outputs = output_count();
  if (class_weight) {
    check(outputs == 1, "{}.{}: class_weight is supported for a model with one output only (as Keras); this one "
          "has {}: pass sample_weight per output", name(), method, outputs);
    for (const auto& [id, weight] : *class_weight)
      check(std::isfinite(weight), "{}.{}: class_weight of class {} must be finite, got {}", name(), method, id,
            weight);
    return {class_weight_to_sample_weights(y.front(), *class_weight, name(), method)};
  }
  if (!sample_weight) return {};
  std::vector<Tensor> weights;
  if (!sample_weight->names().empty()) {
    check(graph_ != nullptr, "{}.{}: sample_weight by name needs a Functional model (outputs named by "
          "output_names())", name(), method);
    weights = by_names(*sample_weight, output_names_, name(), method, "sample_weight");
  } else {
    weights = sample_weight->tensors();
    if (weights.size() == 1 && outputs > 1) {
      const Tensor& w = weights.front();
      check(w.defined() && (w.ndim() == 1 || (w.ndim() == 2 && w.shape()[1] == 1)),
            "{}.{}: one sample_weight for a model of {} outputs must hold one weight per sample ([N]), got shape "
            "{}; give one per output for other shapes", name(), method, outputs,
            w.defined() ? w.shape() : Shape{});
      weights.assign(outputs, w);
    }
    check(weights.size() == outputs, "{}.{}: sample_weight has {} tensors for {} output{}", name(), method,
          weights.size(), outputs, outputs == 1 ? "" : "s");
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    const std::string part = part_name("sample_weight", i, weights.size());
    check(w.defined(), "{}.{}: {} is undefined", name(), method, part);
    check(w.dtype() != DType::boolean, "{}.{}: {} must be numeric, got {}", name(), method, part, w.dtype());
    check(w.ndim() >= 1 && w.shape()[0] == y[i].shape()[0],
          "{}.{}: {} of shape {} must hold one weight per sample: its first dimension must be the {} samples of "
          "y", name(), method, part, w.shape(), y[i].shape()[0]);
    const std::optional<numerics::NonFinite> bad = numerics::first_non_finite(w);
    check(!bad, "{}.{}: {} holds {} at element {}", name(), method, part,
          bad ? numerics::non_finite_name(bad->value) : "", bad ? unravel_index(bad->index, w.shape()) : Shape{});
  }
  return weights;
}

// ---- compile -------------------------------------------------------------------------------------------------

Model::Model(std::string_view default_name, std::optional<std::string> name) : Layer(default_name, std::move(name)) {}

namespace {

void check_loss_spec(const LossSpec& spec, const std::string& model, const std::string& which) {
  if (const auto* given = std::get_if<std::string>(&spec)) {
    check(!given->empty(), "{}.compile: no loss given{}; pass a Keras loss name or a function", model, which);
    losses::get(*given, {}, {});  // unknown names fail here rather than at the first batch
  } else if (const auto* fn = std::get_if<LossFunction>(&spec)) {
    check(static_cast<bool>(*fn), "{}.compile: the loss function{} is empty", model, which);
  }
}

// The Loss of one output: a string resolved for the first batch's shapes, a function wrapped as Keras wraps it.
losses::Loss resolve_loss(const LossSpec& spec, const Shape& y_true, const Shape& y_pred) {
  if (const auto* name = std::get_if<std::string>(&spec)) return losses::get(*name, y_true, y_pred);
  if (const auto* fn = std::get_if<LossFunction>(&spec)) return losses::Loss(*fn, "loss");
  return std::get<losses::Loss>(spec);
}

// One entry per output from a single value, a list in output order, or values by output name. `all_named`:
// every output must be named (Keras's loss dicts); otherwise a missing name takes `fallback`.
template <class T>
std::vector<T> per_output(const std::optional<T>& single, const std::vector<T>& list,
                          const std::map<std::string, T>& named, const std::vector<std::string>& outputs,
                          const std::string& model, const char* what, bool all_named, const T& fallback) {
  const std::size_t n = outputs.size();
  if (single) return std::vector<T>(n, *single);
  if (!list.empty()) {
    check(list.size() == n, "{}.compile: {} has {} entries for {} output{} [{}]", model, what, list.size(), n,
          n == 1 ? "" : "s", fmt::join(outputs, ", "));
    return list;
  }
  if (named.empty()) return std::vector<T>(n, fallback);
  std::vector<T> out;
  std::vector<std::string> missing;
  for (const auto& o : outputs) {
    const auto it = named.find(o);
    if (it != named.end()) {
      out.push_back(it->second);
    } else {
      missing.push_back(o);
      out.push_back(fallback);
    }
  }
  for (const auto& entry : named)
    check(std::find(outputs.begin(), outputs.end(), entry.first) != outputs.end(),
          "{}.compile: {} names '{}', which is not an output; the outputs are [{}]", model, what, entry.first,
          fmt::join(outputs, ", "));
  check(!all_named || missing.empty(), "{}.compile: {} by name needs every output; missing [{}] of [{}]", model, what,
        fmt::join(missing, ", "), fmt::join(outputs, ", "));
  return out;
}

}  // namespace

void Model::compile(CompileOptions options) {
  check(options.optimizer.get() != nullptr, "{}.compile: the optimizer is null", name());
  const std::vector<std::string> outputs = graph_ ? output_names_ : std::vector<std::string>{name()};
  const LossArg& loss = options.loss;
  check(loss.single() || !loss.per_output().empty() || !loss.by_name().empty(),
        "{}.compile: no loss given; pass a Keras loss name or a function", name());
  const auto specs = per_output(loss.single(), loss.per_output(), loss.by_name(), outputs, name(), "loss", true,
                                LossSpec(std::string()));
  for (std::size_t i = 0; i < specs.size(); ++i)
    check_loss_spec(specs[i], name(),
                    outputs.size() == 1 ? std::string() : fmt::format(" for output '{}'", outputs[i]));
  const auto weights = per_output(std::optional<double>(), options.loss_weights.per_output(),
                                  options.loss_weights.by_name(), outputs, name(), "loss_weights", false, 1.0);
  for (double w : weights)
    check(std::isfinite(w), "{}.compile: loss_weights must be finite, got {}", name(), fmt::join(weights, ", "));
  const MetricsArg& metrics = options.metrics;
  const auto metric_lists = [&](const MetricsArg& given, const char* what) {
    check(outputs.size() == 1 || given.single().empty(),
          "{}.compile: the model has {} outputs [{}]: give {} as a list per output (MetricsPerOutput) or by output "
          "name (MetricsByOutput), as Keras", name(), outputs.size(), fmt::join(outputs, ", "), what);
    return outputs.size() == 1 && !given.single().empty()
               ? std::vector<std::vector<MetricArg>>{given.single()}
               : per_output(std::optional<std::vector<MetricArg>>(), given.per_output(), given.by_name(), outputs,
                            name(), what, false, std::vector<MetricArg>());
  };
  metric_specs_ = metric_lists(metrics, "metrics");
  weighted_metric_specs_ = metric_lists(options.weighted_metrics, "weighted_metrics");
  // An optimizer that has stepped another model is refused now rather than at the first batch.
  if (built()) options.optimizer.get()->check_variables_are_known(trainable_weights(), "compile");
  optimizer_ = options.optimizer.get();
  compile_options_ = std::move(options);
  loss_specs_ = specs;
  loss_weights_ = weights;
  losses_.clear();
  metrics_.clear();
  metric_outputs_.clear();
  metric_weighted_.clear();
  metric_keys_.clear();
  compiled_ = true;
}

void Model::check_compiled(const char* method) const {
  check(compiled_, "{}.{}: the model is not compiled; call compile({{.optimizer, .loss, .metrics}}) first", name(),
        method);
}

// Strings become losses and metric objects once the first batch shows the shapes they depend on. Metric keys
// follow Keras's CompileMetrics.result: "<output>_<name>" for several outputs, a repeated key gains "_1", "_2",
// and a weighted metric whose key is taken becomes "weighted_<name>".
void Model::resolve_compiled(const std::vector<Tensor>& y_true, const std::vector<Tensor>& y_pred) {
  if (!losses_.empty()) return;
  const std::size_t outputs = loss_specs_.size();
  check(y_pred.size() == outputs, "{}: the model returned {} outputs, expected {}", name(), y_pred.size(), outputs);
  std::vector<losses::Loss> losses;
  for (std::size_t i = 0; i < outputs; ++i) losses.push_back(resolve_loss(loss_specs_[i], y_true[i].shape(), y_pred[i].shape()));
  std::map<std::string, int> taken;
  const auto add = [&](const std::vector<std::vector<MetricArg>>& specs, bool weighted) {
    for (std::size_t i = 0; i < outputs; ++i) {
      const std::string prefix = outputs == 1 ? std::string() : output_names_[i] + "_";
      for (const auto& spec : specs[i]) {
        auto metric = spec.get() ? spec.get() : metrics::get(spec.name(), y_true[i].shape(), y_pred[i].shape());
        metric->build(y_true[i].shape(), y_pred[i].shape());  // every rank's state() then has the same length
        std::string key = prefix + metric->name();
        if (taken.count(key) && weighted) key = prefix + "weighted_" + metric->name();
        if (const int repeats = taken[key]++; repeats > 0) key = fmt::format("{}_{}", key, repeats);
        metric_keys_.push_back(key);
        metric_outputs_.push_back(i);
        metric_weighted_.push_back(weighted);
        metrics_.push_back(std::move(metric));
      }
    }
  };
  add(metric_specs_, false);
  add(weighted_metric_specs_, true);
  losses_ = std::move(losses);
}

// ---- steps ---------------------------------------------------------------------------------------------------

// A step's losses: the total (weighted sum) on the tape, its value, and each output's unweighted loss.
struct Model::StepLosses {
  Tensor total;
  double value = 0.0;
  std::vector<double> outputs;
};

// Each output's Loss with its sample weights, times its loss weight, summed (Keras's CompileLoss).
Model::StepLosses Model::compute_losses(const Batch& batch, const std::vector<Tensor>& y_pred) {
  StepLosses out;
  for (std::size_t i = 0; i < losses_.size(); ++i) {
    const Tensor loss = losses_[i](batch.y[i], y_pred[i], batch.weight_of(i));
    check(loss.ndim() == 0, "{}: the loss '{}' (reduction '{}') gives values of shape {}; training and evaluation "
          "need a scalar: use a reduction other than 'none'", name(), losses_[i].name(), losses_[i].reduction(),
          loss.shape());
    out.outputs.push_back(loss.item<double>());
    const Tensor weighted = loss_weights_[i] == 1.0 ? loss : loss * loss_weights_[i];
    out.total = out.total.defined() ? out.total + weighted : weighted;
  }
  // Keras's compute_loss: each of the model's losses() (weight regularizers, activity regularizers, add_loss),
  // summed, joins the total that is differentiated and logged as "loss"; the per-output values stay without.
  for (const Tensor& extra : losses()) {
    Tensor summed = ops::sum(extra);
    if (out.total.defined() && summed.dtype() != out.total.dtype()) summed = ops::cast(summed, out.total.dtype());
    out.total = out.total.defined() ? out.total + summed : summed;
  }
  if (!out.total.defined()) out.total = Tensor::scalar(0.0, dtype());
  out.value = out.total.item<double>();
  return out;
}

// Keras's CompileMetrics.update_state: the metrics see every sample alike, the weighted ones the batch's weights.
void Model::update_metrics(const Batch& batch, const std::vector<Tensor>& y_pred) {
  NoGradGuard no_grad;
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    const std::size_t i = metric_outputs_[m];
    metrics_[m]->update_state(batch.y[i], y_pred[i], metric_weighted_[m] ? batch.weight_of(i) : Tensor());
  }
}

// A step is applied only when its loss and its gradients are finite; otherwise the forward pass's writes are
// put back and nothing changes (TerminateOnNaN stops there too, but after the bad step).
Model::StepLosses Model::train_step(const Batch& batch, const std::string& where) {
  AssignJournal forward_writes;  // moving statistics that the forward pass updates
  StepLosses losses;
  std::vector<Tensor> predictions, gradients;
  std::vector<Variable> variables;
  {
    GradientTape tape;
    predictions = forward(batch.x, /*training=*/true);
    resolve_compiled(batch.y, predictions);
    losses = compute_losses(batch, predictions);
    variables = trainable_weights();
    check(!variables.empty(), "{}.fit: the model has no trainable weights", name());
    // Data-parallel, the local loss is not the global one: the aggregated gradients decide, the same everywhere.
    if (!data_parallel() && !std::isfinite(losses.value)) {
      forward_writes.restore();
      throw Error(fmt::format("{}.{}: the loss became {}; the step was not applied, the weights are those before "
                              "this batch (check the learning rate and the data)",
                              name(), where, numerics::non_finite_name(losses.value)));
    }
    gradients = tape.gradient(optimizer_->scale_loss(losses.total), variables);  // loss_scale_factor, as Keras
  }
  apply_finite_step(gradients, variables, where, forward_writes);
  update_metrics(batch, predictions);
  return losses;
}

// A rank whose part of the global batch is empty still joins the step's allreduce, with zero gradients that
// weigh nothing.
void Model::idle_train_step(const std::string& where) {
  AssignJournal forward_writes;
  const std::vector<Variable> variables = trainable_weights();
  std::vector<Tensor> zeros;
  for (const Variable& var : variables) zeros.push_back(Tensor::zeros(var.shape(), var.dtype()));
  apply_finite_step(zeros, variables, where, forward_writes);
}

void Model::apply_finite_step(const std::vector<Tensor>& gradients, const std::vector<Variable>& variables,
                              const std::string& where, AssignJournal& forward_writes) {
  forward_writes.stop();  // the optimizer's own writes need no copy
  const std::vector<Tensor> aggregated = optimizer_->aggregate_gradients(gradients, variables);
  for (std::size_t i = 0; i < aggregated.size(); ++i) {
    const std::optional<numerics::NonFinite> bad = numerics::first_non_finite(aggregated[i]);
    if (!bad) continue;
    forward_writes.restore();
    throw Error(fmt::format("{}.{}: the gradient of '{}' (shape {}) holds {} at element {}; the step was not "
                            "applied, the weights are those before this batch (check the learning rate and the data)",
                            name(), where, variables[i].name(), variables[i].shape(),
                            numerics::non_finite_name(bad->value), unravel_index(bad->index, variables[i].shape())));
  }
  optimizer_->apply_aggregated_gradients(aggregated, variables);
}

void Model::check_finite_loss(double loss) const {
  check(std::isfinite(loss), "{}.fit: the loss became {} (check the learning rate and the data)", name(), loss);
}

// Builds the model and resolves the compiled loss and metrics from one sample, so that a rank whose parts are
// all empty still holds the weights and the metric keys that its collective calls exchange.
void Model::prepare_replica(const Batch& data) {
  NoGradGuard no_grad;
  const Batch first = data.rows(nullptr, 0, 1);
  resolve_compiled(first.y, forward(first.x, /*training=*/false));
}

bool Model::data_parallel() const {
  return optimizer_ && optimizer_->distributed() && distributed::world_size() > 1;
}

Model::StepLosses Model::test_step(const Batch& batch) {
  NoGradGuard no_grad;
  const std::vector<Tensor> predictions = forward(batch.x, /*training=*/false);
  resolve_compiled(batch.y, predictions);
  StepLosses losses = compute_losses(batch, predictions);
  update_metrics(batch, predictions);
  return losses;
}

// The running means of a fit epoch or an evaluation over its samples, as Keras's loss trackers: the total
// loss and, for several outputs, each output's loss.
class Model::LossTrackers {
 public:
  explicit LossTrackers(std::size_t outputs) : outputs_(outputs > 1 ? outputs : 0, metrics::Mean("loss")) {}
  void update(const StepLosses& losses, double samples) {
    total_.update_state(losses.value, samples);
    for (std::size_t i = 0; i < outputs_.size(); ++i) outputs_[i].update_state(losses.outputs[i], samples);
  }
  // (total, count) of every tracker, the total's first.
  std::vector<double> state() const {
    std::vector<double> out{total_.total(), total_.count()};
    for (const auto& t : outputs_) {
      out.push_back(t.total());
      out.push_back(t.count());
    }
    return out;
  }
  std::size_t size() const { return 1 + outputs_.size(); }

 private:
  metrics::Mean total_;
  std::vector<metrics::Mean> outputs_;
};

// "loss", each output's "<name>_loss" (several outputs) and the metrics. `global`: over every rank, the
// trackers' running (total, count) and every metric's state() summed over the ranks in one reduction; a
// metric reads its global result() from the summed state, then gets its own state back.
Logs Model::logs_of(const LossTrackers& trackers, bool global) const {
  std::vector<double> state = trackers.state();
  std::vector<std::size_t> metric_offsets;
  for (const auto& m : metrics_) {
    metric_offsets.push_back(state.size());
    const std::vector<double> own = m->state();
    state.insert(state.end(), own.begin(), own.end());
  }
  if (global) state = distributed::allreduce_sum(std::move(state));
  const auto mean = [&state](std::size_t i) { return state[2 * i + 1] > 0.0 ? state[2 * i] / state[2 * i + 1] : 0.0; };
  Logs logs{{"loss", mean(0)}};
  for (std::size_t i = 1; i < trackers.size(); ++i) logs[output_names_[i - 1] + "_loss"] = mean(i);
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    if (!global) {
      logs[metric_keys_[m]] = metrics_[m]->result();
      continue;
    }
    const std::size_t begin = metric_offsets[m];
    const std::size_t end = m + 1 < metrics_.size() ? metric_offsets[m + 1] : state.size();
    const std::vector<double> own = metrics_[m]->state();
    metrics_[m]->set_state(std::vector<double>(state.begin() + std::ptrdiff_t(begin), state.begin() + std::ptrdiff_t(end)));
    logs[metric_keys_[m]] = metrics_[m]->result();
    metrics_[m]->set_state(own);
  }
  return logs;
}

// ---- fit / evaluate / predict --------------------------------------------------------------------------------

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  return fit(Tensors(x), Tensors(y), std::move(options));
}

History Model::fit(const Tensors& x, const Tensors& y, FitOptions options) {
  check_compiled("fit");
  Batch data{arrange_inputs(x, "fit"), arrange_targets(y, "fit"), {}};
  check_samples("fit", data.x, data.y);
  data.sample_weight = arrange_sample_weights(options.sample_weight, options.class_weight, data.y, "fit");
  return fit_arranged(std::move(data), std::move(options));
}

History Model::fit_arranged(Batch data, FitOptions options) {
  check(options.batch_size > 0, "{}.fit: batch_size must be positive, got {}", name(), options.batch_size);
  check(options.epochs >= 0 && options.initial_epoch >= 0 && options.initial_epoch <= options.epochs,
        "{}.fit: need 0 <= initial_epoch <= epochs, got initial_epoch {} and epochs {}", name(),
        options.initial_epoch, options.epochs);
  check(options.verbose >= 0 && options.verbose <= 2, "{}.fit: verbose must be 0, 1 or 2, got {}", name(),
        options.verbose);
  check(options.validation_split >= 0.0 && options.validation_split < 1.0,
        "{}.fit: validation_split must be in [0, 1), got {}", name(), options.validation_split);

  // validation_split holds out the last samples, before any shuffling (Keras's train_validation_split).
  Batch train = data;
  std::optional<Batch> validation;
  if (options.validation_data) {
    const ValidationData& given = *options.validation_data;
    validation = Batch{arrange_inputs(given.x, "fit (validation_data)"),
                       arrange_targets(given.y, "fit (validation_data)"), {}};
    check_samples("fit (validation_data)", validation->x, validation->y);
    validation->sample_weight =
        arrange_sample_weights(given.sample_weight, std::nullopt, validation->y, "fit (validation_data)");
  } else if (options.validation_split > 0.0) {
    const std::int64_t n = data.samples();
    const auto split_at = std::int64_t(std::floor(double(n) * (1.0 - options.validation_split)));
    check(split_at > 0 && split_at < n,
          "{}.fit: validation_split {} of {} samples leaves {} for training and {} for validation; both must be "
          "non-empty",
          name(), options.validation_split, n, split_at, n - split_at);
    validation = data.rows(nullptr, split_at, n);
    train = data.rows(nullptr, 0, split_at);
  }

  const std::int64_t n = train.samples();
  check(n > 0, "{}.fit: no training samples (x has shape {})", name(), train.x.front().shape());
  const std::int64_t steps = steps_for(n, options.batch_size);
  // Data-parallel, batch_size is the global batch: every rank shuffles with rank 0's seed, starts from rank 0's
  // weights and trains on its part of each batch; the parts' gradients are averaged by their sizes, so each
  // step is the one a single process takes on the whole batch.
  const bool sharded = data_parallel();
  const int rank = distributed::rank(), ranks = distributed::world_size();
  std::uint64_t seed = options.seed ? *options.seed : random::thread_generator().next();
  if (sharded) {
    seed = distributed::broadcast(seed);
    prepare_replica(train);
    distributed::broadcast_variables(weights());
  }
  random::Generator generator(seed);

  History history;
  history.params = {options.verbose, options.epochs, steps};
  const int progress_verbose = sharded && rank != 0 ? 0 : options.verbose;  // one progress bar, rank 0's
  CallbackList callbacks(options.callbacks, *this, progress_verbose, options.out, options.epochs, steps);

  stop_training = false;
  callbacks(&Callback::on_train_begin, Logs{});
  Logs epoch_logs;
  for (int epoch = options.initial_epoch; epoch < options.epochs && !stop_training; ++epoch) {
    for (const auto& m : metrics_) m->reset_state();
    callbacks(&Callback::on_epoch_begin, epoch, Logs{});
    const std::vector<std::int64_t> order = options.shuffle ? permutation(n, generator) : std::vector<std::int64_t>{};
    const std::vector<std::int64_t>* shuffled = options.shuffle ? &order : nullptr;
    LossTrackers trackers(output_count());
    for (std::int64_t step = 0; step < steps; ++step) {
      const std::int64_t begin = step * options.batch_size, end = std::min(n, begin + options.batch_size);
      callbacks(&Callback::on_train_batch_begin, int(step), Logs{});
      const RowRange rows = sharded ? part_of(begin, end, rank, ranks) : RowRange{begin, end};
      if (sharded) optimizer_->gradient_aggregator()->set_next_weight(double(rows.size()));
      const std::string where = fmt::format("fit, batch {} of epoch {}", step + 1, epoch + 1);
      StepLosses losses;
      losses.outputs.assign(output_count(), 0.0);
      if (rows.size() > 0)
        losses = train_step(train.rows(shuffled, rows.begin, rows.end), where);
      else
        idle_train_step(where);
      trackers.update(losses, double(rows.size()));
      epoch_logs = logs_of(trackers, sharded);
      // Data-parallel, the global loss is checked too, so that every rank stops at the same step.
      if (sharded) check_finite_loss(epoch_logs.at("loss"));
      callbacks(&Callback::on_train_batch_end, int(step), epoch_logs);
    }
    if (validation) {
      const Logs val = evaluate_arranged(*validation, {.batch_size = options.batch_size, .verbose = 0,
                                                       .out = options.out});
      for (const auto& [key, value] : val) epoch_logs["val_" + key] = value;
    }
    callbacks(&Callback::on_epoch_end, epoch, epoch_logs);
    for (const auto& [key, value] : epoch_logs) history.history[key].push_back(value);
    history.epoch.push_back(epoch);
  }
  if (options.epochs > 0) optimizer_->finalize_variable_values(trainable_weights());  // use_ema: the averages
  callbacks(&Callback::on_train_end, epoch_logs);
  return history;
}

Logs Model::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options) {
  return evaluate(Tensors(x), Tensors(y), std::move(options));
}

Logs Model::evaluate(const Tensors& x, const Tensors& y, EvaluateOptions options) {
  check_compiled("evaluate");
  Batch data{arrange_inputs(x, "evaluate"), arrange_targets(y, "evaluate"), {}};
  check_samples("evaluate", data.x, data.y);
  data.sample_weight = arrange_sample_weights(options.sample_weight, std::nullopt, data.y, "evaluate");
  return evaluate_arranged(data, std::move(options));
}

Logs Model::evaluate_arranged(const Batch& data, EvaluateOptions options) {
  const std::int64_t n = data.samples();
  const std::int64_t steps = checked_steps(name(), "evaluate", data.x.front(), options.batch_size);
  // Data-parallel, each rank evaluates its part of every batch and the logs are global, as in fit.
  const bool sharded = data_parallel();
  const int rank = distributed::rank(), ranks = distributed::world_size();
  if (sharded) prepare_replica(data);

  const int progress_verbose = sharded && rank != 0 ? 0 : options.verbose;
  CallbackList callbacks(options.callbacks, *this, progress_verbose, options.out, 1, steps);
  for (const auto& m : metrics_) m->reset_state();
  callbacks(&Callback::on_test_begin, Logs{});
  LossTrackers trackers(output_count());
  Logs logs;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t begin = step * options.batch_size, end = std::min(n, begin + options.batch_size);
    callbacks(&Callback::on_test_batch_begin, int(step), Logs{});
    const RowRange rows = sharded ? part_of(begin, end, rank, ranks) : RowRange{begin, end};
    if (rows.size() > 0) trackers.update(test_step(data.rows(nullptr, rows.begin, rows.end)), double(rows.size()));
    logs = logs_of(trackers, sharded);
    callbacks(&Callback::on_test_batch_end, int(step), logs);
  }
  callbacks(&Callback::on_test_end, logs);
  return logs;
}

Tensor Model::predict(const Tensor& x, PredictOptions options) {
  check(output_count() == 1, "{}.predict: the model has {} outputs; pass x as Tensors to get one tensor per output",
        name(), output_count());
  return predict(Tensors(x), std::move(options)).front();
}

std::vector<Tensor> Model::predict(const Tensors& x, PredictOptions options) {
  const std::vector<Tensor> inputs = arrange_inputs(x, "predict");
  check_samples("predict", inputs, {});
  return predict_arranged(inputs, std::move(options));
}

std::vector<Tensor> Model::predict_arranged(const std::vector<Tensor>& x, PredictOptions options) {
  const Batch data{x, {}, {}};
  const std::int64_t n = data.samples();
  const std::int64_t steps = checked_steps(name(), "predict", x.front(), options.batch_size);

  CallbackList callbacks(options.callbacks, *this, options.verbose, options.out, 1, steps);
  callbacks(&Callback::on_predict_begin, Logs{});
  std::vector<std::vector<Tensor>> batches(output_count());
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t begin = step * options.batch_size, end = std::min(n, begin + options.batch_size);
    callbacks(&Callback::on_predict_batch_begin, int(step), Logs{});
    NoGradGuard no_grad;
    const std::vector<Tensor> outputs = forward(data.rows(nullptr, begin, end).x, /*training=*/false);
    for (std::size_t i = 0; i < outputs.size(); ++i) batches[i].push_back(outputs[i]);
    callbacks(&Callback::on_predict_batch_end, int(step), Logs{});
  }
  callbacks(&Callback::on_predict_end, Logs{});
  std::vector<Tensor> out;
  for (auto& b : batches) out.push_back(b.size() == 1 ? b.front() : ops::concat(b, 0));
  return out;
}

Logs Model::train_on_batch(const Tensor& x, const Tensor& y) { return train_on_batch(Tensors(x), Tensors(y)); }

Logs Model::train_on_batch(const Tensors& x, const Tensors& y, std::optional<Tensors> sample_weight,
                           std::optional<ClassWeight> class_weight) {
  check_compiled("train_on_batch");
  Batch batch{arrange_inputs(x, "train_on_batch"), arrange_targets(y, "train_on_batch"), {}};
  check_samples("train_on_batch", batch.x, batch.y);
  batch.sample_weight = arrange_sample_weights(sample_weight, class_weight, batch.y, "train_on_batch");
  for (const auto& m : metrics_) m->reset_state();
  const StepLosses losses = train_step(batch, "train_on_batch");
  LossTrackers trackers(output_count());
  trackers.update(losses, 1.0);
  return logs_of(trackers, false);
}

Logs Model::test_on_batch(const Tensor& x, const Tensor& y) { return test_on_batch(Tensors(x), Tensors(y)); }

Logs Model::test_on_batch(const Tensors& x, const Tensors& y, std::optional<Tensors> sample_weight) {
  check_compiled("test_on_batch");
  Batch batch{arrange_inputs(x, "test_on_batch"), arrange_targets(y, "test_on_batch"), {}};
  check_samples("test_on_batch", batch.x, batch.y);
  batch.sample_weight = arrange_sample_weights(sample_weight, std::nullopt, batch.y, "test_on_batch");
  for (const auto& m : metrics_) m->reset_state();
  LossTrackers trackers(output_count());
  trackers.update(test_step(batch), 1.0);
  return logs_of(trackers, false);
}

Tensor Model::predict_on_batch(const Tensor& x) {
  check(output_count() == 1, "{}.predict_on_batch: the model has {} outputs; pass x as Tensors", name(),
        output_count());
  return predict_on_batch(Tensors(x)).front();
}

std::vector<Tensor> Model::predict_on_batch(const Tensors& x) {
  const std::vector<Tensor> inputs = arrange_inputs(x, "predict_on_batch");
  check_samples("predict_on_batch", inputs, {});
  NoGradGuard no_grad;
  return forward(inputs, /*training=*/false);
}

// ---- summary -------------------------------------------------------------------------------------------------

std::vector<std::string> Model::child_output_shapes() const {
  std::vector<std::string> out;
  for (const auto& child : layers())
    out.push_back(child->last_output_shape() ? format_output_shape(*child->last_output_shape()) : std::string("?"));
  return out;
}

SummaryTotals Model::summary_totals() const {
  // weights() lists a shared weight once, so each counts once.
  SummaryTotals totals{};
  for (const auto& w : weights()) {
    const std::int64_t count = w.value().numel(), bytes = count * std::int64_t(dtype_size(w.dtype()));
    totals.total += count;
    totals.total_bytes += bytes;
    (w.trainable() ? totals.trainable : totals.non_trainable) += count;
    (w.trainable() ? totals.trainable_bytes : totals.non_trainable_bytes) += bytes;
  }
  if (optimizer_ && optimizer_->count_params() > 0) {
    const std::int64_t count = optimizer_->count_params();
    const std::int64_t bytes = count * std::int64_t(dtype_size(dtype()));
    totals.optimizer_params = count;
    totals.optimizer_bytes = bytes;
    totals.total += count;
    totals.total_bytes += bytes;
  }
  return totals;
}

std::string Model::summary_string(SummaryOptions options) const {
  if (graph_) return functional_summary(options);
  const auto children = layers();
  const auto shapes = child_output_shapes();
  std::vector<SummaryRow> rows;
  for (std::size_t i = 0; i < children.size(); ++i) {
    const Layer& child = *children[i];
    rows.push_back({fmt::format("{} ({})", child.name(), child.class_name()), shapes[i],
                    child.built() || child.count_params() > 0 ? format_param_count(child.count_params())
                                                              : std::string("0 (unbuilt)")});
  }
  return render_summary(name(), rows, summary_totals(), options.line_length.value_or(default_summary_line_length()));
}

void Model::summary(SummaryOptions options) const {
  check(options.out != nullptr, "{}.summary: options.out is null; pass a stream (std::cout by default)", name());
  *options.out << summary_string(options) << std::flush;
}

// ---- weights files -------------------------------------------------------------------------------------------

// Keys by structure, not by auto-name: each child is known by its class's snake_case name, made unique among
// its siblings by order (dense, dense_1), as Keras's weights files do, so a fresh model loads them.
std::vector<std::pair<std::string, Variable>> Model::named_weights() const {
  std::vector<std::pair<std::string, Variable>> out;
  std::set<const Layer*> seen;  // a shared layer is named once, where first met, as weights() lists it
  auto visit = [&](auto& self, const Layer& layer, const std::string& prefix) -> void {
    if (!seen.insert(&layer).second) return;
    for (const auto& w : layer.own_weights()) {
      const std::string& full = w.name();
      out.emplace_back(prefix + full.substr(full.rfind('/') + 1), w);
    }
    std::map<std::string, int> used;
    for (const auto& child : layer.layers()) {
      const int k = used[child->base_name()]++;
      const std::string key = k == 0 ? child->base_name() : fmt::format("{}_{}", child->base_name(), k);
      self(self, *child, prefix + key + "/");
    }
  };
  visit(visit, *this, "");
  return out;
}

namespace {
constexpr const char* kOptimizerPrefix = "optimizer/";

// The optimizer names its state by variable name ("sequential_3/dense/kernel/m"); files use the structural
// keys, so that another instance's optimizer state loads too.
std::map<std::string, std::string> variable_name_to_key(const std::vector<std::pair<std::string, Variable>>& named) {
  std::map<std::string, std::string> out;
  for (const auto& [key, var] : named) out[var.name()] = key;
  return out;
}
}  // namespace

void Model::save_weights(const std::string& path, WeightsOptions options) const {
  check(built(), "{}.save_weights: the model is not built; call it on data or start it with an Input", name());
  if (models::is_keras_weights_path(path)) {
    if (data_parallel() && distributed::rank() != 0) return;
    models::save_keras_weights(*this, path, options.include_optimizer);
    return;
  }
  const auto named = named_weights();
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [key, var] : named) tensors.emplace_back(key, var.value());
  if (options.include_optimizer) {
    check(optimizer_ != nullptr, "{}.save_weights: include_optimizer needs a compiled model", name());
    const auto to_key = variable_name_to_key(named);
    std::vector<Variable> variables;
    for (const auto& [key, var] : named) variables.push_back(var);
    for (auto [state_name, value] : optimizer_->state(variables)) {
      // "<variable name>/<slot>" becomes "optimizer/<key>/<slot>"; "iteration" stays as it is.
      const auto slash = state_name.rfind('/');
      if (slash != std::string::npos) state_name = to_key.at(state_name.substr(0, slash)) + state_name.substr(slash);
      tensors.emplace_back(kOptimizerPrefix + state_name, value);
    }
  }
  if (data_parallel() && distributed::rank() != 0) return;  // the replicas are identical: rank 0 writes the file
  io::save_safetensors(path, tensors, {{"format", "loom"}, {"model", name()}});
}

void Model::load_weights(const std::string& path, WeightsOptions options) {
  check(built(), "{}.load_weights: the model is not built; call it on data or start it with an Input", name());
  if (models::is_keras_weights_path(path)) {
    models::load_keras_weights(*this, path, options.include_optimizer ? models::OptimizerVariables::load
                                                                      : models::OptimizerVariables::ignore);
    return;
  }
  const auto named = named_weights();
  std::map<std::string, Tensor> file;
  for (auto& [key, value] : io::load_safetensors(path)) file.emplace(key, value);

  // Check everything first and report every mismatch at once; only then change anything.
  std::vector<std::string> problems;
  std::set<std::string> expected;
  for (const auto& [key, var] : named) {
    expected.insert(key);
    auto it = file.find(key);
    if (it == file.end()) {
      problems.push_back(fmt::format("'{}' is missing from the file", key));
    } else if (it->second.shape() != var.shape() || it->second.dtype() != var.dtype()) {
      problems.push_back(fmt::format("'{}' is {} {} in the file but {} {} in the model", key, it->second.dtype(),
                                     it->second.shape(), var.dtype(), var.shape()));
    }
  }
  std::map<std::string, Tensor> optimizer_state;
  for (const auto& [key, value] : file) {
    if (key.rfind(kOptimizerPrefix, 0) == 0)
      optimizer_state.emplace(key.substr(std::string(kOptimizerPrefix).size()), value);
    else if (!expected.count(key))
      problems.push_back(fmt::format("'{}' in the file matches no weight of the model", key));
  }
  if (options.include_optimizer) {
    if (optimizer_ == nullptr) problems.push_back("include_optimizer needs a compiled model");
    if (optimizer_state.empty()) problems.push_back("the file holds no optimizer state");
  }
  if (!problems.empty()) {
    std::string message = fmt::format("{}.load_weights: '{}' does not match the model ({} problem{}):", name(), path,
                                      problems.size(), problems.size() == 1 ? "" : "s");
    for (const auto& p : problems) message += "\n  " + p;
    throw Error(message);
  }

  if (options.include_optimizer) {
    std::map<std::string, std::string> key_to_name;
    for (const auto& [name, key] : variable_name_to_key(named)) key_to_name[key] = name;
    std::map<std::string, Tensor> state;
    for (const auto& [key, value] : optimizer_state) {
      const auto slash = key.rfind('/');
      auto it = slash == std::string::npos ? key_to_name.end() : key_to_name.find(key.substr(0, slash));
      state.emplace(it == key_to_name.end() ? key : it->second + key.substr(slash), value);
    }
    std::vector<Variable> variables;
    for (const auto& [key, var] : named) variables.push_back(var);
    optimizer_->load_state(state, variables);  // validates all of it before changing anything
  }
  for (auto [key, var] : named) var.assign(file.at(key));  // Variable is a handle: the copy assigns the weight
}

}  // namespace loom::layers
