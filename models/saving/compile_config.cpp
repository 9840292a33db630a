// Keras's compile_config, both ways (keras/src/trainers/trainer.py get_compile_config / compile_from_config,
// keras/src/optimizers/base_optimizer.py get_config): the optimizer with its hyper-parameters (a schedule for a
// learning rate), the losses, loss_weights and metrics.
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/ranges.h>

#include "models/losses.hpp"
#include "models/saving/detail/serialization.hpp"
#include "optim/adadelta.hpp"
#include "optim/adafactor.hpp"
#include "optim/adagrad.hpp"
#include "optim/adam.hpp"
#include "optim/adamax.hpp"
#include "optim/adamw.hpp"
#include "optim/lion.hpp"
#include "optim/nadam.hpp"
#include "optim/rmsprop.hpp"
#include "optim/schedules.hpp"
#include "optim/sgd.hpp"

namespace loom::models::detail {

namespace L = loom::layers;

namespace {

// ---- the optimizer ----

json schedule_json(const optim::LearningRate& rate, const std::string& what) {
  const auto& schedule = rate.schedule();
  json config;
  std::string class_name;
  if (const auto* e = schedule.target<optim::ExponentialDecay>()) {
    const auto& o = e->options();
    class_name = "ExponentialDecay";
    config = {{"initial_learning_rate", o.initial_learning_rate}, {"decay_steps", o.decay_steps},
              {"decay_rate", o.decay_rate}, {"staircase", o.staircase}, {"name", class_name}};
  } else if (const auto* c = schedule.target<optim::CosineDecay>()) {
    const auto& o = c->options();
    class_name = "CosineDecay";
    config = {{"initial_learning_rate", o.initial_learning_rate}, {"decay_steps", o.decay_steps}, {"alpha", o.alpha},
              {"name", class_name}, {"warmup_target", optional_json(o.warmup_target)},
              {"warmup_steps", o.warmup_steps}};
  } else if (const auto* p = schedule.target<optim::PolynomialDecay>()) {
    const auto& o = p->options();
    class_name = "PolynomialDecay";
    config = {{"initial_learning_rate", o.initial_learning_rate}, {"decay_steps", o.decay_steps},
              {"end_learning_rate", o.end_learning_rate}, {"power", o.power}, {"cycle", o.cycle},
              {"name", class_name}};
  } else if (const auto* i = schedule.target<optim::InverseTimeDecay>()) {
    const auto& o = i->options();
    class_name = "InverseTimeDecay";
    config = {{"initial_learning_rate", o.initial_learning_rate}, {"decay_steps", o.decay_steps},
              {"decay_rate", o.decay_rate}, {"staircase", o.staircase}, {"name", class_name}};
  } else if (const auto* pc = schedule.target<optim::PiecewiseConstantDecay>()) {
    const auto& o = pc->options();
    class_name = "PiecewiseConstantDecay";
    config = {{"boundaries", o.boundaries}, {"values", o.values}, {"name", "PiecewiseConstant"}};
  } else if (const auto* r = schedule.target<optim::CosineDecayRestarts>()) {
    const auto& o = r->options();
    class_name = "CosineDecayRestarts";
    config = {{"initial_learning_rate", o.initial_learning_rate}, {"first_decay_steps", o.first_decay_steps},
              {"t_mul", o.t_mul}, {"m_mul", o.m_mul}, {"alpha", o.alpha}, {"name", "SGDRDecay"}};
  } else {
    throw Error(fmt::format("{}: the learning rate is a C++ function, which a .keras archive cannot hold; use a "
                            "constant or one of loom's schedules (ExponentialDecay, CosineDecay, PolynomialDecay, "
                            "InverseTimeDecay, PiecewiseConstantDecay, CosineDecayRestarts)",
                            what));
  }
  return {{"module", "keras.optimizers.schedules"}, {"class_name", class_name}, {"config", config},
          {"registered_name", nullptr}};
}

optim::LearningRate schedule_from(const json& value, const std::string& what) {
  if (value.is_number()) {
    const double lr = value.get<double>();
    check(std::isfinite(lr) && lr >= 0, "{}: a learning rate must be finite and >= 0, got {}", what, lr);
    return lr;
  }
  expect_object(value, what);
  const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
  Reader r(member(value, "config", what), what + " config");
  r.ignore({"name"});
  optim::LearningRate out = 0.0;
  if (class_name == "PiecewiseConstantDecay") {
    std::vector<double> values;
    const std::string values_what = r.what("values");
    for (const json& v : expect_array(r.require("values"), values_what)) values.push_back(as_double(v, values_what));
    out = optim::PiecewiseConstantDecay({as_ints(r.require("boundaries"), r.what("boundaries")), values});
    r.finish();
    return out;
  }
  const double initial = r.number("initial_learning_rate", 0.0);
  if (class_name == "CosineDecayRestarts") {
    out = optim::CosineDecayRestarts({initial, r.integer("first_decay_steps"), r.number("t_mul", 2.0),
                                      r.number("m_mul", 1.0), r.number("alpha", 0.0)});
    r.finish();
    return out;
  }
  const std::int64_t steps = r.integer("decay_steps");
  if (class_name == "ExponentialDecay") {
    out = optim::ExponentialDecay({initial, steps, r.number("decay_rate", 0.0), r.boolean("staircase", false)});
  } else if (class_name == "CosineDecay") {
    out = optim::CosineDecay({initial, steps, r.number("alpha", 0.0), r.optional_number("warmup_target"),
                              r.integer("warmup_steps", 0)});
  } else if (class_name == "PolynomialDecay") {
    out = optim::PolynomialDecay({initial, steps, r.number("end_learning_rate", 0.0001), r.number("power", 1.0),
                                  r.boolean("cycle", false)});
  } else if (class_name == "InverseTimeDecay") {
    out = optim::InverseTimeDecay({initial, steps, r.number("decay_rate", 0.0), r.boolean("staircase", false)});
  } else {
    throw Error(fmt::format("{}: loom has no learning-rate schedule '{}'; it supports ExponentialDecay, "
                            "CosineDecay, PolynomialDecay, InverseTimeDecay, PiecewiseConstantDecay and "
                            "CosineDecayRestarts", what, class_name));
  }
  r.finish();
  return out;
}

json optimizer_json(const optim::Optimizer& opt) {
  const std::string what = fmt::format("optimizer '{}'", opt.name());
  const auto& base = opt.shared_options();
  json config = {{"name", opt.name()}};
  config["learning_rate"] = opt.learning_rate_setting().is_schedule()
                                ? schedule_json(opt.learning_rate_setting(), what)
                                : json(opt.learning_rate());
  config["weight_decay"] = optional_json(base.weight_decay);
  config["clipnorm"] = optional_json(base.clipnorm);
  config["global_clipnorm"] = optional_json(base.global_clipnorm);
  config["clipvalue"] = optional_json(base.clipvalue);
  config["use_ema"] = base.use_ema;
  config["ema_momentum"] = base.ema_momentum;
  config["ema_overwrite_frequency"] = optional_json(base.ema_overwrite_frequency);
  config["loss_scale_factor"] = optional_json(base.loss_scale_factor);
  config["gradient_accumulation_steps"] = optional_json(base.gradient_accumulation_steps);
  std::string class_name;
  if (const auto* adam = dynamic_cast<const optim::Adam*>(&opt)) {
    class_name = dynamic_cast<const optim::AdamW*>(&opt) ? "AdamW" : "Adam";
    config["beta_1"] = adam->beta_1();
    config["beta_2"] = adam->beta_2();
    config["epsilon"] = adam->epsilon();
    config["amsgrad"] = adam->amsgrad();
  } else if (const auto* sgd = dynamic_cast<const optim::SGD*>(&opt)) {
    class_name = "SGD";
    config["momentum"] = sgd->momentum();
    config["nesterov"] = sgd->nesterov();
  } else if (const auto* rms = dynamic_cast<const optim::RMSprop*>(&opt)) {
    class_name = "RMSprop";
    config["rho"] = rms->rho();
    config["momentum"] = rms->momentum();
    config["epsilon"] = rms->epsilon();
    config["centered"] = rms->centered();
  } else if (const auto* adagrad = dynamic_cast<const optim::Adagrad*>(&opt)) {
    class_name = "Adagrad";
    config["initial_accumulator_value"] = adagrad->initial_accumulator_value();
    config["epsilon"] = adagrad->epsilon();
  } else if (const auto* adamax = dynamic_cast<const optim::Adamax*>(&opt)) {
    class_name = "Adamax";
    config["beta_1"] = adamax->beta_1();
    config["beta_2"] = adamax->beta_2();
    config["epsilon"] = adamax->epsilon();
  } else if (const auto* adadelta = dynamic_cast<const optim::Adadelta*>(&opt)) {
    class_name = "Adadelta";
    config["rho"] = adadelta->rho();
    config["epsilon"] = adadelta->epsilon();
  } else if (const auto* lion = dynamic_cast<const optim::Lion*>(&opt)) {
    class_name = "Lion";
    config["beta_1"] = lion->beta_1();
    config["beta_2"] = lion->beta_2();
  } else if (const auto* nadam = dynamic_cast<const optim::Nadam*>(&opt)) {
    class_name = "Nadam";
    config["beta_1"] = nadam->beta_1();
    config["beta_2"] = nadam->beta_2();
    config["epsilon"] = nadam->epsilon();
  } else if (const auto* adafactor = dynamic_cast<const optim::Adafactor*>(&opt)) {
    class_name = "Adafactor";
    config["beta_2_decay"] = adafactor->beta_2_decay();
    config["epsilon_1"] = adafactor->epsilon_1();
    config["epsilon_2"] = adafactor->epsilon_2();
    config["clip_threshold"] = adafactor->clip_threshold();
    config["relative_step"] = adafactor->relative_step();
  } else {
    throw Error(fmt::format("{}: loom saves the optimizers Adam, AdamW, SGD, RMSprop, Adagrad, Adamax, Adadelta, "
                            "Lion, Nadam and Adafactor, not this class", what));
  }
  return {{"module", "keras.optimizers"}, {"class_name", class_name}, {"config", config},
          {"registered_name", nullptr}};
}

std::shared_ptr<optim::Optimizer> optimizer_from(const json& value, const std::string& what) {
  if (value.is_string()) {
    try {
      return optim::get(value.get<std::string>());
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", what, e.what()));
    }
  }
  expect_object(value, what);
  const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
  static const std::set<std::string> known = {"Adam",     "AdamW", "SGD",  "RMSprop", "Adagrad",  "Adamax",
                                              "Adadelta", "Lion",  "Nadam", "Adafactor"};
  check(known.count(class_name) == 1,
        "{}: loom has no optimizer '{}'; it supports Adam, AdamW, SGD, RMSprop, Adagrad, Adamax, Adadelta, Lion, "
        "Nadam and Adafactor",
        what, class_name);
  Reader r(member(value, "config", what), what + " (" + class_name + ") config");
  // Keras's base_optimizer arguments, in its get_config's order.
  optim::BaseOptions base;
  base.name = r.optional_string("name");
  const json* lr_value = r.find("learning_rate");
  base.weight_decay = r.optional_number("weight_decay");
  base.clipnorm = r.optional_number("clipnorm");
  base.global_clipnorm = r.optional_number("global_clipnorm");
  base.clipvalue = r.optional_number("clipvalue");
  base.use_ema = r.boolean("use_ema", false);
  base.ema_momentum = r.number("ema_momentum", 0.99);
  base.ema_overwrite_frequency = r.optional_integer("ema_overwrite_frequency");
  base.loss_scale_factor = r.optional_number("loss_scale_factor");
  base.gradient_accumulation_steps = r.optional_integer("gradient_accumulation_steps");
  // Keras reads 0 as none for both (its checks test the value's truth).
  if (base.ema_overwrite_frequency == 0) base.ema_overwrite_frequency.reset();
  if (base.gradient_accumulation_steps == 0) base.gradient_accumulation_steps.reset();
  r.ignore({"is_legacy_optimizer"});
  const auto learning_rate = [&](double keras_default) -> optim::LearningRate {
    return lr_value ? schedule_from(*lr_value, r.what("learning_rate")) : keras_default;
  };
  std::shared_ptr<optim::Optimizer> out;
  if (class_name == "Adam") {
    optim::AdamOptions o{.learning_rate = learning_rate(0.001), .beta_1 = r.number("beta_1", 0.9),
                         .beta_2 = r.number("beta_2", 0.999), .epsilon = r.number("epsilon", 1e-7),
                         .amsgrad = r.boolean("amsgrad", false)};
    out = std::make_shared<optim::Adam>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "AdamW") {
    optim::AdamWOptions o{.learning_rate = learning_rate(0.001), .beta_1 = r.number("beta_1", 0.9),
                          .beta_2 = r.number("beta_2", 0.999), .epsilon = r.number("epsilon", 1e-7),
                          .amsgrad = r.boolean("amsgrad", false)};
    out = std::make_shared<optim::AdamW>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "SGD") {
    optim::SGDOptions o{.learning_rate = learning_rate(0.01), .momentum = r.number("momentum", 0.0),
                        .nesterov = r.boolean("nesterov", false)};
    out = std::make_shared<optim::SGD>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "Adagrad") {
    optim::AdagradOptions o{.learning_rate = learning_rate(0.001),
                            .initial_accumulator_value = r.number("initial_accumulator_value", 0.1),
                            .epsilon = r.number("epsilon", 1e-7)};
    out = std::make_shared<optim::Adagrad>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "Adamax") {
    optim::AdamaxOptions o{.learning_rate = learning_rate(0.001), .beta_1 = r.number("beta_1", 0.9),
                           .beta_2 = r.number("beta_2", 0.999), .epsilon = r.number("epsilon", 1e-7)};
    out = std::make_shared<optim::Adamax>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "Adadelta") {
    optim::AdadeltaOptions o{.learning_rate = learning_rate(0.001), .rho = r.number("rho", 0.95),
                             .epsilon = r.number("epsilon", 1e-7)};
    out = std::make_shared<optim::Adadelta>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "Lion") {
    optim::LionOptions o{.learning_rate = learning_rate(0.001), .beta_1 = r.number("beta_1", 0.9),
                         .beta_2 = r.number("beta_2", 0.99)};
    out = std::make_shared<optim::Lion>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "Nadam") {
    optim::NadamOptions o{.learning_rate = learning_rate(0.001), .beta_1 = r.number("beta_1", 0.9),
                          .beta_2 = r.number("beta_2", 0.999), .epsilon = r.number("epsilon", 1e-7)};
    out = std::make_shared<optim::Nadam>(optim::with_base_options(std::move(o), std::move(base)));
  } else if (class_name == "Adafactor") {
    optim::AdafactorOptions o{.learning_rate = learning_rate(0.001), .beta_2_decay = r.number("beta_2_decay", -0.8),
                              .epsilon_1 = r.number("epsilon_1", 1e-30), .epsilon_2 = r.number("epsilon_2", 1e-3),
                              .clip_threshold = r.number("clip_threshold", 1.0),
                              .relative_step = r.boolean("relative_step", true)};
    out = std::make_shared<optim::Adafactor>(optim::with_base_options(std::move(o), std::move(base)));
  } else {
    optim::RMSpropOptions o{.learning_rate = learning_rate(0.001), .rho = r.number("rho", 0.9),
                            .momentum = r.number("momentum", 0.0), .epsilon = r.number("epsilon", 1e-7),
                            .centered = r.boolean("centered", false)};
    out = std::make_shared<optim::RMSprop>(optim::with_base_options(std::move(o), std::move(base)));
  }
  r.finish();
  return out;
}

// ---- losses ----

json config_value_json(const losses::ConfigValue& value) {
  return std::visit([](const auto& v) -> json {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::nullptr_t>) return nullptr;
    else return v;
  }, value);
}

json loss_json(const L::LossSpec& spec, const std::string& what) {
  if (const auto* name = std::get_if<std::string>(&spec)) return *name;
  const auto* loss = std::get_if<losses::Loss>(&spec);
  if (loss == nullptr || loss->class_name().empty())
    throw Error(fmt::format("{}: the loss is a C++ function, which a .keras archive cannot hold; compile with a Keras "
                            "loss name (\"mse\", \"sparse_categorical_crossentropy\", ...) or a loss class "
                            "(losses::Huber(...))", what));
  json config = {{"name", loss->name()}, {"reduction", loss->reduction()}};
  for (const auto& [key, value] : loss->config()) config[key] = config_value_json(value);
  return {{"module", "keras.losses"}, {"class_name", loss->class_name()}, {"config", config},
          {"registered_name", nullptr}};
}

/// A Keras loss object (keras.losses.Huber(delta=2.0), ...) as the loss class of that name.
L::LossSpec loss_from(const json& value, const std::string& what) {
  if (value.is_string()) return value.get<std::string>();
  expect_object(value, what);
  const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
  if (class_name == "function") return as_string(member(value, "config", what), what + ": 'config'");
  static const std::set<std::string> known = {
      "MeanSquaredError", "MeanAbsoluteError", "MeanAbsolutePercentageError", "MeanSquaredLogarithmicError",
      "BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "Huber", "KLDivergence",
      "LogCosh", "CosineSimilarity", "Poisson", "Hinge", "SquaredHinge", "CategoricalHinge"};
  check(known.count(class_name) > 0, "{}: loom has no loss class '{}'; it supports {}", what, class_name,
        fmt::join(known, ", "));
  Reader r(member(value, "config", what), what + " (" + class_name + ") config");
  const std::string reduction = r.string("reduction", "sum_over_batch_size");
  losses::check_reduction(reduction, r.context());
  const std::optional<std::string> name = r.optional_string("name");
  r.ignore({"dtype"});
  const auto crossentropy = [&](auto options) {
    options.from_logits = r.boolean("from_logits", false);
    options.label_smoothing = r.number("label_smoothing", 0.0);
    options.axis = r.integer("axis", -1);
    options.reduction = reduction;
    if (name) options.name = *name;
    return options;
  };
  const losses::LossOptions simple{reduction, name};
  std::optional<losses::Loss> loss;
  if (class_name == "BinaryCrossentropy") {
    loss = losses::BinaryCrossentropy(crossentropy(losses::BinaryCrossentropy::Options{}));
  } else if (class_name == "CategoricalCrossentropy") {
    loss = losses::CategoricalCrossentropy(crossentropy(losses::CategoricalCrossentropy::Options{}));
  } else if (class_name == "SparseCategoricalCrossentropy") {
    losses::SparseCategoricalCrossentropy::Options o;
    o.from_logits = r.boolean("from_logits", false);
    o.axis = r.integer("axis", -1);
    o.reduction = reduction;
    if (name) o.name = *name;
    r.unsupported({"ignore_class"});
    loss = losses::SparseCategoricalCrossentropy(o);
  } else if (class_name == "Huber") {
    losses::Huber::Options o;
    o.delta = r.number("delta", 1.0);  // Keras 3 leaves delta out of its config; loom writes it
    o.reduction = reduction;
    if (name) o.name = *name;
    loss = losses::Huber(o);
  } else if (class_name == "CosineSimilarity") {
    losses::CosineSimilarity::Options o;
    o.axis = r.integer("axis", -1);
    o.reduction = reduction;
    if (name) o.name = *name;
    loss = losses::CosineSimilarity(o);
  } else if (class_name == "MeanSquaredError") {
    loss = losses::MeanSquaredError(simple);
  } else if (class_name == "MeanAbsoluteError") {
    loss = losses::MeanAbsoluteError(simple);
  } else if (class_name == "MeanAbsolutePercentageError") {
    loss = losses::MeanAbsolutePercentageError(simple);
  } else if (class_name == "MeanSquaredLogarithmicError") {
    loss = losses::MeanSquaredLogarithmicError(simple);
  } else if (class_name == "KLDivergence") {
    loss = losses::KLDivergence(simple);
  } else if (class_name == "LogCosh") {
    loss = losses::LogCosh(simple);
  } else if (class_name == "Poisson") {
    loss = losses::Poisson(simple);
  } else if (class_name == "Hinge") {
    loss = losses::Hinge(simple);
  } else if (class_name == "SquaredHinge") {
    loss = losses::SquaredHinge(simple);
  } else {
    loss = losses::CategoricalHinge(simple);
  }
  r.finish();
  return *loss;
}

// ---- metrics ----

json metric_json(const L::MetricArg& metric, const std::string& what) {
  return metric.get() ? serialize_metric(*metric.get(), what) : json(metric.name());
}

L::MetricArg metric_from(const json& value, const std::string& what) {
  if (value.is_string()) return L::MetricArg(value.get<std::string>());
  expect_object(value, what);
  const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
  if (class_name == "function") return L::MetricArg(as_string(member(value, "config", what), what + ": 'config'"));
  return L::MetricArg(deserialize_metric(value, what));
}

json metric_list_json(const std::vector<L::MetricArg>& metrics, const std::string& what) {
  json out = json::array();
  for (const auto& m : metrics) out.push_back(metric_json(m, what));
  return out;
}

std::vector<L::MetricArg> metric_list_from(const json& value, const std::string& what) {
  std::vector<L::MetricArg> out;
  if (value.is_string() || value.is_object()) {
    out.push_back(metric_from(value, what));
    return out;
  }
  expect_array(value, what);
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(metric_from(value[i], fmt::format("{}[{}]", what, i)));
  return out;
}

/// compile's metrics or weighted_metrics: a list, a list per output, lists by output name, or null.
json metrics_json(const L::MetricsArg& metrics, const std::string& what) {
  if (!metrics.single().empty()) return metric_list_json(metrics.single(), what);
  if (!metrics.per_output().empty()) {
    json list = json::array();
    for (const auto& per : metrics.per_output()) list.push_back(metric_list_json(per, what));
    return list;
  }
  if (!metrics.by_name().empty()) {
    json dict = json::object();
    for (const auto& [name, per] : metrics.by_name()) dict[name] = metric_list_json(per, what);
    return dict;
  }
  return nullptr;
}

L::MetricsArg metrics_from(const json& m, const std::string& what) {
  if (m.is_object() && !m.contains("class_name")) {
    L::MetricsByOutput by_name;
    for (const auto& [name, value] : m.items())
      by_name.emplace(name, metric_list_from(value, fmt::format("{}['{}']", what, name)));
    return by_name;
  }
  if (m.is_array() && !m.empty() && m[0].is_array()) {
    L::MetricsPerOutput per_output;
    for (std::size_t i = 0; i < m.size(); ++i)
      per_output.push_back(metric_list_from(m[i], fmt::format("{}[{}]", what, i)));
    return per_output;
  }
  return metric_list_from(m, what);
}

}  // namespace

json serialize_compile(const L::Model& model) {
  const std::string what = fmt::format("{}: saving the compile settings", model.name());
  check(model.optimizer() != nullptr, "{}: the model has no optimizer", what);
  const L::CompileOptions& o = model.compile_options();
  json config = json::object();
  config["optimizer"] = optimizer_json(*model.optimizer());
  const L::LossArg& loss = o.loss;
  if (loss.single()) {
    config["loss"] = loss_json(*loss.single(), what);
  } else if (!loss.per_output().empty()) {
    json list = json::array();
    for (const auto& spec : loss.per_output()) list.push_back(loss_json(spec, what));
    config["loss"] = list;
  } else {
    json dict = json::object();
    for (const auto& [name, spec] : loss.by_name()) dict[name] = loss_json(spec, what);
    config["loss"] = dict;
  }
  if (!o.loss_weights.per_output().empty()) config["loss_weights"] = o.loss_weights.per_output();
  else if (!o.loss_weights.by_name().empty()) config["loss_weights"] = o.loss_weights.by_name();
  else config["loss_weights"] = nullptr;
  config["metrics"] = metrics_json(o.metrics, what);
  config["weighted_metrics"] = metrics_json(o.weighted_metrics, what);
  config["run_eagerly"] = false;
  config["steps_per_execution"] = 1;
  config["jit_compile"] = true;
  return config;
}

void compile_from_config(L::Model& model, const json& config, const std::string& where) {
  Reader r(config, where);
  L::CompileOptions o;
  o.optimizer = optimizer_from(r.require("optimizer"), r.what("optimizer"));
  const json& loss = r.require("loss");
  if (loss.is_array()) {
    std::vector<L::LossSpec> per_output;
    for (std::size_t i = 0; i < loss.size(); ++i)
      per_output.push_back(loss_from(loss[i], fmt::format("{}[{}]", r.what("loss"), i)));
    o.loss = per_output;
  } else if (loss.is_object() && !loss.contains("class_name")) {
    std::map<std::string, L::LossSpec> by_name;
    for (const auto& [name, spec] : loss.items())
      by_name.emplace(name, loss_from(spec, fmt::format("{}['{}']", r.what("loss"), name)));
    o.loss = by_name;
  } else {
    const L::LossSpec spec = loss_from(loss, r.what("loss"));
    if (const auto* name = std::get_if<std::string>(&spec)) o.loss = *name;
    else o.loss = std::get<losses::Loss>(spec);
  }
  if (const json* w = r.find("loss_weights")) {
    if (w->is_object()) {
      std::map<std::string, double> by_name;
      for (const auto& [name, value] : w->items())
        by_name.emplace(name, as_double(value, fmt::format("{}['{}']", r.what("loss_weights"), name)));
      o.loss_weights = by_name;
    } else {
      std::vector<double> per_output;
      const json& list = expect_array(*w, r.what("loss_weights"));
      for (std::size_t i = 0; i < list.size(); ++i)
        per_output.push_back(as_double(list[i], fmt::format("{}[{}]", r.what("loss_weights"), i)));
      o.loss_weights = per_output;
    }
  }
  if (const json* m = r.find("metrics")) o.metrics = metrics_from(*m, r.what("metrics"));
  if (const json* m = r.find("weighted_metrics")) o.weighted_metrics = metrics_from(*m, r.what("weighted_metrics"));
  // How Keras executes the steps; loom has one way.
  r.ignore({"run_eagerly", "steps_per_execution", "jit_compile", "auto_scale_loss"});
  r.finish();
  try {
    model.compile(std::move(o));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace loom::models::detail
