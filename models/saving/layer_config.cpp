// Keras configs of the built-in layer classes, initializers, regularizers, constraints, activations and dtype
// policies, both ways, and the registry of users' layer classes (keras/src/saving/serialization_lib.py; each
// layer's get_config).
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <typeindex>
#include <typeinfo>
#include <utility>

#include <fmt/ranges.h>

#include "layers/activations/activation.hpp"
#include "layers/activations/softmax.hpp"
#include "layers/attention/group_query_attention.hpp"
#include "layers/attention/multi_head_attention.hpp"
#include "layers/convolution/conv1d.hpp"
#include "layers/convolution/conv2d.hpp"
#include "layers/convolution/conv2d_transpose.hpp"
#include "layers/convolution/depthwise_conv2d.hpp"
#include "layers/core/dense.hpp"
#include "layers/core/einsum_dense.hpp"
#include "layers/core/embedding.hpp"
#include "layers/core/identity.hpp"
#include "layers/core/input.hpp"
#include "layers/merging/add.hpp"
#include "layers/merging/average.hpp"
#include "layers/merging/concatenate.hpp"
#include "layers/merging/maximum.hpp"
#include "layers/merging/minimum.hpp"
#include "layers/merging/multiply.hpp"
#include "layers/merging/subtract.hpp"
#include "layers/normalization/batch_normalization.hpp"
#include "layers/normalization/group_normalization.hpp"
#include "layers/normalization/layer_normalization.hpp"
#include "layers/normalization/rms_normalization.hpp"
#include "layers/pooling/average_pooling1d.hpp"
#include "layers/pooling/average_pooling2d.hpp"
#include "layers/pooling/global_average_pooling1d.hpp"
#include "layers/pooling/global_average_pooling2d.hpp"
#include "layers/pooling/global_max_pooling1d.hpp"
#include "layers/pooling/global_max_pooling2d.hpp"
#include "layers/pooling/max_pooling1d.hpp"
#include "layers/pooling/max_pooling2d.hpp"
#include "layers/regularization/dropout.hpp"
#include "layers/regularization/spatial_dropout1d.hpp"
#include "layers/regularization/spatial_dropout2d.hpp"
#include "layers/reshaping/flatten.hpp"
#include "layers/reshaping/permute.hpp"
#include "layers/reshaping/repeat_vector.hpp"
#include "layers/reshaping/reshape.hpp"
#include "layers/reshaping/up_sampling2d.hpp"
#include "layers/reshaping/zero_padding2d.hpp"
#include "models/saving/detail/serialization.hpp"

namespace loom::models {

namespace detail {

namespace L = loom::layers;
using L::Constraint;
using L::Initializer;
using L::Layer;
using L::Regularizer;

namespace {

// ---- initializers ----

std::string camel_case(std::string_view snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

/// Keras's initializer classes loom has: the class name and the loom function name.
const std::map<std::string, std::string, std::less<>>& initializer_classes() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"Zeros", "zeros"},
      {"Ones", "ones"},
      {"Constant", "constant"},
      {"RandomNormal", "random_normal"},
      {"RandomUniform", "random_uniform"},
      {"TruncatedNormal", "truncated_normal"},
      {"VarianceScaling", "variance_scaling"},
      {"GlorotUniform", "glorot_uniform"},
      {"GlorotNormal", "glorot_normal"},
      {"HeNormal", "he_normal"},
      {"HeUniform", "he_uniform"},
      {"LecunNormal", "lecun_normal"},
      {"LecunUniform", "lecun_uniform"},
  };
  return table;
}

bool is_variance_scaling_preset(std::string_view loom_name) {
  return loom_name.starts_with("glorot_") || loom_name.starts_with("he_") || loom_name.starts_with("lecun_");
}

Initializer initializer_from_config(const json& value, const std::string& what) {
  if (value.is_string()) {
    // Keras accepts the function names ("glorot_uniform") and the class names ("GlorotUniform").
    const std::string name = value.get<std::string>();
    const auto& classes = initializer_classes();
    const auto it = classes.find(name);
    try {
      return Initializer(it != classes.end() ? it->second : name);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", what, e.what()));
    }
  }
  expect_object(value, what);
  const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
  const auto& classes = initializer_classes();
  const auto it = classes.find(class_name);
  if (it == classes.end()) {
    std::vector<std::string> known;
    for (const auto& [name, fn] : classes) known.push_back(name);
    throw Error(fmt::format("{}: loom has no initializer class '{}'; it supports {}", what, class_name,
                            fmt::join(known, ", ")));
  }
  const std::string& fn = it->second;
  const json empty = json::object();
  Reader r(value.contains("config") ? member(value, "config", what) : empty, what + " config");
  r.ignore({"dtype"});
  Initializer out = L::initializers::zeros();
  if (fn == "zeros") {
    out = L::initializers::zeros();
  } else if (fn == "ones") {
    out = L::initializers::ones();
  } else if (fn == "constant") {
    out = L::initializers::constant(r.number("value", 0.0));
  } else if (fn == "random_normal" || fn == "truncated_normal") {
    const double mean = r.number("mean", 0.0), stddev = r.number("stddev", 0.05);
    const auto seed = r.seed();
    out = fn == "random_normal" ? L::initializers::random_normal(mean, stddev, seed)
                                : L::initializers::truncated_normal(mean, stddev, seed);
  } else if (fn == "random_uniform") {
    const double minval = r.number("minval", -0.05), maxval = r.number("maxval", 0.05);
    out = L::initializers::random_uniform(minval, maxval, r.seed());
  } else {
    r.unsupported({"input_axes", "output_axes"});
    const auto seed = r.seed();
    if (fn == "variance_scaling") {
      const double scale = r.number("scale", 1.0);
      const std::string mode = r.string("mode", "fan_in");
      const std::string distribution = r.string("distribution", "truncated_normal");
      out = L::initializers::variance_scaling(scale, mode, distribution, seed);
    } else {
      static const std::map<std::string, Initializer (*)(std::optional<std::uint64_t>), std::less<>> presets = {
          {"glorot_uniform", L::initializers::glorot_uniform}, {"glorot_normal", L::initializers::glorot_normal},
          {"he_normal", L::initializers::he_normal},           {"he_uniform", L::initializers::he_uniform},
          {"lecun_normal", L::initializers::lecun_normal},     {"lecun_uniform", L::initializers::lecun_uniform}};
      out = presets.at(fn)(seed);
    }
  }
  r.finish();
  return out;
}

json initializer_to_config(const Initializer& initializer, const std::string& what) {
  const auto& arguments = initializer.arguments();
  check(arguments.has_value(), "{}: the initializer '{}' is a C++ function, which a .keras archive cannot hold; "
        "use one of loom's initializers (layers/initializers/initializers.hpp)", what, initializer.name());
  json config = json::object();
  const std::string& fn = initializer.name();
  const auto seed = arguments->seed ? json(*arguments->seed) : json(nullptr);
  if (fn == "random_normal" || fn == "truncated_normal" || fn == "random_uniform") config["seed"] = seed;
  if (is_variance_scaling_preset(fn)) {
    config["seed"] = seed;
  } else {
    for (const auto& [key, value] : arguments->numbers) config[key] = value;
  }
  if (fn == "variance_scaling") {
    config["seed"] = seed;
    config["mode"] = arguments->mode;
    config["distribution"] = arguments->distribution;
  }
  if (fn == "variance_scaling" || is_variance_scaling_preset(fn)) {
    config["input_axes"] = nullptr;
    config["output_axes"] = nullptr;
  }
  return {{"module", "keras.initializers"}, {"class_name", camel_case(fn)}, {"config", config},
          {"registered_name", nullptr}};
}

Initializer read_initializer(Reader& r, std::string_view key, const char* fallback) {
  const json* v = r.find(key);
  return v ? initializer_from_config(*v, r.what(key)) : Initializer(fallback);
}

// ---- regularizers and constraints ----

/// A serialized object's "config" ({} when it is missing or null).
const json& config_of_entry(const json& value, const std::string& what) {
  static const json empty = json::object();
  return value.contains("config") && !value["config"].is_null() ? member(value, "config", what) : empty;
}

/// read(), with `what` in front of any loom::Error message that does not already start with it.
template <class Read>
auto naming_errors(const std::string& what, Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with(what)) throw;
    throw Error(fmt::format("{}: {}", what, e.what()));
  }
}

/// A serialized regularizer ({"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.01}}) or
/// a name keras.regularizers.get knows.
Regularizer regularizer_from_config(const json& value, const std::string& what) {
  return naming_errors(what, [&] {
    if (value.is_string()) return Regularizer(value.get<std::string>());
    expect_object(value, what);
    const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
    Reader r(config_of_entry(value, what), what + " config");
    Regularizer out;
    if (class_name == "L1") {
      out = L::regularizers::l1(r.number("l1", 0.01));
    } else if (class_name == "L2") {
      out = L::regularizers::l2(r.number("l2", 0.01));
    } else if (class_name == "L1L2") {
      const double l1 = r.number("l1", 0.0), l2 = r.number("l2", 0.0);
      out = L::regularizers::l1_l2(l1, l2);
    } else if (class_name == "OrthogonalRegularizer") {
      const double factor = r.number("factor", 0.01);
      out = L::regularizers::orthogonal_regularizer(factor, r.string("mode", "rows"));
    } else {
      throw Error(fmt::format("loom has no regularizer class '{}'; it supports L1, L2, L1L2, OrthogonalRegularizer",
                              class_name));
    }
    r.finish();
    return out;
  });
}

/// Keras's serialize_keras_object(regularizer); null for none. A callable has no Keras form.
json regularizer_to_config(const Regularizer& regularizer, const std::string& what) {
  if (!regularizer) return nullptr;
  check(regularizer.arguments().has_value(), "{}: a callable regularizer cannot be saved in a .keras archive; use "
        "one of loom's regularizers (layers/regularizers/regularizers.hpp)", what);
  json config = json::object();
  for (const auto& [key, value] : regularizer.arguments()->numbers) config[key] = value;
  if (!regularizer.arguments()->mode.empty()) config["mode"] = regularizer.arguments()->mode;
  return {{"module", "keras.regularizers"}, {"class_name", regularizer.class_name()}, {"config", config},
          {"registered_name", nullptr}};
}

Regularizer read_regularizer(Reader& r, std::string_view key) {
  const json* v = r.find(key);
  return v ? regularizer_from_config(*v, r.what(key)) : Regularizer();
}

/// A constraint's axis: an int, a list of them, or null (all axes: Keras's None); `fallback` when missing.
Axes constraint_axis(const json& config, Reader& r, std::int64_t fallback) {
  const bool present = config.contains("axis");
  const json* v = r.find("axis");
  if (!v) return present ? Axes{} : Axes(fallback);
  return Axes(r.int_or_ints(*v, "axis"));
}

/// A serialized constraint ({"module": "keras.constraints", "class_name": "MaxNorm", "config": {...}}) or a
/// name keras.constraints.get knows.
Constraint constraint_from_config(const json& value, const std::string& what) {
  return naming_errors(what, [&] {
    if (value.is_string()) return Constraint(value.get<std::string>());
    expect_object(value, what);
    const std::string class_name = as_string(member(value, "class_name", what), what + ": 'class_name'");
    const json& config = config_of_entry(value, what);
    Reader r(config, what + " config");
    Constraint out;
    if (class_name == "MaxNorm") {
      const double max_value = r.number("max_value", 2.0);
      out = L::constraints::max_norm(max_value, constraint_axis(config, r, 0));
    } else if (class_name == "MinMaxNorm") {
      const double min_value = r.number("min_value", 0.0), max_value = r.number("max_value", 1.0);
      const double rate = r.number("rate", 1.0);
      out = L::constraints::min_max_norm(min_value, max_value, rate, constraint_axis(config, r, 0));
    } else if (class_name == "NonNeg") {
      out = L::constraints::non_neg();
    } else if (class_name == "UnitNorm") {
      out = L::constraints::unit_norm(constraint_axis(config, r, 0));
    } else {
      throw Error(fmt::format("loom has no constraint class '{}'; it supports MaxNorm, MinMaxNorm, NonNeg, UnitNorm",
                              class_name));
    }
    r.finish();
    return out;
  });
}

/// Keras's serialize_keras_object(constraint); null for none. A callable has no Keras form.
json constraint_to_config(const Constraint& constraint, const std::string& what) {
  if (!constraint) return nullptr;
  check(constraint.arguments().has_value(), "{}: a callable constraint cannot be saved in a .keras archive; use one "
        "of loom's constraints (layers/constraints/constraints.hpp)", what);
  json config = json::object();
  for (const auto& [key, value] : constraint.arguments()->numbers) config[key] = value;
  if (const auto& axis = constraint.arguments()->axis) {
    if (axis->empty()) config["axis"] = nullptr;
    else if (axis->size() == 1) config["axis"] = (*axis)[0];
    else config["axis"] = std::vector<std::int64_t>(axis->begin(), axis->end());
  }
  return {{"module", "keras.constraints"}, {"class_name", constraint.class_name()}, {"config", config},
          {"registered_name", nullptr}};
}

Constraint read_constraint(Reader& r, std::string_view key) {
  const json* v = r.find(key);
  return v ? constraint_from_config(*v, r.what(key)) : Constraint();
}

/// An activation by name; "" when null or missing.
std::string read_activation(Reader& r, std::string_view key) {
  const json* v = r.find(key);
  if (!v) return "";
  check(v->is_string(), "{}: loom reads activations given by name (\"relu\"), got {}", r.what(key), describe(*v));
  std::string name = v->get<std::string>();
  L::activations::get(name, r.what(key));  // an unknown name fails here, naming the key
  return name;
}

// ---- dtype policies ----

/// A layer's "dtype" entry: its weights' dtype, or mixed_bfloat16 when its policy is that.
json dtype_policy(const L::Layer& layer) {
  const std::string name = layer.dtype_policy().mixed_bfloat16 ? "mixed_bfloat16" : keras_dtype_name(layer.dtype());
  return {{"module", "keras"}, {"class_name", "DTypePolicy"}, {"config", {{"name", name}}},
          {"registered_name", nullptr}};
}

/// A layer's "dtype": null (float32), a name, or a serialized DTypePolicy; returns the policy's name, one that
/// loom runs (layers/dtype_policy.hpp).
std::string dtype_policy_name(const json* value, const std::string& what) {
  if (value == nullptr) return "float32";
  std::string name;
  if (value->is_string()) {
    name = value->get<std::string>();
  } else {
    expect_object(*value, what);
    const std::string class_name = as_string(member(*value, "class_name", what), what + ": 'class_name'");
    check(class_name == "DTypePolicy" || class_name == "FloatDTypePolicy", "{}: loom supports the dtype policies "
          "float32, float64 and mixed_bfloat16, got a {}", what, class_name);
    const json& config = member(*value, "config", what);
    name = as_string(member(config, "name", what + " config"), what + " config: 'name'");
  }
  DTypePolicy::from_name(name, what);  // one loom does not run fails here
  return name;
}

/// The dtype a layer of this policy builds its weights in.
DType weights_dtype(const std::string& policy) { return policy == "float64" ? DType::f64 : DType::f32; }

// ---- the built-in classes ----

json axes_json(const Axes& axes) {
  if (axes.size() == 1) return axes[0];
  return json(std::vector<std::int64_t>(axes.begin(), axes.end()));
}

Axes axes_from(Reader& r, std::string_view key, std::int64_t fallback) {
  const json* v = r.find(key);
  if (!v) return fallback;
  const auto axes = r.int_or_ints(*v, key);
  check(!axes.empty(), "{}: an empty list of axes", r.what(key));
  return Axes(axes);
}

/// A named activation's Keras config entry; a callable one cannot be saved.
std::string activation_json(const L::activations::Activation& activation, const L::Layer& layer) {
  check(!activation.is_callable(),
        "{}: cannot save a callable activation; only activations given by name (\"relu\") can be saved",
        layer.name());
  return activation.name().empty() ? "linear" : activation.name();
}

/// Reads the regularizers and constraints of a layer with a kernel and a bias into its options
/// (activity_regularizer is every layer's: deserialize_layer reads it).
template <class Options>
void read_kernel_bias_extras(Reader& r, Options& o) {
  o.kernel_regularizer = read_regularizer(r, "kernel_regularizer");
  o.bias_regularizer = read_regularizer(r, "bias_regularizer");
  o.kernel_constraint = read_constraint(r, "kernel_constraint");
  o.bias_constraint = read_constraint(r, "bias_constraint");
  r.unsupported({"quantization_config"});
}

/// Writes them, in Keras's order.
template <class Options>
void write_kernel_bias_extras(const Options& o, json& c, const std::string& what) {
  c["kernel_regularizer"] = regularizer_to_config(o.kernel_regularizer, what);
  c["bias_regularizer"] = regularizer_to_config(o.bias_regularizer, what);
  c["kernel_constraint"] = constraint_to_config(o.kernel_constraint, what);
  c["bias_constraint"] = constraint_to_config(o.bias_constraint, what);
}

template <class T>
const T& as(const Layer& layer) {
  return static_cast<const T&>(layer);
}

struct BuiltinClass {
  std::string class_name;
  std::type_index type;
  CallStyle style;
  /// Makes the layer from its config; the name is given, the common keys already read.
  std::function<std::shared_ptr<Layer>(Reader& r, const std::string& name)> from_config;
  /// Adds the class's own keys to `config` (which holds name, trainable, dtype).
  std::function<void(const Layer& layer, json& config, const std::string& what)> to_config;
};

/// An int-or-tuple size (kernel_size, strides, ...) as a list; `fallback` when missing or null.
std::vector<std::int64_t> read_sizes(Reader& r, std::string_view key, std::vector<std::int64_t> fallback) {
  const json* v = r.find(key);
  return v ? r.int_or_ints(*v, key) : fallback;
}

/// Keras's keys of every convolution layer that loom has no counterpart for.
void conv_extras_unsupported(Reader& r) {
  r.unsupported({"lora_rank", "dora_rank", "quantization_config"});
  r.ignore({"lora_alpha", "dora_alpha"});  // used only with lora_rank / dora_rank
}

/// kernel_size, which every convolution layer's config must hold.
std::vector<std::int64_t> read_kernel_size(Reader& r) {
  const auto kernel_size = read_sizes(r, "kernel_size", {});
  check(!kernel_size.empty(), "{}: the key 'kernel_size' is missing", r.context());
  return kernel_size;
}

/// The options every convolution layer's config holds, into any of their options structs; `kernel` names the
/// kernel's keys ("kernel", "depthwise").
template <class Options>
void read_conv_options(Reader& r, Options& o, const std::string& name, std::string_view kernel) {
  o.strides = read_sizes(r, "strides", {1});
  o.padding = r.string("padding", "valid");
  o.data_format = r.string("data_format", "channels_last");
  o.dilation_rate = read_sizes(r, "dilation_rate", {1});
  o.activation = read_activation(r, "activation");
  o.use_bias = r.boolean("use_bias", true);
  o.bias_initializer = read_initializer(r, "bias_initializer", "zeros");
  const std::string kernel_key(kernel);
  Regularizer kernel_regularizer = read_regularizer(r, kernel_key + "_regularizer");
  Constraint kernel_constraint = read_constraint(r, kernel_key + "_constraint");
  if constexpr (requires { o.depthwise_regularizer; }) {
    o.depthwise_regularizer = std::move(kernel_regularizer);
    o.depthwise_constraint = std::move(kernel_constraint);
  } else {
    o.kernel_regularizer = std::move(kernel_regularizer);
    o.kernel_constraint = std::move(kernel_constraint);
  }
  o.bias_regularizer = read_regularizer(r, "bias_regularizer");
  o.bias_constraint = read_constraint(r, "bias_constraint");
  conv_extras_unsupported(r);
  o.name = name;
}

/// The keys every convolution layer writes, from its standardized options; the regularizers and constraints
/// (null for none) in Keras's order.
void conv_common_config(const L::BaseConv& conv, json& c, const L::activations::Activation& activation,
                        bool use_bias, std::string_view kernel, const Regularizer& kernel_regularizer,
                        const Regularizer& bias_regularizer, const Constraint& kernel_constraint,
                        const Constraint& bias_constraint, const std::string& what) {
  c["kernel_size"] = conv.kernel_size();
  c["strides"] = conv.strides();
  c["padding"] = conv.padding();
  c["data_format"] = conv.data_format();
  c["dilation_rate"] = conv.dilation_rate();
  c["activation"] = activation_json(activation, conv);
  c["use_bias"] = use_bias;
  c[std::string(kernel) + "_regularizer"] = regularizer_to_config(kernel_regularizer, what);
  c["bias_regularizer"] = regularizer_to_config(bias_regularizer, what);
  c["activity_regularizer"] = regularizer_to_config(conv.activity_regularizer(), what);
  c[std::string(kernel) + "_constraint"] = constraint_to_config(kernel_constraint, what);
  c["bias_constraint"] = constraint_to_config(bias_constraint, what);
}

/// Conv1D and Conv2D, which share their options.
template <class ConvLayer>
BuiltinClass conv_class(const char* class_name) {
  return {class_name, typeid(ConvLayer), CallStyle::single,
          [](Reader& r, const std::string& name) -> std::shared_ptr<Layer> {
            const std::int64_t filters = r.integer("filters");
            const auto kernel_size = read_kernel_size(r);
            L::ConvolutionOptions o;
            read_conv_options(r, o, name, "kernel");
            o.groups = r.integer("groups", 1);
            o.kernel_initializer = read_initializer(r, "kernel_initializer", "glorot_uniform");
            return std::make_shared<ConvLayer>(filters, kernel_size, o);
          },
          [](const Layer& layer, json& c, const std::string& what) {
            const auto& conv = as<ConvLayer>(layer);
            c["filters"] = conv.filters();
            c["groups"] = conv.options().groups;
            const auto& o = conv.options();
            conv_common_config(conv, c, o.activation, o.use_bias, "kernel", o.kernel_regularizer, o.bias_regularizer,
                               o.kernel_constraint, o.bias_constraint, what);
            c["kernel_initializer"] = initializer_to_config(o.kernel_initializer, what);
            c["bias_initializer"] = initializer_to_config(o.bias_initializer, what);
          }};
}

/// MaxPooling1D/2D and AveragePooling1D/2D: pool_size, strides (null: pool_size), padding, data_format.
template <class Pooling, class Options>
BuiltinClass pooling_class(const char* class_name) {
  return {class_name, typeid(Pooling), CallStyle::single,
          [](Reader& r, const std::string& name) -> std::shared_ptr<Layer> {
            Options o;
            o.pool_size = read_sizes(r, "pool_size", o.pool_size);
            if (const json* v = r.find("strides")) o.strides = r.int_or_ints(*v, "strides");
            o.padding = r.string("padding", "valid");
            o.data_format = r.string("data_format", "channels_last");
            o.name = name;
            return std::make_shared<Pooling>(o);
          },
          [](const Layer& layer, json& c, const std::string&) {
            const auto& p = as<L::BasePooling>(layer);
            c["pool_size"] = p.pool_size();
            c["padding"] = p.padding();
            c["strides"] = p.strides();
            c["data_format"] = p.data_format();
          }};
}

/// The global pooling layers: data_format and keepdims.
template <class Pooling, class Options>
BuiltinClass global_pooling_class(const char* class_name, CallStyle style) {
  return {class_name, typeid(Pooling), style,
          [](Reader& r, const std::string& name) -> std::shared_ptr<Layer> {
            Options o;
            o.data_format = r.string("data_format", "channels_last");
            o.keepdims = r.boolean("keepdims", false);
            o.name = name;
            return std::make_shared<Pooling>(o);
          },
          [](const Layer& layer, json& c, const std::string&) {
            const auto& p = as<L::BaseGlobalPooling>(layer);
            c["data_format"] = p.data_format();
            c["keepdims"] = p.keepdims();
          }};
}

/// ZeroPadding2D's padding: ((top, bottom), (left, right)) as Keras writes it, or what its constructor also
/// takes, an int or (height, width) with an int or a pair for each; as {top, bottom, left, right}.
std::vector<std::int64_t> read_zero_padding(Reader& r) {
  const json* v = r.find("padding");
  if (!v) return {1, 1};
  const std::string what = r.what("padding");
  if (!v->is_array()) return {as_int(*v, what)};
  check(v->size() == 2, "{}: expected an int, (height, width) or ((top, bottom), (left, right)), got {}", what,
        describe(*v));
  std::vector<std::int64_t> out;
  for (const json& side : *v) {
    const auto pair = side.is_array() ? as_ints(side, what) : std::vector<std::int64_t>(2, as_int(side, what));
    check(pair.size() == 2, "{}: expected a pair (before, after) for each of height and width, got {}", what,
          describe(*v));
    out.insert(out.end(), pair.begin(), pair.end());
  }
  return out;
}

std::vector<BuiltinClass> make_builtin_classes() {
  std::vector<BuiltinClass> out;
  out.push_back({"Dense", typeid(L::Dense), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const std::int64_t units = r.integer("units");
                   L::DenseOptions o;
                   o.activation = read_activation(r, "activation");
                   o.use_bias = r.boolean("use_bias", true);
                   o.kernel_initializer = read_initializer(r, "kernel_initializer", "glorot_uniform");
                   o.bias_initializer = read_initializer(r, "bias_initializer", "zeros");
                   read_kernel_bias_extras(r, o);
                   r.unsupported({"lora_rank"});
                   r.ignore({"lora_alpha"});  // used only with lora_rank
                   o.name = name;
                   return std::make_shared<L::Dense>(units, o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& d = as<L::Dense>(layer);
                   c["units"] = d.units();
                   c["activation"] = activation_json(d.options().activation, d);
                   c["use_bias"] = d.options().use_bias;
                   c["kernel_initializer"] = initializer_to_config(d.options().kernel_initializer, what);
                   c["bias_initializer"] = initializer_to_config(d.options().bias_initializer, what);
                   write_kernel_bias_extras(d.options(), c, what);
                   c["quantization_config"] = nullptr;
                 }});
  out.push_back({"EinsumDense", typeid(L::EinsumDense), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const std::string equation = r.string("equation", "");
                   check(!equation.empty(), "{}: the key 'equation' is missing", r.context());
                   const json& shape_value = r.require("output_shape");
                   const Shape output_shape =
                       shape_value.is_array() ? as_shape(shape_value, r.what("output_shape"))
                                              : Shape{as_int(shape_value, r.what("output_shape"))};
                   L::EinsumDenseOptions o;
                   o.activation = read_activation(r, "activation");
                   o.bias_axes = r.optional_string("bias_axes");
                   o.kernel_initializer = read_initializer(r, "kernel_initializer", "glorot_uniform");
                   o.bias_initializer = read_initializer(r, "bias_initializer", "zeros");
                   read_kernel_bias_extras(r, o);
                   r.unsupported({"lora_rank"});
                   r.ignore({"lora_alpha"});
                   o.name = name;
                   return std::make_shared<L::EinsumDense>(equation, output_shape, o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& d = as<L::EinsumDense>(layer);
                   c["output_shape"] = shape_json(d.output_shape());
                   c["equation"] = d.equation();
                   c["activation"] = activation_json(d.options().activation, d);
                   c["bias_axes"] = d.options().bias_axes ? json(*d.options().bias_axes) : json(nullptr);
                   c["kernel_initializer"] = initializer_to_config(d.options().kernel_initializer, what);
                   c["bias_initializer"] = initializer_to_config(d.options().bias_initializer, what);
                   c["kernel_regularizer"] = regularizer_to_config(d.options().kernel_regularizer, what);
                   c["bias_regularizer"] = regularizer_to_config(d.options().bias_regularizer, what);
                   c["activity_regularizer"] = regularizer_to_config(d.activity_regularizer(), what);
                   c["kernel_constraint"] = constraint_to_config(d.options().kernel_constraint, what);
                   c["bias_constraint"] = constraint_to_config(d.options().bias_constraint, what);
                   c["quantization_config"] = nullptr;
                 }});
  out.push_back({"Embedding", typeid(L::Embedding), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const std::int64_t input_dim = r.integer("input_dim"), output_dim = r.integer("output_dim");
                   L::EmbeddingOptions o;
                   o.embeddings_initializer = read_initializer(r, "embeddings_initializer", "uniform");
                   o.embeddings_regularizer = read_regularizer(r, "embeddings_regularizer");
                   o.embeddings_constraint = read_constraint(r, "embeddings_constraint");
                   o.mask_zero = r.boolean("mask_zero", false);
                   r.unsupported({"quantization_config"});
                   r.unsupported({"lora_rank"});
                   r.ignore({"lora_alpha"});
                   o.name = name;
                   return std::make_shared<L::Embedding>(input_dim, output_dim, o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& e = as<L::Embedding>(layer);
                   c["input_dim"] = e.input_dim();
                   c["output_dim"] = e.output_dim();
                   c["embeddings_initializer"] = initializer_to_config(e.options().embeddings_initializer, what);
                   c["embeddings_regularizer"] = regularizer_to_config(e.options().embeddings_regularizer, what);
                   c["activity_regularizer"] = regularizer_to_config(e.activity_regularizer(), what);
                   c["embeddings_constraint"] = constraint_to_config(e.options().embeddings_constraint, what);
                   c["mask_zero"] = e.options().mask_zero;
                   c["quantization_config"] = nullptr;
                 }});
  out.push_back({"Dropout", typeid(L::Dropout), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const double rate = as_double(r.require("rate"), r.what("rate"));
                   L::DropoutOptions o;
                   o.seed = r.seed();
                   if (const json* v = r.find("noise_shape")) o.noise_shape = as_shape(*v, r.what("noise_shape"));
                   o.name = name;
                   return std::make_shared<L::Dropout>(rate, o);
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const auto& d = as<L::Dropout>(layer);
                   c["rate"] = d.rate();
                   c["seed"] = d.options().seed ? json(*d.options().seed) : json(nullptr);
                   c["noise_shape"] = d.options().noise_shape ? shape_json(*d.options().noise_shape) : json(nullptr);
                 }});
  out.push_back({"SpatialDropout1D", typeid(L::SpatialDropout1D), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const double rate = as_double(r.require("rate"), r.what("rate"));
                   return std::make_shared<L::SpatialDropout1D>(rate, L::SpatialDropout1DOptions{r.seed(), name});
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const auto& d = as<L::SpatialDropout1D>(layer);
                   c["rate"] = d.rate();
                   c["seed"] = d.seed() ? json(*d.seed()) : json(nullptr);
                 }});
  out.push_back({"SpatialDropout2D", typeid(L::SpatialDropout2D), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const double rate = as_double(r.require("rate"), r.what("rate"));
                   L::SpatialDropout2DOptions o;
                   o.data_format = r.string("data_format", "channels_last");
                   o.seed = r.seed();
                   o.name = name;
                   return std::make_shared<L::SpatialDropout2D>(rate, o);
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const auto& d = as<L::SpatialDropout2D>(layer);
                   c["rate"] = d.rate();
                   c["seed"] = d.seed() ? json(*d.seed()) : json(nullptr);
                   c["data_format"] = d.data_format();
                 }});
  out.push_back({"Activation", typeid(L::Activation), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   check(r.find("activation") != nullptr, "{}: the key 'activation' is missing", r.context());
                   return std::make_shared<L::Activation>(read_activation(r, "activation"), L::ActivationOptions{name});
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   c["activation"] = activation_json(as<L::Activation>(layer).activation(), layer);
                 }});
  out.push_back({"Flatten", typeid(L::Flatten), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   return std::make_shared<L::Flatten>(
                       L::FlattenOptions{r.string("data_format", "channels_last"), name});
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   c["data_format"] = as<L::Flatten>(layer).data_format();
                 }});
  out.push_back({"Reshape", typeid(L::Reshape), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const json& v = r.require("target_shape");
                   return std::make_shared<L::Reshape>(r.int_or_ints(v, "target_shape"), L::ReshapeOptions{name});
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const Shape& s = as<L::Reshape>(layer).target_shape();
                   c["target_shape"] = std::vector<std::int64_t>(s.begin(), s.end());
                 }});
  out.push_back({"LayerNormalization", typeid(L::LayerNormalization), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   L::LayerNormalizationOptions o;
                   o.axis = axes_from(r, "axis", -1);
                   o.epsilon = r.number("epsilon", 1e-3);
                   o.center = r.boolean("center", true);
                   o.scale = r.boolean("scale", true);
                   o.rms_scaling = r.boolean("rms_scaling", false);
                   o.beta_initializer = read_initializer(r, "beta_initializer", "zeros");
                   o.gamma_initializer = read_initializer(r, "gamma_initializer", "ones");
                   r.unsupported({"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"});
                   o.name = name;
                   return std::make_shared<L::LayerNormalization>(o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& n = as<L::LayerNormalization>(layer);
                   const auto& o = n.options();
                   c["axis"] = std::vector<std::int64_t>(o.axis.begin(), o.axis.end());  // a list once built
                   c["epsilon"] = o.epsilon;
                   c["center"] = o.center;
                   c["scale"] = o.scale;
                   c["rms_scaling"] = o.rms_scaling;
                   c["beta_initializer"] = initializer_to_config(o.beta_initializer, what);
                   c["gamma_initializer"] = initializer_to_config(o.gamma_initializer, what);
                   for (auto key : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
                     c[key] = nullptr;
                 }});
  out.push_back({"BatchNormalization", typeid(L::BatchNormalization), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   L::BatchNormalizationOptions o;
                   o.axis = r.integer("axis", -1);
                   o.momentum = r.number("momentum", 0.99);
                   o.epsilon = r.number("epsilon", 1e-3);
                   o.center = r.boolean("center", true);
                   o.scale = r.boolean("scale", true);
                   o.beta_initializer = read_initializer(r, "beta_initializer", "zeros");
                   o.gamma_initializer = read_initializer(r, "gamma_initializer", "ones");
                   o.moving_mean_initializer = read_initializer(r, "moving_mean_initializer", "zeros");
                   o.moving_variance_initializer = read_initializer(r, "moving_variance_initializer", "ones");
                   r.unsupported({"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                                  "renorm_clipping"});
                   r.unsupported_flags({"synchronized", "renorm"});
                   r.ignore({"renorm_momentum"});  // used only with renorm
                   o.name = name;
                   return std::make_shared<L::BatchNormalization>(o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& o = as<L::BatchNormalization>(layer).options();
                   c["axis"] = o.axis;
                   c["momentum"] = o.momentum;
                   c["epsilon"] = o.epsilon;
                   c["center"] = o.center;
                   c["scale"] = o.scale;
                   c["beta_initializer"] = initializer_to_config(o.beta_initializer, what);
                   c["gamma_initializer"] = initializer_to_config(o.gamma_initializer, what);
                   c["moving_mean_initializer"] = initializer_to_config(o.moving_mean_initializer, what);
                   c["moving_variance_initializer"] = initializer_to_config(o.moving_variance_initializer, what);
                   for (auto key : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
                     c[key] = nullptr;
                   c["synchronized"] = false;
                   c["renorm"] = false;
                   c["renorm_clipping"] = nullptr;
                   c["renorm_momentum"] = 0.99;
                 }});
  out.push_back({"GroupNormalization", typeid(L::GroupNormalization), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   L::GroupNormalizationOptions o;
                   o.groups = r.integer("groups", 32);
                   o.axis = r.integer("axis", -1);
                   o.epsilon = r.number("epsilon", 1e-3);
                   o.center = r.boolean("center", true);
                   o.scale = r.boolean("scale", true);
                   o.beta_initializer = read_initializer(r, "beta_initializer", "zeros");
                   o.gamma_initializer = read_initializer(r, "gamma_initializer", "ones");
                   r.unsupported({"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"});
                   o.name = name;
                   return std::make_shared<L::GroupNormalization>(o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& o = as<L::GroupNormalization>(layer).options();
                   c["groups"] = o.groups;
                   c["axis"] = o.axis;
                   c["epsilon"] = o.epsilon;
                   c["center"] = o.center;
                   c["scale"] = o.scale;
                   c["beta_initializer"] = initializer_to_config(o.beta_initializer, what);
                   c["gamma_initializer"] = initializer_to_config(o.gamma_initializer, what);
                   for (auto key : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
                     c[key] = nullptr;
                 }});
  out.push_back({"RMSNormalization", typeid(L::RMSNormalization), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   L::RMSNormalizationOptions o;
                   o.axis = axes_from(r, "axis", -1);
                   o.epsilon = r.number("epsilon", 1e-6);
                   o.name = name;
                   return std::make_shared<L::RMSNormalization>(o);
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const auto& o = as<L::RMSNormalization>(layer).options();
                   c["axis"] = axes_json(o.axis);
                   c["epsilon"] = o.epsilon;
                 }});
  out.push_back({"MultiHeadAttention", typeid(L::MultiHeadAttention), CallStyle::attention,
                 [](Reader& r, const std::string& name) {
                   L::MultiHeadAttentionOptions o;
                   o.num_heads = r.integer("num_heads");
                   o.key_dim = r.integer("key_dim");
                   o.value_dim = r.optional_integer("value_dim");
                   o.dropout = r.number("dropout", 0.0);
                   o.use_bias = r.boolean("use_bias", true);
                   o.use_gate = r.boolean("use_gate", false);
                   if (const json* v = r.find("output_shape"))
                     o.output_shape = L::AttentionOutputShape(v->is_array() ? as_shape(*v, r.what("output_shape"))
                                                                            : Shape{as_int(*v, r.what("output_shape"))});
                   if (const json* v = r.find("attention_axes")) o.attention_axes = r.int_or_ints(*v, "attention_axes");
                   o.sliding_window = r.optional_integer("sliding_window");
                   o.kernel_initializer = read_initializer(r, "kernel_initializer", "glorot_uniform");
                   o.bias_initializer = read_initializer(r, "bias_initializer", "zeros");
                   r.unsupported({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                                  "kernel_constraint", "bias_constraint"});
                   o.seed = r.seed();
                   o.name = name;
                   return std::make_shared<L::MultiHeadAttention>(o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& m = as<L::MultiHeadAttention>(layer);
                   const auto& o = m.options();
                   c["num_heads"] = o.num_heads;
                   c["key_dim"] = o.key_dim;
                   c["value_dim"] = m.value_dim();
                   c["dropout"] = o.dropout;
                   c["use_bias"] = o.use_bias;
                   c["use_gate"] = o.use_gate;
                   c["output_shape"] = o.output_shape ? shape_json(o.output_shape->dims) : json(nullptr);
                   c["attention_axes"] = o.attention_axes ? json(*o.attention_axes) : json(nullptr);
                   c["sliding_window"] = o.sliding_window ? json(*o.sliding_window) : json(nullptr);
                   c["kernel_initializer"] = initializer_to_config(o.kernel_initializer, what);
                   c["bias_initializer"] = initializer_to_config(o.bias_initializer, what);
                   for (auto key : {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                                    "kernel_constraint", "bias_constraint"})
                     c[key] = nullptr;
                   c["seed"] = o.seed ? json(*o.seed) : json(nullptr);
                 }});
  out.push_back({"GroupQueryAttention", typeid(L::GroupQueryAttention), CallStyle::attention,
                 [](Reader& r, const std::string& name) {
                   L::GroupQueryAttentionOptions o;
                   o.head_dim = r.integer("head_dim");
                   o.num_query_heads = r.integer("num_query_heads");
                   o.num_key_value_heads = r.integer("num_key_value_heads");
                   o.dropout = r.number("dropout", 0.0);
                   o.use_bias = r.boolean("use_bias", true);
                   o.use_gate = r.boolean("use_gate", false);
                   o.sliding_window = r.optional_integer("sliding_window");
                   o.kernel_initializer = read_initializer(r, "kernel_initializer", "glorot_uniform");
                   o.bias_initializer = read_initializer(r, "bias_initializer", "zeros");
                   r.unsupported({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                                  "kernel_constraint", "bias_constraint"});
                   o.seed = r.seed();
                   o.name = name;
                   return std::make_shared<L::GroupQueryAttention>(o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& o = as<L::GroupQueryAttention>(layer).options();
                   c["head_dim"] = o.head_dim;
                   c["num_query_heads"] = o.num_query_heads;
                   c["num_key_value_heads"] = o.num_key_value_heads;
                   c["use_bias"] = o.use_bias;
                   c["use_gate"] = o.use_gate;
                   c["sliding_window"] = o.sliding_window ? json(*o.sliding_window) : json(nullptr);
                   c["dropout"] = o.dropout;
                   c["kernel_initializer"] = initializer_to_config(o.kernel_initializer, what);
                   c["bias_initializer"] = initializer_to_config(o.bias_initializer, what);
                   for (auto key : {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                                    "kernel_constraint", "bias_constraint"})
                     c[key] = nullptr;
                   c["seed"] = o.seed ? json(*o.seed) : json(nullptr);
                 }});
  const auto no_config = [](const Layer&, json&, const std::string&) {};
  out.push_back({"Add", typeid(L::Add), CallStyle::merge,
                 [](Reader&, const std::string& name) { return std::make_shared<L::Add>(L::AddOptions{name}); },
                 no_config});
  out.push_back({"Subtract", typeid(L::Subtract), CallStyle::merge,
                 [](Reader&, const std::string& name) {
                   return std::make_shared<L::Subtract>(L::SubtractOptions{name});
                 },
                 no_config});
  out.push_back({"Multiply", typeid(L::Multiply), CallStyle::merge,
                 [](Reader&, const std::string& name) {
                   return std::make_shared<L::Multiply>(L::MultiplyOptions{name});
                 },
                 no_config});
  out.push_back({"Average", typeid(L::Average), CallStyle::merge,
                 [](Reader&, const std::string& name) {
                   return std::make_shared<L::Average>(L::AverageOptions{name});
                 },
                 no_config});
  out.push_back({"Maximum", typeid(L::Maximum), CallStyle::merge,
                 [](Reader&, const std::string& name) {
                   return std::make_shared<L::Maximum>(L::MaximumOptions{name});
                 },
                 no_config});
  out.push_back({"Minimum", typeid(L::Minimum), CallStyle::merge,
                 [](Reader&, const std::string& name) {
                   return std::make_shared<L::Minimum>(L::MinimumOptions{name});
                 },
                 no_config});
  out.push_back({"Concatenate", typeid(L::Concatenate), CallStyle::merge,
                 [](Reader& r, const std::string& name) {
                   return std::make_shared<L::Concatenate>(L::ConcatenateOptions{r.integer("axis", -1), name});
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   c["axis"] = as<L::Concatenate>(layer).axis();
                 }});
  out.push_back(conv_class<L::Conv1D>("Conv1D"));
  out.push_back(conv_class<L::Conv2D>("Conv2D"));
  out.push_back({"DepthwiseConv2D", typeid(L::DepthwiseConv2D), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const auto kernel_size = read_kernel_size(r);
                   L::DepthwiseConv2DOptions o;
                   read_conv_options(r, o, name, "depthwise");
                   o.depth_multiplier = r.integer("depth_multiplier", 1);
                   o.depthwise_initializer = read_initializer(r, "depthwise_initializer", "glorot_uniform");
                   return std::make_shared<L::DepthwiseConv2D>(kernel_size, o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& conv = as<L::DepthwiseConv2D>(layer);
                   c["depth_multiplier"] = conv.options().depth_multiplier;
                   const auto& o = conv.options();
                   conv_common_config(conv, c, o.activation, o.use_bias, "depthwise", o.depthwise_regularizer,
                                      o.bias_regularizer, o.depthwise_constraint, o.bias_constraint, what);
                   c["depthwise_initializer"] = initializer_to_config(o.depthwise_initializer, what);
                   c["bias_initializer"] = initializer_to_config(o.bias_initializer, what);
                 }});
  out.push_back({"Conv2DTranspose", typeid(L::Conv2DTranspose), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   const std::int64_t filters = r.integer("filters");
                   const auto kernel_size = read_kernel_size(r);
                   L::Conv2DTransposeOptions o;
                   read_conv_options(r, o, name, "kernel");
                   if (const json* v = r.find("output_padding")) o.output_padding = r.int_or_ints(*v, "output_padding");
                   o.kernel_initializer = read_initializer(r, "kernel_initializer", "glorot_uniform");
                   return std::make_shared<L::Conv2DTranspose>(filters, kernel_size, o);
                 },
                 [](const Layer& layer, json& c, const std::string& what) {
                   const auto& conv = as<L::Conv2DTranspose>(layer);
                   c["filters"] = conv.filters();
                   const auto& o = conv.options();
                   conv_common_config(conv, c, o.activation, o.use_bias, "kernel", o.kernel_regularizer,
                                      o.bias_regularizer, o.kernel_constraint, o.bias_constraint, what);
                   c["output_padding"] = conv.output_padding() ? json(*conv.output_padding()) : json(nullptr);
                   c["kernel_initializer"] = initializer_to_config(o.kernel_initializer, what);
                   c["bias_initializer"] = initializer_to_config(o.bias_initializer, what);
                 }});
  out.push_back(global_pooling_class<L::GlobalAveragePooling1D, L::GlobalAveragePooling1DOptions>(
      "GlobalAveragePooling1D", CallStyle::masked));
  out.push_back(global_pooling_class<L::GlobalMaxPooling1D, L::GlobalMaxPooling1DOptions>("GlobalMaxPooling1D",
                                                                                           CallStyle::single));
  out.push_back(global_pooling_class<L::GlobalAveragePooling2D, L::GlobalAveragePooling2DOptions>(
      "GlobalAveragePooling2D", CallStyle::single));
  out.push_back(global_pooling_class<L::GlobalMaxPooling2D, L::GlobalMaxPooling2DOptions>("GlobalMaxPooling2D",
                                                                                           CallStyle::single));
  out.push_back(pooling_class<L::MaxPooling1D, L::MaxPooling1DOptions>("MaxPooling1D"));
  out.push_back(pooling_class<L::MaxPooling2D, L::MaxPooling2DOptions>("MaxPooling2D"));
  out.push_back(pooling_class<L::AveragePooling1D, L::AveragePooling1DOptions>("AveragePooling1D"));
  out.push_back(pooling_class<L::AveragePooling2D, L::AveragePooling2DOptions>("AveragePooling2D"));
  out.push_back({"ZeroPadding2D", typeid(L::ZeroPadding2D), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   L::ZeroPadding2DOptions o;
                   o.padding = read_zero_padding(r);
                   o.data_format = r.string("data_format", "channels_last");
                   o.name = name;
                   return std::make_shared<L::ZeroPadding2D>(o);
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const auto& p = as<L::ZeroPadding2D>(layer);
                   const auto& v = p.padding();
                   c["padding"] = json::array({json::array({v[0], v[1]}), json::array({v[2], v[3]})});
                   c["data_format"] = p.data_format();
                 }});
  out.push_back({"UpSampling2D", typeid(L::UpSampling2D), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   L::UpSampling2DOptions o;
                   o.size = read_sizes(r, "size", o.size);
                   o.data_format = r.string("data_format", "channels_last");
                   o.interpolation = r.string("interpolation", "nearest");
                   o.name = name;
                   return std::make_shared<L::UpSampling2D>(o);
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   const auto& u = as<L::UpSampling2D>(layer);
                   c["size"] = u.size();
                   c["data_format"] = u.data_format();
                   c["interpolation"] = u.interpolation();
                 }});
  out.push_back({"Softmax", typeid(L::Softmax), CallStyle::masked,
                 [](Reader& r, const std::string& name) {
                   return std::make_shared<L::Softmax>(L::SoftmaxOptions{axes_from(r, "axis", -1), name});
                 },
                 [](const Layer& layer, json& c, const std::string&) {
                   c["axis"] = axes_json(as<L::Softmax>(layer).axis());
                 }});
  out.push_back({"Identity", typeid(L::Identity), CallStyle::single,
                 [](Reader&, const std::string& name) {
                   return std::make_shared<L::Identity>(L::IdentityOptions{name});
                 },
                 no_config});
  out.push_back({"Permute", typeid(L::Permute), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   return std::make_shared<L::Permute>(r.int_or_ints(r.require("dims"), "dims"),
                                                       L::PermuteOptions{name});
                 },
                 [](const Layer& layer, json& c, const std::string&) { c["dims"] = as<L::Permute>(layer).dims(); }});
  out.push_back({"RepeatVector", typeid(L::RepeatVector), CallStyle::single,
                 [](Reader& r, const std::string& name) {
                   return std::make_shared<L::RepeatVector>(r.integer("n"), L::RepeatVectorOptions{name});
                 },
                 [](const Layer& layer, json& c, const std::string&) { c["n"] = as<L::RepeatVector>(layer).n(); }});
  return out;
}

const std::vector<BuiltinClass>& builtin_classes() {
  static const std::vector<BuiltinClass> classes = make_builtin_classes();
  return classes;
}

const BuiltinClass* builtin_by_name(std::string_view class_name) {
  for (const auto& c : builtin_classes())
    if (c.class_name == class_name) return &c;
  return nullptr;
}

const BuiltinClass* builtin_by_type(const Layer& layer) {
  for (const auto& c : builtin_classes())
    if (c.type == std::type_index(typeid(layer))) return &c;
  return nullptr;
}

// ---- the registry of users' classes ----

struct Registry {
  std::mutex mutex;
  std::map<std::string, LayerClass, std::less<>> classes;
};

Registry& registry() {
  static Registry r;
  return r;
}

/// "pkg>Name" -> "Name"; a bare name stays.
std::string_view bare_class_name(std::string_view registered) {
  const auto gt = registered.rfind('>');
  return gt == std::string_view::npos ? registered : registered.substr(gt + 1);
}

/// The user's class for an entry: custom_objects first (by registered name, then class name), then the
/// registry (the same order).
std::optional<LayerClass> find_user_class(const std::string& registered_name, const std::string& class_name,
                                          const LoadContext& context) {
  std::vector<std::string> keys;
  if (!registered_name.empty()) keys.push_back(registered_name);
  keys.push_back(class_name);
  if (context.custom_objects)
    for (const auto& key : keys)
      if (auto it = context.custom_objects->find(key); it != context.custom_objects->end()) return it->second;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& key : keys)
    if (auto it = r.classes.find(key); it != r.classes.end()) return it->second;
  return std::nullopt;
}

/// The registered class (and its registered name) whose class name is `class_name`.
std::optional<std::pair<std::string, LayerClass>> find_registered_by_class_name(const std::string& class_name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& [name, layer_class] : r.classes)
    if (bare_class_name(name) == class_name) return std::pair{name, layer_class};
  return std::nullopt;
}

std::string layer_what(const Layer& layer) {
  return fmt::format("layer '{}' ({})", layer.name(), layer.class_name());
}

}  // namespace

std::string keras_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i64:
      return "int64";
    case DType::boolean:
      return "bool";
    case DType::bf16:
      return "bfloat16";
  }
  throw Error("keras_dtype_name: unknown dtype");
}

DType dtype_from_keras(const std::string& name, const std::string& what) {
  if (name == "float32") return DType::f32;
  if (name == "float64") return DType::f64;
  if (name == "int32" || name == "int64") return DType::i64;
  if (name == "bool") return DType::boolean;
  if (name == "bfloat16") return DType::bf16;
  throw Error(fmt::format("{}: loom supports the dtypes float32, float64, bfloat16, int32 and int64 (read as "
                          "int64) and bool, got '{}'", what, name));
}

CallStyle call_style(const Layer& layer) {
  if (dynamic_cast<const L::Model*>(&layer) != nullptr) return CallStyle::model;
  const BuiltinClass* c = builtin_by_type(layer);
  return c ? c->style : CallStyle::single;
}

std::vector<std::string> builtin_layer_classes() {
  std::vector<std::string> out = {"InputLayer", "Functional", "Sequential"};
  for (const auto& c : builtin_classes()) out.push_back(c.class_name);
  std::sort(out.begin(), out.end());
  return out;
}

json serialize_layer(const Layer& layer, const std::optional<Shape>& build_input_shape) {
  const std::string what = layer_what(layer);
  if (const auto* model = dynamic_cast<const L::Model*>(&layer)) return serialize_model(*model);
  if (const auto* input = dynamic_cast<const L::Input*>(&layer)) {
    check(typeid(layer) == typeid(L::Input), "{}: a subclass of Input cannot be saved", what);
    json config = {{"batch_shape", shape_json(input->batch_shape())},
                   {"dtype", keras_dtype_name(input->input_dtype().value_or(DType::f32))},
                   {"sparse", false},
                   {"ragged", false},
                   {"name", layer.name()},
                   {"optional", false}};
    return {{"module", "keras.layers"}, {"class_name", "InputLayer"}, {"config", config},
            {"registered_name", nullptr}};
  }
  json config = {{"name", layer.name()}, {"trainable", layer.trainable()}, {"dtype", dtype_policy(layer)}};
  // Keras's Layer.get_config: every layer's activity_regularizer, when it has one.
  if (layer.activity_regularizer())
    config["activity_regularizer"] = regularizer_to_config(layer.activity_regularizer(), what);
  json entry;
  if (const BuiltinClass* c = builtin_by_type(layer)) {
    c->to_config(layer, config, what);
    entry = {{"module", "keras.layers"}, {"class_name", c->class_name}, {"config", config},
             {"registered_name", nullptr}};
  } else {
    const auto user = find_registered_by_class_name(layer.class_name());
    if (!user) {
      const bool builtin_name = builtin_by_name(layer.class_name()) != nullptr;
      throw Error(fmt::format("{}: {}; register its class with models::register_layer_class (with a get_config) to "
                              "save it. loom saves these classes by itself: {}", what,
                              builtin_name ? "a subclass of a built-in layer class has no Keras config of its own"
                                           : "loom has no Keras config for this class",
                              fmt::join(builtin_layer_classes(), ", ")));
    }
    check(user->second.get_config != nullptr, "{}: the registered class '{}' has no get_config, so it cannot be "
          "saved", what, user->first);
    const Config own = user->second.get_config(layer);
    for (const auto& [key, value] : json_of(own).items()) config[key] = value;
    entry = {{"module", nullptr}, {"class_name", layer.class_name()}, {"config", config},
             {"registered_name", user->first}};
  }
  if (build_input_shape) entry["build_config"] = {{"input_shape", shape_json(*build_input_shape)}};
  return entry;
}

std::shared_ptr<Layer> deserialize_layer(const json& entry, const LoadContext& context, const std::string& where) {
  expect_object(entry, where);
  const std::string class_name = as_string(member(entry, "class_name", where), where + ": 'class_name'");
  if (is_model_entry(entry)) return deserialize_model(entry, context, where);
  const std::string registered_name =
      has_value(entry, "registered_name") ? as_string(entry["registered_name"], where + ": 'registered_name'") : "";
  const json empty = json::object();
  const json& config = entry.contains("config") ? member(entry, "config", where) : empty;
  expect_object(config, where + ": 'config'");
  const std::string name =
      has_value(config, "name") ? as_string(config["name"], where + ": config 'name'") : L::unique_layer_name("layer");
  const std::string what = fmt::format("{} '{}' ({}) config", where, name, class_name);

  if (class_name == "InputLayer") {
    Reader r(config, what);
    r.find("name");
    const json* shape = r.find("batch_shape");
    if (!shape) shape = r.find("batch_input_shape");
    check(shape != nullptr, "{}: the key 'batch_shape' is missing", what);
    const Shape batch_shape = as_shape(*shape, r.what("batch_shape"));
    check(!batch_shape.empty(), "{}: 'batch_shape' must include the batch dimension, got []", what);
    const DType dtype = dtype_from_keras(r.string("dtype", "float32"), r.what("dtype"));
    r.unsupported_flags({"sparse", "ragged", "optional"});
    r.finish();
    L::InputOptions o;
    if (batch_shape[0] >= 0) o.batch_size = batch_shape[0];
    o.dtype = dtype;
    o.name = name;
    return std::make_shared<L::Input>(Shape(batch_shape.begin() + 1, batch_shape.end()), o);
  }

  const BuiltinClass* builtin = builtin_by_name(class_name);
  // A registered class of the same name takes precedence only when the entry says it is a custom one.
  const auto user = builtin && registered_name.empty() ? std::nullopt
                                                       : find_user_class(registered_name, class_name, context);
  std::shared_ptr<Layer> layer;
  bool trainable = true;
  if (user) {
    check(user->from_config != nullptr, "{}: the registered class has no from_config", what);
    Config c = config_of(config, what);
    layer = user->from_config(c);
    check(layer != nullptr, "{}: from_config returned no layer", what);
    check(layer->name() == name, "{}: from_config made a layer named '{}', but the config names it '{}': give the "
          "layer config.get_string(\"name\") as its name", what, layer->name(), name);
    if (has_value(config, "trainable")) trainable = as_bool(config["trainable"], what + ": 'trainable'");
    if (has_value(config, "activity_regularizer") && !layer->activity_regularizer())
      layer->set_activity_regularizer(
          regularizer_from_config(config["activity_regularizer"], what + ": 'activity_regularizer'"));
  } else {
    if (!builtin) {
      std::vector<std::string> known = builtin_layer_classes();
      const auto ops = builtin_op_classes();
      throw Error(fmt::format("{}: loom has no layer class '{}'{}. loom supports the layer classes {}, and the ops "
                              "{}; register other layer classes with models::register_layer_class or pass them in "
                              "LoadModelOptions::custom_objects", where, class_name,
                              registered_name.empty() ? "" : fmt::format(" (registered as '{}')", registered_name),
                              fmt::join(known, ", "), fmt::join(ops, ", ")));
    }
    Reader r(config, what);
    r.find("name");
    trainable = r.boolean("trainable", true);
    const std::string policy = dtype_policy_name(r.find("dtype"), r.what("dtype"));
    // Keras's Layer takes activity_regularizer as a keyword argument of every class; loom applies it in the
    // single-tensor call, so the classes called with several tensors refuse it.
    Regularizer activity;
    if (builtin->style == CallStyle::single || builtin->style == CallStyle::masked)
      activity = read_regularizer(r, "activity_regularizer");
    else
      r.unsupported({"activity_regularizer"});
    layer = builtin->from_config(r, name);
    r.finish();
    if (!layer->built()) layer->set_dtype_policy(policy);
    if (activity) layer->set_activity_regularizer(std::move(activity));
  }
  if (!trainable) layer->set_trainable(false);
  return layer;
}

DType layer_dtype_policy(const json& entry, const std::string& where) {
  if (!entry.is_object() || !entry.contains("config") || !entry["config"].is_object()) return DType::f32;
  const json& config = entry["config"];
  const auto it = config.find("dtype");
  return weights_dtype(dtype_policy_name(it == config.end() || it->is_null() ? nullptr : &*it,
                                        where + ": config 'dtype'"));
}

}  // namespace detail

void register_layer_class(const std::string& name, LayerClass layer_class) {
  check(!name.empty(), "register_layer_class: the name is empty");
  check(layer_class.from_config != nullptr, "register_layer_class('{}'): from_config is required", name);
  const std::string_view bare = detail::bare_class_name(name);
  check(!bare.empty(), "register_layer_class('{}'): no class name after '>'", name);
  const auto builtin = detail::builtin_layer_classes();
  check(std::find(builtin.begin(), builtin.end(), bare) == builtin.end(), "register_layer_class('{}'): '{}' is a "
        "built-in layer class; give your class another name", name, bare);
  detail::Registry& r = detail::registry();
  std::lock_guard lock(r.mutex);
  r.classes[name] = std::move(layer_class);
}

bool unregister_layer_class(const std::string& name) {
  detail::Registry& r = detail::registry();
  std::lock_guard lock(r.mutex);
  return r.classes.erase(name) > 0;
}

std::vector<std::string> builtin_layer_classes() { return detail::builtin_layer_classes(); }

}  // namespace loom::models
