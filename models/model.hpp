#pragma once
// Model: a layer that trains, with Keras's compile / fit / evaluate / predict. Build it from symbolic tensors
// (the Functional API), subclass it (override call and register children with add_layer), or use Sequential.
// Models nest in each other like any layer.
//
//   Tensor tokens = L::Input({12}, {.dtype = DType::i64});
//   Tensor h = L::Embedding(100, 16)(tokens);
//   Model classifier(tokens, L::Dense(3, {.activation = "softmax"})(L::GlobalAveragePooling1D()(h)));
//
//   class Mlp : public L::Model {
//    public:
//     Mlp() : Model("mlp") {}
//    protected:
//     Tensor call(const Tensor& x, bool training) override { return out_(hidden_(x, training), training); }
//    private:
//     L::Dense& hidden_ = add_layer(L::Dense(64, {.activation = "relu"}));
//     L::Dense& out_ = add_layer(L::Dense(10));
//   };
//   Mlp model;
//   model.compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
//   History h = model.fit(x, y, {.epochs = 5, .validation_split = 0.1});
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "layers/layer.hpp"
#include "models/callback.hpp"
#include "models/loss.hpp"
#include "models/metrics.hpp"
#include "models/shared_arg.hpp"
#include "models/summary.hpp"
#include "optim/optimizer.hpp"

namespace loom::layers {

namespace detail {
class FunctionalGraph;  // models/detail/functional_graph.hpp
}  // namespace detail

/// Tensors for a model with one or several inputs or outputs: one tensor, a list of them, or tensors by name
/// (as Keras takes a dict): a Functional model's inputs and outputs, and the x and y of fit, evaluate and
/// predict (by name: x by the Input layers' names, y by output_names()).
class Tensors {
 public:
  Tensors(const Tensor& tensor) : tensors_{tensor} {}                         // NOLINT: implicit
  Tensors(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {}      // NOLINT
  Tensors(std::initializer_list<Tensor> tensors) : tensors_(tensors) {}       // NOLINT
  Tensors(const std::map<std::string, Tensor>& named);                        // NOLINT
  const std::vector<Tensor>& tensors() const { return tensors_; }
  /// The names of tensors given by name, in the map's (sorted) order, as Keras flattens a dict; empty
  /// otherwise.
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<Tensor> tensors_;
  std::vector<std::string> names_;
};

struct ModelOptions {
  std::optional<std::string> name = std::nullopt;
  bool trainable = true;
};

/// A loss for compile: per-sample values from (y_true, y_pred), as the functions of loom::losses; the model
/// reduces them as a Loss with the default reduction (Keras's LossFunctionWrapper).
using LossFunction = losses::LossFunction;
/// One output's loss: a Keras string, a per-sample function, or a Loss object (losses::Huber({.delta = 2.0}))
/// with its own reduction.
using LossSpec = std::variant<std::string, LossFunction, losses::Loss>;

/// compile's loss: one loss (for every output, as Keras applies a single loss), a list with one per output,
/// or one per output name (every output named).
class LossArg {
 public:
  LossArg() = default;
  LossArg(const char* name) : single_(std::string(name)) {}                                 // NOLINT: implicit
  LossArg(std::string name) : single_(std::move(name)) {}                                   // NOLINT
  LossArg(LossFunction function) : single_(std::move(function)) {}                          // NOLINT
  LossArg(losses::Loss loss) : single_(std::move(loss)) {}                                  // NOLINT
  template <class F, std::enable_if_t<std::is_invocable_r_v<Tensor, F, const Tensor&, const Tensor&> &&
                                          !std::is_convertible_v<F, std::string> &&
                                          !std::is_base_of_v<losses::Loss, std::decay_t<F>>,
                                      int> = 0>
  LossArg(F function) : single_(LossFunction(std::move(function))) {}                       // NOLINT
  LossArg(std::initializer_list<LossSpec> per_output) : per_output_(per_output) {}          // NOLINT
  LossArg(std::vector<LossSpec> per_output) : per_output_(std::move(per_output)) {}         // NOLINT
  LossArg(std::map<std::string, LossSpec> by_name) : by_name_(std::move(by_name)) {}        // NOLINT

  const std::optional<LossSpec>& single() const { return single_; }
  const std::vector<LossSpec>& per_output() const { return per_output_; }
  const std::map<std::string, LossSpec>& by_name() const { return by_name_; }

 private:
  std::optional<LossSpec> single_;
  std::vector<LossSpec> per_output_;
  std::map<std::string, LossSpec> by_name_;
};

/// compile's loss_weights: the total loss is the sum of each output's loss times its weight (1 when none
/// given), by position or by output name.
class LossWeights {
 public:
  LossWeights() = default;
  LossWeights(std::initializer_list<double> per_output) : per_output_(per_output) {}           // NOLINT: implicit
  LossWeights(std::vector<double> per_output) : per_output_(std::move(per_output)) {}          // NOLINT
  LossWeights(std::map<std::string, double> by_name) : by_name_(std::move(by_name)) {}         // NOLINT
  const std::vector<double>& per_output() const { return per_output_; }
  const std::map<std::string, double>& by_name() const { return by_name_; }
  bool empty() const { return per_output_.empty() && by_name_.empty(); }

 private:
  std::vector<double> per_output_;
  std::map<std::string, double> by_name_;
};

/// compile's optimizer: a Keras string ("adam", "sgd", "adamw", "rmsprop"), an optimizer object (copied)
/// or a shared_ptr the caller keeps.
class OptimizerArg : public SharedArg<optim::Optimizer> {
 public:
  using SharedArg::SharedArg;
  OptimizerArg(const char* name);         // NOLINT: implicit, as Keras accepts strings
  OptimizerArg(const std::string& name);  // NOLINT
};

/// compile's metric: a Keras string ("accuracy", "mae", ...) resolved at the first batch, or a metric object.
class MetricArg : public SharedArg<metrics::Metric> {
 public:
  using SharedArg::SharedArg;
  MetricArg(const char* name) : SharedArg(nullptr), name_(name) {}          // NOLINT: implicit, as Keras
  MetricArg(std::string name) : SharedArg(nullptr), name_(std::move(name)) {}  // NOLINT
  /// The string given; empty for a metric object.
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

/// compile's metrics: a list (a model with one output), a list per output, or lists by output name, as Keras
/// takes them for several outputs.
class MetricsArg {
 public:
  MetricsArg() = default;
  MetricsArg(std::initializer_list<MetricArg> metrics) : single_(metrics) {}                      // NOLINT: implicit
  MetricsArg(std::vector<MetricArg> metrics) : single_(std::move(metrics)) {}                     // NOLINT
  MetricsArg(std::vector<std::vector<MetricArg>> per_output) : per_output_(std::move(per_output)) {}  // NOLINT
  MetricsArg(std::map<std::string, std::vector<MetricArg>> by_name) : by_name_(std::move(by_name)) {}  // NOLINT
  const std::vector<MetricArg>& single() const { return single_; }
  const std::vector<std::vector<MetricArg>>& per_output() const { return per_output_; }
  const std::map<std::string, std::vector<MetricArg>>& by_name() const { return by_name_; }

 private:
  std::vector<MetricArg> single_;
  std::vector<std::vector<MetricArg>> per_output_;
  std::map<std::string, std::vector<MetricArg>> by_name_;
};
using MetricsPerOutput = std::vector<std::vector<MetricArg>>;
using MetricsByOutput = std::map<std::string, std::vector<MetricArg>>;

// Options, fields in the order of Keras's arguments; loom-only fields after them.
struct CompileOptions {
  OptimizerArg optimizer = "rmsprop";
  /// Keras strings ("mse", "mae", "binary_crossentropy", "categorical_crossentropy",
  /// "sparse_categorical_crossentropy", "crossentropy" to choose by shapes, ...) or per-sample functions.
  LossArg loss = {};
  LossWeights loss_weights = {};
  MetricsArg metrics = {};
  /// Metrics that fit and evaluate weigh by sample_weight (or class_weight), as Keras's weighted_metrics; the
  /// others see every sample alike. A key taken by a metric above becomes "weighted_<name>".
  MetricsArg weighted_metrics = {};
};

/// fit's validation_data: (x, y) or (x, y, sample_weight), as Keras takes a tuple.
struct ValidationData {
  template <class X, class Y>
  ValidationData(std::pair<X, Y> xy) : x(std::move(xy.first)), y(std::move(xy.second)) {}  // NOLINT: implicit
  ValidationData(Tensors inputs, Tensors targets, std::optional<Tensors> weights = std::nullopt)
      : x(std::move(inputs)), y(std::move(targets)), sample_weight(std::move(weights)) {}
  Tensors x, y;
  std::optional<Tensors> sample_weight;
};

/// Keras's class_weight: the weight of each class id; a sample weighs its label's weight (the argmax of a
/// one-hot label). Every label seen must have an entry.
using ClassWeight = std::map<std::int64_t, double>;

struct FitOptions {
  /// Samples per step; under data_parallel(), over all ranks together (each trains on its part).
  std::int64_t batch_size = 32;
  int epochs = 1;
  /// 0 silent, 1 progress bar, 2 one line per epoch.
  int verbose = 1;
  std::vector<CallbackArg> callbacks = {};
  /// The fraction of samples, taken from the end before shuffling, held out for validation.
  double validation_split = 0.0;
  /// (x, y) or (x, y, sample_weight) to validate on; takes precedence over validation_split.
  std::optional<ValidationData> validation_data = std::nullopt;
  /// A new permutation of the training samples each epoch.
  bool shuffle = true;
  /// Weighs each training sample by its class (not with sample_weight, and for one output only, as Keras).
  std::optional<ClassWeight> class_weight = std::nullopt;
  /// A weight per sample ([N]) or per timestep ([N, T]) of every output, or one per output (a list or by
  /// output name); a single [N] weight serves every output. It scales the loss and the weighted_metrics.
  std::optional<Tensors> sample_weight = std::nullopt;
  int initial_epoch = 0;
  /// Seeds the shuffling; by default drawn from the thread's generator (loom::set_seed makes it repeatable),
  /// rank 0's under data_parallel().
  std::optional<std::uint64_t> seed = std::nullopt;
  /// Where the progress goes. On a terminal the bar is redrawn in place; elsewhere each update the bar
  /// lets through (at most one per 0.05 s, and the last) is a new line, as Keras writes.
  std::ostream* out = &std::cout;
};

struct EvaluateOptions {
  std::int64_t batch_size = 32;
  int verbose = 1;
  /// As fit's sample_weight.
  std::optional<Tensors> sample_weight = std::nullopt;
  std::vector<CallbackArg> callbacks = {};
  std::ostream* out = &std::cout;
};

struct PredictOptions {
  std::int64_t batch_size = 32;
  int verbose = 1;
  std::vector<CallbackArg> callbacks = {};
  std::ostream* out = &std::cout;
};

struct SummaryOptions {
  /// Total width; Keras's default (88) or the terminal's width less 4, whichever is smaller.
  std::optional<int> line_length = std::nullopt;
  std::ostream* out = &std::cout;
};

struct WeightsOptions {
  /// Also save (or load) the optimizer's iteration count and slots.
  bool include_optimizer = false;
};

/// What fit returns: per-epoch values of every log key (Keras's History.history), the epochs run and the
/// parameters of the run.
struct History {
  std::map<std::string, std::vector<double>> history;
  std::vector<int> epoch;
  struct Params {
    int verbose = 1;
    int epochs = 1;
    std::int64_t steps = 0;
  } params;
};

class Model : public Layer {
 public:
  /// The Functional API (keras.Model(inputs, outputs)): the graph from `inputs` to `outputs`, built by
  /// calling layers and ops on symbolic tensors. Its layers (Inputs included, as Keras) are layers(), in
  /// Keras's order; each is called anew on every call of the model.
  Model(const Tensors& inputs, const Tensors& outputs, ModelOptions options = {});

  /// One tensor per input, in order; one per output. Also on symbolic tensors (a model is a layer of another).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) &;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) &&;
  using Layer::operator();

  /// True for a model built from inputs and outputs.
  bool is_functional() const { return graph_ != nullptr; }
  /// A Functional model's graph (models/detail/functional_graph.hpp, internal); null for other models.
  const detail::FunctionalGraph* functional_graph() const { return graph_.get(); }
  /// A Functional model's symbolic inputs and outputs, and the names of its outputs (Keras's output_names:
  /// the keys of named outputs, else the names of the layers that made them).
  const std::vector<Tensor>& inputs() const;
  const std::vector<Tensor>& outputs() const;
  const std::vector<std::string>& output_names() const { return output_names_; }
  /// The layer of this name among layers() (Keras get_layer); a loom::Error listing the names otherwise.
  std::shared_ptr<Layer> get_layer(const std::string& name) const;

  /// Sets the optimizer, loss and metrics; required before fit, evaluate, train_on_batch, test_on_batch.
  /// The trainable weights are those of the first training step (Keras captures them at compile; change
  /// trainable and compile again).
  void compile(CompileOptions options);
  bool compiled() const { return compiled_; }

  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  /// fit for a model with several inputs or outputs: x one tensor per input (a list in inputs() order, or by
  /// Input name), y one per output (a list, or by output_names()). The logs hold "loss" (the weighted sum),
  /// and for several outputs each output's "<name>_loss" and "<name>_<metric>".
  History fit(const Tensors& x, const Tensors& y, FitOptions options = {});
  /// The loss and metrics over (x, y), in inference mode: keys "loss" and each metric's name.
  Logs evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  Logs evaluate(const Tensors& x, const Tensors& y, EvaluateOptions options = {});
  /// Outputs for x in batches, in inference mode, without recording on any tape.
  Tensor predict(const Tensor& x, PredictOptions options = {});
  /// One tensor per output, for a model with several inputs or outputs.
  std::vector<Tensor> predict(const Tensors& x, PredictOptions options = {});

  /// One optimizer step on this batch; the loss and metrics of the batch (metrics reset first). sample_weight
  /// and class_weight as fit's.
  Logs train_on_batch(const Tensor& x, const Tensor& y);
  Logs train_on_batch(const Tensors& x, const Tensors& y, std::optional<Tensors> sample_weight = std::nullopt,
                      std::optional<ClassWeight> class_weight = std::nullopt);
  Logs test_on_batch(const Tensor& x, const Tensor& y);
  Logs test_on_batch(const Tensors& x, const Tensors& y, std::optional<Tensors> sample_weight = std::nullopt);
  Tensor predict_on_batch(const Tensor& x);
  std::vector<Tensor> predict_on_batch(const Tensors& x);

  /// Keras's summary table: each direct child layer with its output shape and parameter count, then the
  /// totals and their sizes.
  void summary(SummaryOptions options = {}) const;
  /// The same table as a string.
  std::string summary_string(SummaryOptions options = {}) const;

  /// Writes every weight (and optionally the optimizer state) to a .safetensors file, atomically. Names are
  /// the weights' paths below the model, by class rather than by auto-name ("dense_1/kernel"), so a fresh
  /// instance of the same architecture loads them. Under data_parallel() only rank 0 writes. A path ending
  /// in ".weights.h5" gets Keras 3's HDF5 weights file instead (models/saving/keras_weights_h5.hpp), which
  /// Keras's load_weights reads.
  void save_weights(const std::string& path, WeightsOptions options = {}) const;
  /// Loads what save_weights wrote, or a ".weights.h5" file Keras 3 wrote for the same architecture. Every
  /// name, shape and dtype must match (a .weights.h5 file's floating values convert to the weights' dtype);
  /// otherwise a loom::Error lists every mismatch and no weight changes. A corrupted or truncated file leaves
  /// the model untouched too.
  void load_weights(const std::string& path, WeightsOptions options = {});
  /// Writes the whole model to a Keras 3 .keras archive (Keras's model.save): its config (Sequential or
  /// Functional), its weights and, when compiled, its compile settings and optimizer state, so that
  /// models::load_model (or Keras's keras.saving.load_model) rebuilds it. The file is replaced atomically; the
  /// path must end in ".keras". models/saving/keras_archive.hpp says what is supported.
  void save(const std::string& path) const;
  /// The names save_weights uses, with the weights they name, in weights() order.
  std::vector<std::pair<std::string, Variable>> named_weights() const;

  /// Set by a callback (EarlyStopping) to end fit after the current epoch.
  bool stop_training = false;

  optim::Optimizer* optimizer() const { return optimizer_.get(); }
  /// True when compiled with a distributed::DistributedOptimizer in a run of several processes. fit and
  /// evaluate then split each global batch across the ranks and log global values; rank 0 alone prints
  /// progress and writes weights files (docs/distributed.md).
  bool data_parallel() const;
  /// The compiled metrics, once resolved (after the first batch), in compile order (output by output).
  const std::vector<std::shared_ptr<metrics::Metric>>& metrics() const { return metrics_; }
  /// What compile was given (a copy; the optimizer is the model's own).
  const CompileOptions& compile_options() const { return compile_options_; }

 protected:
  explicit Model(std::string_view default_name = "model", std::optional<std::string> name = {});

  /// The output shapes summary() shows for each direct child: those of its latest call on data, "?" before
  /// one. Sequential knows them from its Input.
  virtual std::vector<std::string> child_output_shapes() const;
  /// A Functional model's computation; other models override call.
  Tensor call(const Tensor& x, bool training) override;

 private:
  struct Batch;
  struct StepLosses;
  class LossTrackers;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs, bool training);
  std::vector<Tensor> arrange_inputs(const Tensors& x, const char* method) const;
  std::vector<Tensor> arrange_targets(const Tensors& y, const char* method) const;
  std::size_t output_count() const;
  void resolve_compiled(const std::vector<Tensor>& y_true, const std::vector<Tensor>& y_pred);
  std::vector<Tensor> arrange_sample_weights(const std::optional<Tensors>& sample_weight,
                                             const std::optional<ClassWeight>& class_weight,
                                             const std::vector<Tensor>& y, const char* method) const;
  StepLosses compute_losses(const Batch& batch, const std::vector<Tensor>& y_pred);
  void update_metrics(const Batch& batch, const std::vector<Tensor>& y_pred);
  // `where` names the step in errors: "fit, batch 3 of epoch 2" or "train_on_batch".
  StepLosses train_step(const Batch& batch, const std::string& where);
  void idle_train_step(const std::string& where);
  void apply_finite_step(const std::vector<Tensor>& gradients, const std::vector<Variable>& variables,
                         const std::string& where, AssignJournal& forward_writes);
  StepLosses test_step(const Batch& batch);
  void check_finite_loss(double loss) const;
  void prepare_replica(const Batch& data);
  Logs logs_of(const LossTrackers& trackers, bool global) const;
  void check_compiled(const char* method) const;
  History fit_arranged(Batch data, FitOptions options);
  Logs evaluate_arranged(const Batch& data, EvaluateOptions options);
  std::vector<Tensor> predict_arranged(const std::vector<Tensor>& x, PredictOptions options);
  std::vector<Tensor> record_model_call(const std::vector<Tensor>& inputs, std::shared_ptr<Layer> owner);
  std::string functional_summary(const SummaryOptions& options) const;
  SummaryTotals summary_totals() const;

  bool compiled_ = false;
  std::shared_ptr<optim::Optimizer> optimizer_;
  CompileOptions compile_options_;
  // One per output, from compile: the loss given, its weight, the metrics given.
  std::vector<LossSpec> loss_specs_;
  std::vector<double> loss_weights_;
  std::vector<std::vector<MetricArg>> metric_specs_, weighted_metric_specs_;
  // Resolved at the first batch: the losses, the metrics (the plain ones output by output, then the weighted
  // ones), their outputs, whether they take the sample weights, and their log keys.
  std::vector<losses::Loss> losses_;
  std::vector<std::shared_ptr<metrics::Metric>> metrics_;
  std::vector<std::size_t> metric_outputs_;
  std::vector<bool> metric_weighted_;
  std::vector<std::string> metric_keys_;
  std::shared_ptr<const detail::FunctionalGraph> graph_;
  std::vector<std::string> output_names_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Model>(std::move(*this)); }
};

}  // namespace loom::layers

namespace loom {
using layers::History;
using layers::Model;
}  // namespace loom
