#include "models/losses.hpp"

#include <cctype>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"
#include "models/detail/targets.hpp"

// Every loss is composed of recorded loom ops, so its gradients (of any order) come from the ops' rules.

namespace loom::losses {

namespace {

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon(): probabilities are clipped to [eps, 1 - eps]

/// y_pred must be a float tensor of rank >= 1.
void check_prediction(const Tensor& y_true, const Tensor& y_pred, std::string_view loss) {
  check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", loss);
  check(is_floating(y_pred.dtype()), "{}: y_pred must be float32 or float64, got {} of shape {}", loss,
        y_pred.dtype(), y_pred.shape());
  check(y_pred.ndim() >= 1, "{}: y_pred must have rank >= 1, got a scalar", loss);
}

/// As every Keras loss begins: y_true cast to y_pred's dtype, then both brought to one rank.
std::pair<Tensor, Tensor> prepare(const Tensor& y_true, const Tensor& y_pred, std::string_view loss) {
  check_prediction(y_true, y_pred, loss);
  return models::detail::squeeze_or_expand_to_same_rank(
      y_true.dtype() == y_pred.dtype() ? y_true : ops::cast(y_true, y_pred.dtype()), y_pred);
}

void check_same_shape(const Tensor& y_true, const Tensor& y_pred, std::string_view loss) {
  check(y_true.shape() == y_pred.shape(), "{}: y_true and y_pred must have the same shape, got {} and {}", loss,
        y_true.shape(), y_pred.shape());
}

/// log of the class probabilities along `axis`: log_softmax of logits, or (Keras) the probabilities
/// renormalized to sum to 1, clipped, then logged.
Tensor log_probabilities(const Tensor& y_pred, std::int64_t axis, bool from_logits) {
  if (from_logits) return ops::log_softmax(y_pred, axis);
  const Tensor p = ops::div(y_pred, ops::sum(y_pred, {axis}, /*keepdims=*/true));
  return ops::log(ops::clip(p, kEpsilon, 1.0 - kEpsilon));
}

void check_smoothing(double label_smoothing, std::string_view loss) {
  check(label_smoothing >= 0.0 && label_smoothing <= 1.0, "{}: label_smoothing must be in [0, 1], got {}", loss,
        label_smoothing);
}

/// prepare() followed by the same-shape check, for the elementwise losses.
std::pair<Tensor, Tensor> prepare_same_shape(const Tensor& y_true, const Tensor& y_pred, std::string_view loss) {
  auto pair = prepare(y_true, y_pred, loss);
  check_same_shape(pair.first, pair.second, loss);
  return pair;
}

/// Keras's convert_binary_labels_to_hinge: labels that are all 0 or 1 become -1 or 1; others are kept.
Tensor hinge_labels(const Tensor& t) {
  const Tensor binary = ops::logical_or(ops::equal(t, Tensor::scalar(0.0, t.dtype())),
                                        ops::equal(t, Tensor::scalar(1.0, t.dtype())));
  const bool all_binary = t.numel() == 0 || ops::min(ops::cast(binary, DType::f64)).item<double>() == 1.0;
  return all_binary ? 2.0 * t - 1.0 : t;
}

/// x / max(||x||_2, 1e-7) along `axis`, as keras.ops.normalize (x * min(rsqrt(sum x^2), 1e7)).
Tensor l2_normalize(const Tensor& x, std::int64_t axis) {
  const Tensor inv_norm = ops::rsqrt(ops::sum(ops::square(x), {axis}, /*keepdims=*/true));
  return x * ops::minimum(inv_norm, Tensor::scalar(1.0 / kEpsilon, x.dtype()));
}

/// log(1 + exp(x)), stable for any x.
Tensor softplus(const Tensor& x) { return -ops::log_sigmoid(-x); }

}  // namespace

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare(y_true, y_pred, "mean_squared_error");
  check_same_shape(t, p, "mean_squared_error");
  return ops::mean(ops::square(ops::sub(t, p)), {-1});
}

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare(y_true, y_pred, "mean_absolute_error");
  check_same_shape(t, p, "mean_absolute_error");
  return ops::mean(ops::abs(ops::sub(t, p)), {-1});
}

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, const CrossentropyOptions& options) {
  const auto [from_logits, label_smoothing, axis] = options;
  auto [t, p] = prepare(y_true, y_pred, "binary_crossentropy");
  check_same_shape(t, p, "binary_crossentropy");
  check_smoothing(label_smoothing, "binary_crossentropy");
  const std::int64_t a = normalize_axis(axis, p.ndim(), "binary_crossentropy");
  if (label_smoothing > 0.0) t = t * (1.0 - label_smoothing) + 0.5 * label_smoothing;
  Tensor bce;
  if (from_logits) {
    // -t log(sigmoid(x)) - (1 - t) log(sigmoid(-x)), stable for any |x| (Keras's JAX backend).
    bce = -(t * ops::log_sigmoid(p) + (1.0 - t) * ops::log_sigmoid(-p));
  } else {
    const Tensor q = ops::clip(p, kEpsilon, 1.0 - kEpsilon);
    bce = -(t * ops::log(q) + (1.0 - t) * ops::log(1.0 - q));
  }
  return ops::mean(bce, {a});
}

Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, const CrossentropyOptions& options) {
  const auto [from_logits, label_smoothing, axis] = options;
  auto [t, p] = prepare(y_true, y_pred, "categorical_crossentropy");
  check_same_shape(t, p, "categorical_crossentropy");
  check_smoothing(label_smoothing, "categorical_crossentropy");
  const std::int64_t a = normalize_axis(axis, p.ndim(), "categorical_crossentropy");
  if (label_smoothing > 0.0)
    t = t * (1.0 - label_smoothing) + label_smoothing / double(p.shape()[std::size_t(a)]);
  return -ops::sum(t * log_probabilities(p, a, from_logits), {a});
}

Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       const SparseCrossentropyOptions& options) {
  const auto [from_logits, axis] = options;
  constexpr std::string_view loss = "sparse_categorical_crossentropy";
  check_prediction(y_true, y_pred, loss);
  const std::int64_t a = normalize_axis(axis, y_pred.ndim(), loss);
  // Keras accepts labels with a size-1 class axis ([N, 1] for [N, C]) and squeezes it.
  Tensor labels = models::detail::squeeze_or_expand_to_same_rank(models::detail::class_ids(y_true, loss), y_pred).first;
  if (labels.ndim() == y_pred.ndim() && labels.shape()[std::size_t(a)] == 1) labels = ops::squeeze(labels, a);
  Shape expected = y_pred.shape();
  expected.erase(expected.begin() + a);
  check(labels.shape() == expected,
        "{}: y_true must have y_pred's shape without the class axis {}: got y_true {} and y_pred {} (expected {})",
        loss, axis, y_true.shape(), y_pred.shape(), expected);
  const std::int64_t classes = y_pred.shape()[std::size_t(a)];
  ops::check_class_labels(labels, classes, loss);
  // Picks each label's log-probability (no one-hot product, so a -inf logit elsewhere cannot give 0 * -inf).
  const Tensor picked = ops::take_along_axis(log_probabilities(y_pred, a, from_logits), ops::expand_dims(labels, a), a);
  return -ops::squeeze(picked, a);
}

Tensor huber(const Tensor& y_true, const Tensor& y_pred, const HuberOptions& options) {
  check(options.delta >= 0.0, "huber: delta must be >= 0, got {}", options.delta);
  auto [t, p] = prepare_same_shape(y_true, y_pred, "huber");
  const double delta = options.delta;
  const Tensor error = p - t;
  const Tensor abs_error = ops::abs(error);
  const Tensor quadratic = 0.5 * ops::square(error);
  const Tensor linear = delta * abs_error - 0.5 * delta * delta;
  return ops::mean(ops::where(ops::less_equal(abs_error, Tensor::scalar(delta, p.dtype())), quadratic, linear), {-1});
}

Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "kl_divergence");
  const Tensor tc = ops::clip(t, kEpsilon, 1.0);
  return ops::sum(tc * ops::log(tc / ops::clip(p, kEpsilon, 1.0)), {-1});
}

Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "log_cosh");
  const Tensor x = p - t;
  return ops::mean(x + softplus(-2.0 * x) - std::log(2.0), {-1});
}

Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, const CosineSimilarityOptions& options) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "cosine_similarity");
  const std::int64_t a = normalize_axis(options.axis, p.ndim(), "cosine_similarity");
  return -ops::sum(l2_normalize(t, a) * l2_normalize(p, a), {a});
}

Tensor poisson(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "poisson");
  return ops::mean(p - t * ops::log(p + kEpsilon), {-1});
}

Tensor hinge(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "hinge");
  return ops::mean(ops::relu(1.0 - hinge_labels(t) * p), {-1});
}

Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "squared_hinge");
  return ops::mean(ops::square(ops::relu(1.0 - hinge_labels(t) * p)), {-1});
}

Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "categorical_hinge");
  const Tensor pos = ops::sum(t * p, {-1});
  const Tensor neg = ops::max((1.0 - t) * p, {-1});
  return ops::relu(neg - pos + 1.0);
}

Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "mean_squared_logarithmic_error");
  const Tensor eps = Tensor::scalar(kEpsilon, p.dtype());
  return ops::mean(ops::square(ops::log(ops::maximum(p, eps) + 1.0) - ops::log(ops::maximum(t, eps) + 1.0)), {-1});
}

Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_same_shape(y_true, y_pred, "mean_absolute_percentage_error");
  const Tensor denominator = ops::maximum(ops::abs(t), Tensor::scalar(kEpsilon, p.dtype()));
  return 100.0 * ops::mean(ops::abs((t - p) / denominator), {-1});
}

// ---- classes ----

namespace {

constexpr const char* kDefaultReduction = "sum_over_batch_size";

Loss simple_loss(LossFunction fn, const char* class_name, const char* default_name, LossOptions options) {
  return Loss(std::move(fn), options.name.value_or(default_name), std::move(options.reduction), class_name);
}

LossConfig crossentropy_config(const CrossentropyOptions& o) {
  return {{"from_logits", o.from_logits}, {"label_smoothing", o.label_smoothing}, {"axis", o.axis}};
}

}  // namespace

MeanSquaredError::MeanSquaredError(LossOptions options)
    : Loss(simple_loss(mean_squared_error, "MeanSquaredError", "mean_squared_error", std::move(options))) {}
MeanAbsoluteError::MeanAbsoluteError(LossOptions options)
    : Loss(simple_loss(mean_absolute_error, "MeanAbsoluteError", "mean_absolute_error", std::move(options))) {}
MeanAbsolutePercentageError::MeanAbsolutePercentageError(LossOptions options)
    : Loss(simple_loss(mean_absolute_percentage_error, "MeanAbsolutePercentageError",
                       "mean_absolute_percentage_error", std::move(options))) {}
MeanSquaredLogarithmicError::MeanSquaredLogarithmicError(LossOptions options)
    : Loss(simple_loss(mean_squared_logarithmic_error, "MeanSquaredLogarithmicError",
                       "mean_squared_logarithmic_error", std::move(options))) {}
KLDivergence::KLDivergence(LossOptions options)
    : Loss(simple_loss(kl_divergence, "KLDivergence", "kl_divergence", std::move(options))) {}
LogCosh::LogCosh(LossOptions options) : Loss(simple_loss(log_cosh, "LogCosh", "log_cosh", std::move(options))) {}
Poisson::Poisson(LossOptions options) : Loss(simple_loss(poisson, "Poisson", "poisson", std::move(options))) {}
Hinge::Hinge(LossOptions options) : Loss(simple_loss(hinge, "Hinge", "hinge", std::move(options))) {}
SquaredHinge::SquaredHinge(LossOptions options)
    : Loss(simple_loss(squared_hinge, "SquaredHinge", "squared_hinge", std::move(options))) {}
CategoricalHinge::CategoricalHinge(LossOptions options)
    : Loss(simple_loss(categorical_hinge, "CategoricalHinge", "categorical_hinge", std::move(options))) {}

BinaryCrossentropy::BinaryCrossentropy() : BinaryCrossentropy(Options{}) {}
BinaryCrossentropy::BinaryCrossentropy(Options o)
    : Loss([f = CrossentropyOptions{o.from_logits, o.label_smoothing, o.axis}](
               const Tensor& t, const Tensor& p) { return binary_crossentropy(t, p, f); },
           o.name, o.reduction, "BinaryCrossentropy",
           crossentropy_config({o.from_logits, o.label_smoothing, o.axis})) {
  check_smoothing(o.label_smoothing, "BinaryCrossentropy");
}

CategoricalCrossentropy::CategoricalCrossentropy() : CategoricalCrossentropy(Options{}) {}
CategoricalCrossentropy::CategoricalCrossentropy(Options o)
    : Loss([f = CrossentropyOptions{o.from_logits, o.label_smoothing, o.axis}](
               const Tensor& t, const Tensor& p) { return categorical_crossentropy(t, p, f); },
           o.name, o.reduction, "CategoricalCrossentropy",
           crossentropy_config({o.from_logits, o.label_smoothing, o.axis})) {
  check_smoothing(o.label_smoothing, "CategoricalCrossentropy");
}

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy() : SparseCategoricalCrossentropy(Options{}) {}
SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(Options o)
    : Loss([f = SparseCrossentropyOptions{o.from_logits, o.axis}](const Tensor& t, const Tensor& p) {
             return sparse_categorical_crossentropy(t, p, f);
           },
           o.name, o.reduction, "SparseCategoricalCrossentropy",
           {{"from_logits", o.from_logits}, {"ignore_class", nullptr}, {"axis", o.axis}}) {}

Huber::Huber() : Huber(Options{}) {}
Huber::Huber(Options o)
    : Loss([delta = o.delta](const Tensor& t, const Tensor& p) { return huber(t, p, {.delta = delta}); }, o.name,
           o.reduction, "Huber", {{"delta", o.delta}}) {
  check(o.delta >= 0.0, "Huber: delta must be >= 0, got {}", o.delta);
}

CosineSimilarity::CosineSimilarity() : CosineSimilarity(Options{}) {}
CosineSimilarity::CosineSimilarity(Options o)
    : Loss([axis = o.axis](const Tensor& t, const Tensor& p) { return cosine_similarity(t, p, {.axis = axis}); },
           o.name, o.reduction, "CosineSimilarity", {{"axis", o.axis}}) {}

// ---- by name ----

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

}  // namespace

Loss get(const std::string& given, const Shape& y_true_shape, const Shape& y_pred_shape) {
  std::string name = lowercase(given);
  if (name == "crossentropy" || name == "ce") name = choose_crossentropy(y_true_shape, y_pred_shape);
  const auto named = [&given](Loss loss) {
    // A string loss keeps the string as its name, as Keras's LossFunctionWrapper of the function.
    return Loss(loss.function(), given, kDefaultReduction, loss.class_name(), loss.config());
  };
  if (name == "mse" || name == "mean_squared_error" || name == "meansquarederror") return named(MeanSquaredError());
  if (name == "mae" || name == "mean_absolute_error" || name == "meanabsoluteerror") return named(MeanAbsoluteError());
  if (name == "bce" || name == "binary_crossentropy" || name == "binarycrossentropy")
    return named(BinaryCrossentropy());
  if (name == "categorical_crossentropy" || name == "categoricalcrossentropy") return named(CategoricalCrossentropy());
  if (name == "sparse_categorical_crossentropy" || name == "sparsecategoricalcrossentropy")
    return named(SparseCategoricalCrossentropy());
  if (name == "huber" || name == "huber_loss") return named(Huber());
  if (name == "kld" || name == "kl_divergence" || name == "kullback_leibler_divergence" || name == "kldivergence")
    return named(KLDivergence());
  if (name == "log_cosh" || name == "logcosh") return named(LogCosh());
  if (name == "cosine_similarity" || name == "cosinesimilarity") return named(CosineSimilarity());
  if (name == "poisson") return named(Poisson());
  if (name == "hinge") return named(Hinge());
  if (name == "squared_hinge" || name == "squaredhinge") return named(SquaredHinge());
  if (name == "categorical_hinge" || name == "categoricalhinge") return named(CategoricalHinge());
  if (name == "msle" || name == "mean_squared_logarithmic_error" || name == "meansquaredlogarithmicerror")
    return named(MeanSquaredLogarithmicError());
  if (name == "mape" || name == "mean_absolute_percentage_error" || name == "meanabsolutepercentageerror")
    return named(MeanAbsolutePercentageError());
  throw Error(fmt::format(
      "losses::get: unknown loss '{}'; known: mse, mae, binary_crossentropy (bce), categorical_crossentropy, "
      "sparse_categorical_crossentropy, crossentropy (ce, chosen by shapes), huber, kl_divergence (kld, "
      "kullback_leibler_divergence), log_cosh (logcosh), cosine_similarity, poisson, hinge, squared_hinge, "
      "categorical_hinge, mean_squared_logarithmic_error (msle), mean_absolute_percentage_error (mape), their "
      "class names, or a function",
      given));
}

}  // namespace loom::losses
