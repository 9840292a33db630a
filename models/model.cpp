#include "models/model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "framework/autograd/tape.hpp"
#include "framework/distributed/collectives.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"
#include "framework/tensor/random.hpp"
#include "models/losses.hpp"
#include "models/progbar.hpp"
#include "models/summary.hpp"

namespace loom::layers {

namespace {

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Keras's "crossentropy" auto-selection (compile_utils.py): binary when y_pred has one unit, sparse when the
// labels lack the class axis (or have it with size 1 against several classes), categorical otherwise.
std::string choose_crossentropy(const Shape& y_true, const Shape& y_pred) {
  if (!y_pred.empty() && y_pred.back() == 1) return "binary_crossentropy";
  if (y_true.size() < y_pred.size()) return "sparse_categorical_crossentropy";
  if (!y_true.empty() && y_true.back() == 1 && !y_pred.empty() && y_pred.back() > 1)
    return "sparse_categorical_crossentropy";
  return "categorical_crossentropy";
}

// A loss by Keras name, alias or class name.
LossFunction loss_by_name(const std::string& given, const Shape& y_true, const Shape& y_pred) {
  std::string name = lowercase(given);
  if (name == "crossentropy" || name == "ce") name = choose_crossentropy(y_true, y_pred);
  if (name == "mse" || name == "mean_squared_error" || name == "meansquarederror") return losses::mean_squared_error;
  if (name == "mae" || name == "mean_absolute_error" || name == "meanabsoluteerror") return losses::mean_absolute_error;
  if (name == "bce" || name == "binary_crossentropy" || name == "binarycrossentropy")
    return [](const Tensor& t, const Tensor& p) { return losses::binary_crossentropy(t, p); };
  if (name == "categorical_crossentropy" || name == "categoricalcrossentropy")
    return [](const Tensor& t, const Tensor& p) { return losses::categorical_crossentropy(t, p); };
  if (name == "sparse_categorical_crossentropy" || name == "sparsecategoricalcrossentropy")
    return [](const Tensor& t, const Tensor& p) { return losses::sparse_categorical_crossentropy(t, p); };
  throw Error(fmt::format(
      "Model.compile: unknown loss '{}'; known: mse, mae, binary_crossentropy (bce), categorical_crossentropy, "
      "sparse_categorical_crossentropy, crossentropy (ce, chosen by shapes), their class names, or a function",
      given));
}

// Fisher-Yates with an unbiased bounded draw, so a seed gives the same permutation on every platform.
std::vector<std::int64_t> permutation(std::int64_t n, random::Generator& generator) {
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

std::int64_t steps_for(std::int64_t n, std::int64_t batch_size) { return (n + batch_size - 1) / batch_size; }

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

void check_samples(const char* method, const Tensor& x, const Tensor& y) {
  check(x.defined(), "Model.{}: x is undefined", method);
  check(x.ndim() >= 1, "Model.{}: x needs a batch dimension, got a scalar", method);
  if (!y.defined()) return;
  check(y.ndim() >= 1, "Model.{}: y needs a batch dimension, got a scalar", method);
  check(x.shape()[0] == y.shape()[0], "Model.{}: x and y hold different numbers of samples: x {} and y {} ({} != {})",
        method, x.shape(), y.shape(), x.shape()[0], y.shape()[0]);
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

// Logs over every rank: the loss tracker's and each metric's running (total, count) summed over the ranks in
// one reduction, so each value is the mean over every rank's samples.
Logs global_logs(const metrics::Mean& loss_tracker, const std::vector<std::shared_ptr<metrics::Metric>>& metrics) {
  std::vector<double> state{loss_tracker.total(), loss_tracker.count()};
  for (const auto& m : metrics) {
    state.push_back(m->total());
    state.push_back(m->count());
  }
  state = distributed::allreduce_sum(std::move(state));
  const auto mean = [&state](std::size_t i) { return state[2 * i + 1] > 0.0 ? state[2 * i] / state[2 * i + 1] : 0.0; };
  Logs logs{{"loss", mean(0)}};
  for (std::size_t i = 0; i < metrics.size(); ++i) logs[metrics[i]->name()] = mean(i + 1);
  return logs;
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

// ---- compile -------------------------------------------------------------------------------------------------

Model::Model(std::string_view default_name, std::optional<std::string> name) : Layer(default_name, std::move(name)) {}

void Model::compile(CompileOptions options) {
  check(options.optimizer.get() != nullptr, "{}.compile: the optimizer is null", name());
  if (const auto* given = std::get_if<std::string>(&options.loss))
    check(!given->empty(), "{}.compile: no loss given; pass a Keras loss name or a function", name());
  if (const auto* fn = std::get_if<LossFunction>(&options.loss))
    check(static_cast<bool>(*fn), "{}.compile: the loss function is empty", name());
  // Unknown names fail here rather than at the first batch; "crossentropy" is resolved once shapes are known.
  if (const auto* given = std::get_if<std::string>(&options.loss))
    if (lowercase(*given) != "crossentropy" && lowercase(*given) != "ce") loss_by_name(*given, {}, {});
  optimizer_ = options.optimizer.get();
  loss_spec_ = std::move(options.loss);
  metric_specs_ = std::move(options.metrics);
  loss_ = nullptr;
  metrics_.clear();
  compiled_ = true;
}

void Model::check_compiled(const char* method) const {
  check(compiled_, "{}.{}: the model is not compiled; call compile({{.optimizer, .loss, .metrics}}) first", name(),
        method);
}

// Strings become functions and metric objects once the first batch shows the shapes they depend on.
void Model::resolve_compiled(const Tensor& y_true, const Tensor& y_pred) {
  if (loss_ && metrics_.size() == metric_specs_.size()) return;
  if (const auto* fn = std::get_if<LossFunction>(&loss_spec_))
    loss_ = *fn;
  else
    loss_ = loss_by_name(std::get<std::string>(loss_spec_), y_true.shape(), y_pred.shape());
  metrics_.clear();
  for (const auto& spec : metric_specs_)
    metrics_.push_back(spec.get() ? spec.get() : metrics::get(spec.name(), y_true.shape(), y_pred.shape()));
}

Tensor Model::batch_loss(const Tensor& y_true, const Tensor& y_pred) {
  return ops::mean(loss_(y_true, y_pred), {}, false);
}

// ---- steps ---------------------------------------------------------------------------------------------------

double Model::train_step(const Tensor& x, const Tensor& y) {
  Tensor loss, prediction;
  std::vector<Tensor> gradients;
  std::vector<Variable> variables;
  {
    GradientTape tape;
    prediction = (*this)(x, /*training=*/true);
    resolve_compiled(y, prediction);
    loss = batch_loss(y, prediction);
    variables = trainable_weights();
    check(!variables.empty(), "{}.fit: the model has no trainable weights", name());
    gradients = tape.gradient(loss, variables);
  }
  optimizer_->apply_gradients(gradients, variables);
  NoGradGuard no_grad;
  for (const auto& m : metrics_) m->update_state(y, prediction);
  return loss.item<double>();
}

// A rank whose part of the global batch is empty still joins the step's allreduce, with zero gradients that
// weigh nothing.
void Model::idle_train_step() {
  const std::vector<Variable> variables = trainable_weights();
  std::vector<Tensor> zeros;
  for (const Variable& var : variables) zeros.push_back(Tensor::zeros(var.shape(), var.dtype()));
  optimizer_->apply_gradients(zeros, variables);
}

void Model::check_finite_loss(double loss) const {
  check(std::isfinite(loss), "{}.fit: the loss became {} (check the learning rate and the data)", name(), loss);
}

// Builds the model and resolves the compiled loss and metrics from one sample, so that a rank whose parts are
// all empty still holds the weights and the metric keys that its collective calls exchange.
void Model::prepare_replica(const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  const Tensor prediction = (*this)(ops::slice(x, 0, 0, 1), /*training=*/false);
  resolve_compiled(ops::slice(y, 0, 0, 1), prediction);
}

bool Model::data_parallel() const {
  return optimizer_ && optimizer_->distributed() && distributed::world_size() > 1;
}

double Model::test_step(const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  const Tensor prediction = (*this)(x, /*training=*/false);
  resolve_compiled(y, prediction);
  const Tensor loss = batch_loss(y, prediction);
  for (const auto& m : metrics_) m->update_state(y, prediction);
  return loss.item<double>();
}

Logs Model::metric_logs(double loss) const {
  Logs logs{{"loss", loss}};
  for (const auto& m : metrics_) logs[m->name()] = m->result();
  return logs;
}

// ---- fit / evaluate / predict --------------------------------------------------------------------------------

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  check_compiled("fit");
  check_samples("fit", x, y);
  check(y.defined(), "{}.fit: y is undefined", name());
  check(options.batch_size > 0, "{}.fit: batch_size must be positive, got {}", name(), options.batch_size);
  check(options.epochs >= 0 && options.initial_epoch >= 0 && options.initial_epoch <= options.epochs,
        "{}.fit: need 0 <= initial_epoch <= epochs, got initial_epoch {} and epochs {}", name(),
        options.initial_epoch, options.epochs);
  check(options.verbose >= 0 && options.verbose <= 2, "{}.fit: verbose must be 0, 1 or 2, got {}", name(),
        options.verbose);
  check(options.validation_split >= 0.0 && options.validation_split < 1.0,
        "{}.fit: validation_split must be in [0, 1), got {}", name(), options.validation_split);

  // validation_split holds out the last samples, before any shuffling (Keras's train_validation_split).
  Tensor x_train = x, y_train = y;
  std::optional<std::pair<Tensor, Tensor>> validation = options.validation_data;
  if (validation) {
    check_samples("fit (validation_data)", validation->first, validation->second);
  } else if (options.validation_split > 0.0) {
    const std::int64_t n = x.shape()[0];
    const auto split_at = std::int64_t(std::floor(double(n) * (1.0 - options.validation_split)));
    check(split_at > 0 && split_at < n,
          "{}.fit: validation_split {} of {} samples leaves {} for training and {} for validation; both must be "
          "non-empty",
          name(), options.validation_split, n, split_at, n - split_at);
    validation = std::pair{ops::slice(x, 0, split_at, n), ops::slice(y, 0, split_at, n)};
    x_train = ops::slice(x, 0, 0, split_at);
    y_train = ops::slice(y, 0, 0, split_at);
  }

  const std::int64_t n = x_train.shape()[0];
  check(n > 0, "{}.fit: no training samples (x has shape {})", name(), x_train.shape());
  const std::int64_t steps = steps_for(n, options.batch_size);
  // Data-parallel, batch_size is the global batch: every rank shuffles with rank 0's seed, starts from rank 0's
  // weights and trains on its part of each batch; the parts' gradients are averaged by their sizes, so each
  // step is the one a single process takes on the whole batch.
  const bool sharded = data_parallel();
  const int rank = distributed::rank(), ranks = distributed::world_size();
  std::uint64_t seed = options.seed ? *options.seed : random::thread_generator().next();
  if (sharded) {
    seed = distributed::broadcast(seed);
    prepare_replica(x_train, y_train);
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
    metrics::Mean loss_tracker("loss");  // the running mean over the epoch's samples, as Keras's loss tracker
    for (std::int64_t step = 0; step < steps; ++step) {
      const std::int64_t begin = step * options.batch_size, end = std::min(n, begin + options.batch_size);
      callbacks(&Callback::on_train_batch_begin, int(step), Logs{});
      const RowRange rows = sharded ? part_of(begin, end, rank, ranks) : RowRange{begin, end};
      if (sharded) optimizer_->gradient_aggregator()->set_next_weight(double(rows.size()));
      double loss = 0.0;
      if (rows.size() > 0)
        loss = train_step(batch_rows(x_train, shuffled, rows.begin, rows.end),
                          batch_rows(y_train, shuffled, rows.begin, rows.end));
      else
        idle_train_step();
      loss_tracker.update_state(loss, double(rows.size()));
      epoch_logs = sharded ? global_logs(loss_tracker, metrics_) : metric_logs(loss_tracker.result());
      // Checked on the global value when sharded, so that every rank stops at the same step.
      check_finite_loss(sharded ? epoch_logs.at("loss") : loss);
      callbacks(&Callback::on_train_batch_end, int(step), epoch_logs);
    }
    if (validation) {
      const Logs val = evaluate(validation->first, validation->second,
                                {.batch_size = options.batch_size, .verbose = 0, .out = options.out});
      for (const auto& [key, value] : val) epoch_logs["val_" + key] = value;
    }
    callbacks(&Callback::on_epoch_end, epoch, epoch_logs);
    for (const auto& [key, value] : epoch_logs) history.history[key].push_back(value);
    history.epoch.push_back(epoch);
  }
  callbacks(&Callback::on_train_end, epoch_logs);
  return history;
}

Logs Model::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options) {
  check_compiled("evaluate");
  check_samples("evaluate", x, y);
  check(y.defined(), "{}.evaluate: y is undefined", name());
  const std::int64_t n = x.shape()[0];
  const std::int64_t steps = checked_steps(name(), "evaluate", x, options.batch_size);
  // Data-parallel, each rank evaluates its part of every batch and the logs are global, as in fit.
  const bool sharded = data_parallel();
  const int rank = distributed::rank(), ranks = distributed::world_size();
  if (sharded) prepare_replica(x, y);

  const int progress_verbose = sharded && rank != 0 ? 0 : options.verbose;
  CallbackList callbacks(options.callbacks, *this, progress_verbose, options.out, 1, steps);
  for (const auto& m : metrics_) m->reset_state();
  callbacks(&Callback::on_test_begin, Logs{});
  metrics::Mean loss_tracker("loss");
  Logs logs;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t begin = step * options.batch_size, end = std::min(n, begin + options.batch_size);
    callbacks(&Callback::on_test_batch_begin, int(step), Logs{});
    const RowRange rows = sharded ? part_of(begin, end, rank, ranks) : RowRange{begin, end};
    if (rows.size() > 0) {
      const double loss = test_step(ops::slice(x, 0, rows.begin, rows.end), ops::slice(y, 0, rows.begin, rows.end));
      loss_tracker.update_state(loss, double(rows.size()));
    }
    logs = sharded ? global_logs(loss_tracker, metrics_) : metric_logs(loss_tracker.result());
    callbacks(&Callback::on_test_batch_end, int(step), logs);
  }
  callbacks(&Callback::on_test_end, logs);
  return logs;
}

Tensor Model::predict(const Tensor& x, PredictOptions options) {
  check_samples("predict", x, Tensor());
  const std::int64_t n = x.shape()[0];
  const std::int64_t steps = checked_steps(name(), "predict", x, options.batch_size);

  CallbackList callbacks(options.callbacks, *this, options.verbose, options.out, 1, steps);
  callbacks(&Callback::on_predict_begin, Logs{});
  std::vector<Tensor> outputs;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t begin = step * options.batch_size, end = std::min(n, begin + options.batch_size);
    callbacks(&Callback::on_predict_batch_begin, int(step), Logs{});
    outputs.push_back(predict_on_batch(ops::slice(x, 0, begin, end)));
    callbacks(&Callback::on_predict_batch_end, int(step), Logs{});
  }
  callbacks(&Callback::on_predict_end, Logs{});
  return outputs.size() == 1 ? outputs.front() : ops::concat(outputs, 0);
}

Logs Model::train_on_batch(const Tensor& x, const Tensor& y) {
  check_compiled("train_on_batch");
  check_samples("train_on_batch", x, y);
  for (const auto& m : metrics_) m->reset_state();
  const double loss = train_step(x, y);
  check_finite_loss(loss);
  return metric_logs(loss);
}

Logs Model::test_on_batch(const Tensor& x, const Tensor& y) {
  check_compiled("test_on_batch");
  check_samples("test_on_batch", x, y);
  for (const auto& m : metrics_) m->reset_state();
  const double loss = test_step(x, y);
  return metric_logs(loss);
}

Tensor Model::predict_on_batch(const Tensor& x) {
  NoGradGuard no_grad;
  return (*this)(x, /*training=*/false);
}

// ---- summary -------------------------------------------------------------------------------------------------

std::vector<std::string> Model::child_output_shapes() const {
  std::vector<std::string> out;
  for (const auto& child : layers())
    out.push_back(child->last_output_shape() ? format_output_shape(*child->last_output_shape()) : std::string("?"));
  return out;
}

SummaryTotals Model::summary_totals() const {
  // Totals count each weight once, however many times it is shared.
  SummaryTotals totals{};
  std::set<std::uint64_t> seen;
  for (const auto& w : weights()) {
    if (!seen.insert(w.id()).second) continue;
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

void Model::summary(SummaryOptions options) const { *options.out << summary_string(options) << std::flush; }

// ---- weights files -------------------------------------------------------------------------------------------

// Keys by structure, not by auto-name: each child is known by its class's snake_case name, made unique among
// its siblings by order (dense, dense_1), as Keras's weights files do, so a fresh model loads them.
std::vector<std::pair<std::string, Variable>> Model::named_weights() const {
  std::vector<std::pair<std::string, Variable>> out;
  auto visit = [&](auto& self, const Layer& layer, const std::string& prefix) -> void {
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
