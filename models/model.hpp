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
#include "models/metrics.hpp"
#include "models/shared_arg.hpp"
#include "models/summary.hpp"
#include "optim/optimizer.hpp"

namespace loom::layers {

namespace detail {
class FunctionalGraph;  // models/detail/functional_graph.hpp
}  // namespace detail

/// A Functional model's inputs or outputs: one symbolic tensor, a list of them, or (outputs) tensors by name,
/// as Keras takes a dict.
class GraphTensors {
 public:
  GraphTensors(const Tensor& tensor) : tensors_{tensor} {}                         // NOLINT: implicit
  GraphTensors(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {}      // NOLINT
  GraphTensors(std::initializer_list<Tensor> tensors) : tensors_(tensors) {}       // NOLINT
  GraphTensors(const std::map<std::string, Tensor>& named);                        // NOLINT
  const std::vector<Tensor>& tensors() const { return tensors_; }
  /// The names of named outputs, in the map's (sorted) order, as Keras flattens a dict; empty otherwise.
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
/// takes their batch mean.
using LossFunction = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// compile's optimizer: a Keras string ("adam", "sgd", "adamw", "rmsprop"), an optimizer object (copied)
/// or a shared_ptr the caller keeps.
class OptimizerArg : public SharedArg<optim::Optimizer> {
 public:
  using SharedArg::SharedArg;
  OptimizerArg(const char* name);         // NOLINT: implicit, as Keras accepts strings
  OptimizerArg(const std::string& name);  // NOLINT
};

/// compile's metrics: a Keras string ("accuracy", "mae", ...) resolved at the first batch, or a metric object.
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

// Options, fields in the order of Keras's arguments; loom-only fields after them.
struct CompileOptions {
  OptimizerArg optimizer = "rmsprop";
  /// A Keras string ("mse", "mae", "binary_crossentropy", "categorical_crossentropy",
  /// "sparse_categorical_crossentropy", "crossentropy" to choose by shapes, ...) or a per-sample function.
  std::variant<std::string, LossFunction> loss = std::string();
  std::vector<MetricArg> metrics = {};
};

struct FitOptions {
  /// Samples per step; under data_parallel(), over all ranks together (each trains on its part).
  std::int64_t batch_size = 32;
  int epochs = 1;
  /// 0 silent, 1 progress bar, 2 one line per epoch.
  int verbose = 1;
  std::vector<CallbackArg> callbacks = {};
  /// The fraction of samples, taken from the end before shuffling, held out for validation.
  double validation_split = 0.0;
  /// (x, y) to validate on; takes precedence over validation_split.
  std::optional<std::pair<Tensor, Tensor>> validation_data = std::nullopt;
  /// A new permutation of the training samples each epoch.
  bool shuffle = true;
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
  Model(const GraphTensors& inputs, const GraphTensors& outputs, ModelOptions options = {});

  /// One tensor per input, in order; one per output. Also on symbolic tensors (a model is a layer of another).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) &;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) &&;
  using Layer::operator();

  /// True for a model built from inputs and outputs.
  bool is_functional() const { return graph_ != nullptr; }
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
  /// The loss and metrics over (x, y), in inference mode: keys "loss" and each metric's name.
  Logs evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  /// Outputs for x in batches, in inference mode, without recording on any tape.
  Tensor predict(const Tensor& x, PredictOptions options = {});

  /// One optimizer step on this batch; the loss and metrics of the batch (metrics reset first).
  Logs train_on_batch(const Tensor& x, const Tensor& y);
  Logs test_on_batch(const Tensor& x, const Tensor& y);
  Tensor predict_on_batch(const Tensor& x);

  /// Keras's summary table: each direct child layer with its output shape and parameter count, then the
  /// totals and their sizes.
  void summary(SummaryOptions options = {}) const;
  /// The same table as a string.
  std::string summary_string(SummaryOptions options = {}) const;

  /// Writes every weight (and optionally the optimizer state) to a .safetensors file, atomically. Names are
  /// the weights' paths below the model, by class rather than by auto-name ("dense_1/kernel"), so a fresh
  /// instance of the same architecture loads them. Under data_parallel() only rank 0 writes.
  void save_weights(const std::string& path, WeightsOptions options = {}) const;
  /// Loads what save_weights wrote. Every name, shape and dtype must match; otherwise a loom::Error lists
  /// every mismatch and no weight changes. A corrupted or truncated file leaves the model untouched too.
  void load_weights(const std::string& path, WeightsOptions options = {});
  /// The names save_weights uses, with the weights they name, in weights() order.
  std::vector<std::pair<std::string, Variable>> named_weights() const;

  /// Set by a callback (EarlyStopping) to end fit after the current epoch.
  bool stop_training = false;

  optim::Optimizer* optimizer() const { return optimizer_.get(); }
  /// True when compiled with a distributed::DistributedOptimizer in a run of several processes. fit and
  /// evaluate then split each global batch across the ranks and log global values; rank 0 alone prints
  /// progress and writes weights files (docs/distributed.md).
  bool data_parallel() const;
  /// The compiled metrics, once resolved (after the first batch), in compile order.
  const std::vector<std::shared_ptr<metrics::Metric>>& metrics() const { return metrics_; }

 protected:
  explicit Model(std::string_view default_name = "model", std::optional<std::string> name = {});

  /// The output shapes summary() shows for each direct child: those of its latest call on data, "?" before
  /// one. Sequential knows them from its Input.
  virtual std::vector<std::string> child_output_shapes() const;
  /// A Functional model's computation; other models override call.
  Tensor call(const Tensor& x, bool training) override;

 private:
  Tensor batch_loss(const Tensor& y_true, const Tensor& y_pred);
  void resolve_compiled(const Tensor& y_true, const Tensor& y_pred);
  double train_step(const Tensor& x, const Tensor& y);
  void idle_train_step();
  double test_step(const Tensor& x, const Tensor& y);
  void check_finite_loss(double loss) const;
  void prepare_replica(const Tensor& x, const Tensor& y);
  Logs metric_logs(double loss) const;
  void check_compiled(const char* method) const;
  std::vector<Tensor> record_model_call(const std::vector<Tensor>& inputs, std::shared_ptr<Layer> owner);
  std::string functional_summary(const SummaryOptions& options) const;
  SummaryTotals summary_totals() const;

  bool compiled_ = false;
  std::shared_ptr<optim::Optimizer> optimizer_;
  std::variant<std::string, LossFunction> loss_spec_;
  LossFunction loss_;
  std::vector<MetricArg> metric_specs_;
  std::vector<std::shared_ptr<metrics::Metric>> metrics_;
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
