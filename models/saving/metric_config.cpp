// Keras's metric objects in a compile_config, both ways: {"module": "keras.metrics", "class_name", "config"}
// with each class's get_config() keys (keras/src/metrics/*.py), so that an archive Keras wrote compiles here
// with the same metrics and one loom wrote compiles in Keras.
#include <functional>
#include <map>
#include <typeinfo>

#include "models/metrics.hpp"
#include "models/saving/detail/serialization.hpp"

namespace loom::models::detail {

namespace M = loom::layers::metrics;

namespace {

/// Keras's thresholds argument as given: None (empty) or the list.
json thresholds_json(const std::vector<double>& t) { return t.empty() ? json(nullptr) : json(t); }

/// Keras's thresholds argument: null, one number or a list of numbers.
std::vector<double> read_thresholds(Reader& r) {
  const json* value = r.find("thresholds");
  if (!value) return {};
  if (value->is_number()) return {as_double(*value, r.what("thresholds"))};
  expect_array(*value, r.what("thresholds"));
  std::vector<double> out;
  for (const json& v : *value) out.push_back(as_double(v, r.what("thresholds")));
  return out;
}

/// AUC's label_weights as Keras's serializer writes the tensor it keeps.
json label_weights_json(const std::vector<double>& weights) {
  if (weights.empty()) return nullptr;
  return {{"class_name", "__tensor__"}, {"config", {{"value", weights}, {"dtype", "float32"}}}};
}

/// AUC's label_weights: null, a list, or the tensor Keras's serializer writes ({"class_name": "__tensor__" or
/// "__numpy__", "config": {"value": [...]}}).
std::vector<double> read_label_weights(Reader& r) {
  const json* value = r.find("label_weights");
  if (!value) return {};
  const std::string what = r.what("label_weights");
  const json* list = value;
  if (value->is_object()) {
    const std::string kind = as_string(member(*value, "class_name", what), what + ": 'class_name'");
    check(kind == "__tensor__" || kind == "__numpy__", "{}: expected a list or a serialized tensor, got class '{}'",
          what, kind);
    list = &member(member(*value, "config", what), "value", what);
  }
  expect_array(*list, what);
  std::vector<double> out;
  for (const json& v : *list) out.push_back(as_double(v, what));
  return out;
}

/// One Keras metric class: its config from a loom metric, and a loom metric from its config (a Reader whose
/// "name" and "dtype" are read already).
struct MetricClass {
  const std::type_info& type;
  const char* dtype;  // the dtype Keras's class writes by default
  std::function<json(const M::Metric&)> config;
  std::function<std::shared_ptr<M::Metric>(Reader&, const std::string& name)> make;
};

/// A class with the name Keras gives its metrics when the config has none.
struct NamedClass {
  MetricClass metric_class;
  std::string default_name;
};

template <class T>
const T& as(const M::Metric& m) {
  return static_cast<const T&>(m);
}

json no_config(const M::Metric&) { return json::object(); }

template <class T>
MetricClass named_only() {
  return {typeid(T), "float32", no_config,
          [](Reader&, const std::string& name) { return std::make_shared<T>(name); }};
}

template <class T, class Options>
MetricClass condition_count() {
  return {typeid(T), "float32",
          [](const M::Metric& m) {
            return json{{"thresholds", thresholds_json(as<T>(m).given_thresholds())}};
          },
          [](Reader& r, const std::string& name) {
            return std::make_shared<T>(Options{.thresholds = read_thresholds(r), .name = name});
          }};
}

template <class T, class Options>
MetricClass precision_or_recall() {
  return {typeid(T), "float32",
          [](const M::Metric& m) {
            const auto& o = as<T>(m).options();
            return json{{"thresholds", thresholds_json(o.thresholds)}, {"top_k", optional_json(o.top_k)},
                        {"class_id", optional_json(o.class_id)}};
          },
          [](Reader& r, const std::string& name) {
            std::vector<double> thresholds = read_thresholds(r);
            const auto top_k = r.optional_integer("top_k");
            const auto class_id = r.optional_integer("class_id");
            return std::make_shared<T>(
                Options{.thresholds = std::move(thresholds), .top_k = top_k, .class_id = class_id, .name = name});
          }};
}

/// SensitivityAtSpecificity and its siblings: `value_key` is the constraint's argument ("specificity", ...).
template <class T, class Options>
MetricClass rate_at_rate(const char* value_key) {
  return {typeid(T), "float32",
          [value_key](const M::Metric& m) {
            const auto& s = as<T>(m);
            return json{{"class_id", optional_json(s.class_id())}, {"num_thresholds", s.num_thresholds()},
                        {value_key, s.value()}};
          },
          [value_key](Reader& r, const std::string& name) {
            const double value = as_double(r.require(value_key), r.what(value_key));
            const auto class_id = r.optional_integer("class_id");
            const std::int64_t num_thresholds = r.integer("num_thresholds", 200);
            return std::make_shared<T>(value,
                                       Options{.num_thresholds = num_thresholds, .class_id = class_id, .name = name});
          }};
}

MetricClass auc_class() {
  return {typeid(M::AUC), "float32",
          [](const M::Metric& m) {
            const auto& auc = as<M::AUC>(m);
            const auto& o = auc.options();
            json config = {{"num_thresholds", auc.num_thresholds()},
                           {"curve", o.curve},
                           {"summation_method", o.summation_method},
                           {"multi_label", o.multi_label},
                           {"num_labels", optional_json(o.num_labels)},
                           {"label_weights", label_weights_json(o.label_weights)},
                           {"from_logits", o.from_logits}};
            // Given thresholds, sorted as Keras keeps them, without the two endpoints.
            if (!o.thresholds.empty())
              config["thresholds"] = std::vector<double>(auc.thresholds().begin() + 1, auc.thresholds().end() - 1);
            return config;
          },
          [](Reader& r, const std::string& name) {
            M::AUCOptions o;
            o.name = name;
            o.num_thresholds = r.integer("num_thresholds", 200);
            o.curve = r.string("curve", "ROC");
            o.summation_method = r.string("summation_method", "interpolation");
            o.multi_label = r.boolean("multi_label", false);
            o.num_labels = r.optional_integer("num_labels");
            o.label_weights = read_label_weights(r);
            o.from_logits = r.boolean("from_logits", false);
            o.thresholds = read_thresholds(r);  // given: num_thresholds is theirs plus the two endpoints
            return std::make_shared<M::AUC>(std::move(o));
          }};
}

template <class T>
MetricClass f_score(bool with_beta) {
  return {typeid(T), "float32",
          [with_beta](const M::Metric& m) {
            const auto& o = as<T>(m).options();
            json config = {{"average", optional_json(o.average)}};
            if (with_beta) config["beta"] = o.beta;
            config["threshold"] = optional_json(o.threshold);
            return config;
          },
          [with_beta](Reader& r, const std::string& name) -> std::shared_ptr<M::Metric> {
            const auto average = r.optional_string("average");
            const auto threshold = r.optional_number("threshold");
            if (!with_beta) return std::make_shared<M::F1Score>(
                M::F1ScoreOptions{.average = average, .threshold = threshold, .name = name});
            const double beta = r.number("beta", 1.0);
            return std::make_shared<M::FBetaScore>(
                M::FBetaScoreOptions{.average = average, .beta = beta, .threshold = threshold, .name = name});
          }};
}

/// The IoU family. `targets`: the class has target_class_ids; `sparse_y_true`: it has that option.
json iou_config(const M::Metric& m, bool targets, bool sparse_y_true) {
  const auto& iou = as<M::IoU>(m);
  const auto& o = iou.options();
  json config = {{"num_classes", iou.num_classes()}};
  if (targets) config["target_class_ids"] = iou.target_class_ids();
  config["ignore_class"] = optional_json(o.ignore_class);
  if (sparse_y_true) config["sparse_y_true"] = o.sparse_y_true;
  config["sparse_y_pred"] = o.sparse_y_pred;
  config["axis"] = o.axis;
  return config;
}

std::vector<std::int64_t> read_targets(Reader& r) {
  return as_ints(r.require("target_class_ids"), r.what("target_class_ids"));
}

/// The options the IoU classes share, read with Keras's defaults (sparse_y_true only where the class has it).
template <class Options>
Options read_iou_options(Reader& r, const std::string& name) {
  Options o;
  o.name = name;
  o.ignore_class = r.optional_integer("ignore_class");
  if constexpr (requires { o.sparse_y_true; }) o.sparse_y_true = r.boolean("sparse_y_true", o.sparse_y_true);
  o.sparse_y_pred = r.boolean("sparse_y_pred", o.sparse_y_pred);
  o.axis = r.integer("axis", o.axis);
  return o;
}

/// IoU and OneHotIoU (`with_targets`), MeanIoU and OneHotMeanIoU.
template <class T, class Options, bool with_targets>
MetricClass iou_class() {
  return {typeid(T), "int32",
          [](const M::Metric& m) {
            return iou_config(m, with_targets, requires(Options o) { o.sparse_y_true; });
          },
          [](Reader& r, const std::string& name) {
            const std::int64_t classes = r.integer("num_classes");
            if constexpr (with_targets) {
              std::vector<std::int64_t> targets = read_targets(r);
              return std::make_shared<T>(classes, std::move(targets), read_iou_options<Options>(r, name));
            } else {
              return std::make_shared<T>(classes, read_iou_options<Options>(r, name));
            }
          }};
}

MetricClass binary_iou_class() {
  return {typeid(M::BinaryIoU), "int32",
          [](const M::Metric& m) {
            const auto& b = as<M::BinaryIoU>(m);
            return json{{"target_class_ids", b.target_class_ids()}, {"threshold", b.threshold()}};
          },
          [](Reader& r, const std::string& name) {
            std::vector<std::int64_t> targets = {0, 1};
            if (r.find("target_class_ids")) targets = read_targets(r);
            const double threshold = r.number("threshold", 0.5);
            return std::make_shared<M::BinaryIoU>(
                M::BinaryIoUOptions{.target_class_ids = std::move(targets), .threshold = threshold, .name = name});
          }};
}

/// Every metric class loom saves, by Keras class name.
const std::map<std::string, NamedClass>& metric_classes() {
  static const std::map<std::string, NamedClass> classes = [] {
    std::map<std::string, NamedClass> out;
    const auto add = [&](const char* keras_name, const char* default_name, MetricClass c) {
      out.emplace(keras_name, NamedClass{std::move(c), default_name});
    };
    add("MeanSquaredError", "mean_squared_error", named_only<M::MeanSquaredError>());
    add("MeanAbsoluteError", "mean_absolute_error", named_only<M::MeanAbsoluteError>());
    add("RootMeanSquaredError", "root_mean_squared_error", named_only<M::RootMeanSquaredError>());
    add("CategoricalAccuracy", "categorical_accuracy", named_only<M::CategoricalAccuracy>());
    add("SparseCategoricalAccuracy", "sparse_categorical_accuracy", named_only<M::SparseCategoricalAccuracy>());
    add("BinaryAccuracy", "binary_accuracy", {typeid(M::BinaryAccuracy), "float32",
                           [](const M::Metric& m) { return json{{"threshold", as<M::BinaryAccuracy>(m).threshold()}}; },
                           [](Reader& r, const std::string& name) {
                             return std::make_shared<M::BinaryAccuracy>(
                                 M::BinaryAccuracyOptions{.name = name, .threshold = r.number("threshold", 0.5)});
                           }});
    add("TopKCategoricalAccuracy", "top_k_categorical_accuracy",
        {typeid(M::TopKCategoricalAccuracy), "float32",
         [](const M::Metric& m) { return json{{"k", as<M::TopKCategoricalAccuracy>(m).k()}}; },
         [](Reader& r, const std::string& name) {
           return std::make_shared<M::TopKCategoricalAccuracy>(
               M::TopKCategoricalAccuracyOptions{.k = r.integer("k", 5), .name = name});
         }});
    add("SparseTopKCategoricalAccuracy", "sparse_top_k_categorical_accuracy",
        {typeid(M::SparseTopKCategoricalAccuracy), "float32",
         [](const M::Metric& m) { return json{{"k", as<M::SparseTopKCategoricalAccuracy>(m).k()}}; },
         [](Reader& r, const std::string& name) {
           r.unsupported_flags({"from_sorted_ids"});
           return std::make_shared<M::SparseTopKCategoricalAccuracy>(
               M::SparseTopKCategoricalAccuracyOptions{.k = r.integer("k", 5), .name = name});
         }});
    add("TruePositives", "true_positives", condition_count<M::TruePositives, M::TruePositivesOptions>());
    add("FalsePositives", "false_positives", condition_count<M::FalsePositives, M::FalsePositivesOptions>());
    add("TrueNegatives", "true_negatives", condition_count<M::TrueNegatives, M::TrueNegativesOptions>());
    add("FalseNegatives", "false_negatives", condition_count<M::FalseNegatives, M::FalseNegativesOptions>());
    add("Precision", "precision", precision_or_recall<M::Precision, M::PrecisionOptions>());
    add("Recall", "recall", precision_or_recall<M::Recall, M::RecallOptions>());
    add("SensitivityAtSpecificity", "sensitivity_at_specificity",
        rate_at_rate<M::SensitivityAtSpecificity, M::SensitivityAtSpecificityOptions>("specificity"));
    add("SpecificityAtSensitivity", "specificity_at_sensitivity",
        rate_at_rate<M::SpecificityAtSensitivity, M::SpecificityAtSensitivityOptions>("sensitivity"));
    add("PrecisionAtRecall", "precision_at_recall", rate_at_rate<M::PrecisionAtRecall, M::PrecisionAtRecallOptions>("recall"));
    add("RecallAtPrecision", "recall_at_precision", rate_at_rate<M::RecallAtPrecision, M::RecallAtPrecisionOptions>("precision"));
    add("AUC", "auc", auc_class());
    add("F1Score", "f1_score", f_score<M::F1Score>(false));
    add("FBetaScore", "fbeta_score", f_score<M::FBetaScore>(true));
    add("IoU", "io_u", iou_class<M::IoU, M::IoUOptions, true>());
    add("MeanIoU", "mean_io_u", iou_class<M::MeanIoU, M::MeanIoUOptions, false>());
    add("OneHotIoU", "one_hot_io_u", iou_class<M::OneHotIoU, M::OneHotIoUOptions, true>());
    add("OneHotMeanIoU", "one_hot_mean_io_u", iou_class<M::OneHotMeanIoU, M::OneHotMeanIoUOptions, false>());
    add("BinaryIoU", "binary_io_u", binary_iou_class());
    return out;
  }();
  return classes;
}

std::string class_list() {
  std::string out;
  for (const auto& [name, c] : metric_classes()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

json serialize_metric(const M::Metric& metric, const std::string& what) {
  for (const auto& [class_name, named] : metric_classes()) {
    const MetricClass& c = named.metric_class;
    if (c.type != typeid(metric)) continue;
    json config = {{"name", metric.name()}, {"dtype", c.dtype}};
    config.update(c.config(metric));
    return {{"module", "keras.metrics"}, {"class_name", class_name}, {"config", config}, {"registered_name", nullptr}};
  }
  throw Error(fmt::format("{}: the metric '{}' is not one of the metric classes loom saves ({}); a metric of "
                          "one's own cannot be saved: compile with a Keras metric or its name",
                          what, metric.name(), class_list()));
}

std::shared_ptr<M::Metric> deserialize_metric(const json& entry, const std::string& what) {
  const std::string class_name = as_string(member(entry, "class_name", what), what + ": 'class_name'");
  const auto known = metric_classes().find(class_name);
  check(known != metric_classes().end(), "{}: loom has no metric class '{}'; it supports {}, and metric names", what,
        class_name, class_list());
  const MetricClass& c = known->second.metric_class;
  Reader r(member(entry, "config", what), what + " (" + class_name + ") config");
  const std::string dtype = r.string("dtype", c.dtype);
  check(dtype == c.dtype, "{}: loom's metrics accumulate in double and report as Keras's default dtype '{}'; got "
        "dtype '{}'", r.context(), c.dtype, dtype);
  const std::string name = r.string("name", known->second.default_name);
  std::shared_ptr<M::Metric> metric = c.make(r, name);
  r.finish();
  return metric;
}

}  // namespace loom::models::detail
