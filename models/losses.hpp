#pragma once
// Loss functions with Keras's semantics (keras.losses.*): per-sample values, reduced over the last axis
// (or `axis`): mean for mse, mae and binary crossentropy, sum for the categorical ones; the batch mean is
// taken by the caller (or by a loss object in training). y_true is cast to y_pred's dtype, as Keras does.
// Every loss first applies Keras's squeeze_or_expand_to_same_rank (so [N] and [N, 1] pair up); then shapes
// must match, and a mismatch is an error naming both shapes rather than a silent broadcast.
// Probabilities are clipped to [1e-7, 1 - 1e-7] as Keras does, and categorical probabilities are first
// renormalized to sum to 1 along the class axis; the from_logits forms are computed stably from the logits
// (log_softmax, log_sigmoid), finite for logits of any size. label_smoothing (in [0, 1]) moves binary targets
// towards 0.5 and categorical ones towards 1 / num_classes. All are composed of differentiable ops.
// Reductions over the last axis (Keras): mean for huber, log_cosh, poisson, hinge, squared_hinge, msle and
// mape; sum for kl_divergence, categorical_hinge and cosine_similarity (over `axis`).
#include <cstdint>
#include <optional>
#include <string>

#include "framework/tensor/tensor.hpp"
#include "models/loss.hpp"

namespace loom::losses {

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
/// Options of binary_crossentropy and categorical_crossentropy, in Keras's order.
struct CrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;
  std::int64_t axis = -1;
};
/// Options of sparse_categorical_crossentropy, in Keras's order (Keras's ignore_class is not supported).
struct SparseCrossentropyOptions {
  bool from_logits = false;
  std::int64_t axis = -1;
};

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, const CrossentropyOptions& options = {});
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, const CrossentropyOptions& options = {});
/// y_true holds class ids (int64, or whole numbers in float32/float64, which Keras casts) with y_pred's shape
/// minus the class axis (or with a class axis of size 1, squeezed as Keras does). Labels outside
/// [0, num_classes), and floats that are not whole numbers, are an error.
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       const SparseCrossentropyOptions& options = {});

/// Options of huber: quadratic for |y_pred - y_true| <= delta, linear beyond.
struct HuberOptions {
  double delta = 1.0;
};
/// Options of cosine_similarity: the axis the vectors lie along.
struct CosineSimilarityOptions {
  std::int64_t axis = -1;
};

/// mean(0.5 e^2 if |e| <= delta else delta |e| - 0.5 delta^2), e = y_pred - y_true; delta must be >= 0.
Tensor huber(const Tensor& y_true, const Tensor& y_pred, const HuberOptions& options = {});
/// sum(t log(t / p)) with t and p clipped to [1e-7, 1].
Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred);
/// mean(log(cosh(y_pred - y_true))), computed as x + softplus(-2x) - log 2 (finite for any x).
Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred);
/// -sum(l2_normalize(y_true) * l2_normalize(y_pred)) along `axis` (Keras returns the negative similarity);
/// a norm below 1e-7 is taken as 1e-7, so a zero vector gives 0.
Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, const CosineSimilarityOptions& options = {});
/// mean(y_pred - y_true log(y_pred + 1e-7)).
Tensor poisson(const Tensor& y_true, const Tensor& y_pred);
/// mean(max(1 - t y_pred, 0)); y_true holding only 0s and 1s is first mapped to -1 and 1 (t = 2 y_true - 1).
Tensor hinge(const Tensor& y_true, const Tensor& y_pred);
/// mean(max(1 - t y_pred, 0)^2), with hinge's label conversion.
Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred);
/// max(max((1 - y_true) y_pred) - sum(y_true y_pred) + 1, 0) over the last axis (one-hot y_true).
Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred);
/// mean((log(max(y_pred, 1e-7) + 1) - log(max(y_true, 1e-7) + 1))^2).
Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred);
/// 100 mean(|y_true - y_pred| / max(|y_true|, 1e-7)).
Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred);

// ---- Keras's loss classes (keras.losses.MeanSquaredError, ...) -------------------------------------------------
// Each is a Loss (models/loss.hpp): the function above, a reduction and a name, in Keras's argument order, so
// `.loss = losses::Huber({.delta = 2.0, .reduction = "sum"})` reads as Keras.

/// Options of the classes that take only a reduction and a name (the name defaults to the class's Keras name).
struct LossOptions {
  std::string reduction = "sum_over_batch_size";
  std::optional<std::string> name = std::nullopt;
};

class MeanSquaredError : public Loss {
 public:
  explicit MeanSquaredError(LossOptions options = {});
};
class MeanAbsoluteError : public Loss {
 public:
  explicit MeanAbsoluteError(LossOptions options = {});
};
class MeanAbsolutePercentageError : public Loss {
 public:
  explicit MeanAbsolutePercentageError(LossOptions options = {});
};
class MeanSquaredLogarithmicError : public Loss {
 public:
  explicit MeanSquaredLogarithmicError(LossOptions options = {});
};
class KLDivergence : public Loss {
 public:
  explicit KLDivergence(LossOptions options = {});
};
class LogCosh : public Loss {
 public:
  explicit LogCosh(LossOptions options = {});
};
class Poisson : public Loss {
 public:
  explicit Poisson(LossOptions options = {});
};
class Hinge : public Loss {
 public:
  explicit Hinge(LossOptions options = {});
};
class SquaredHinge : public Loss {
 public:
  explicit SquaredHinge(LossOptions options = {});
};
class CategoricalHinge : public Loss {
 public:
  explicit CategoricalHinge(LossOptions options = {});
};

class BinaryCrossentropy : public Loss {
 public:
  struct Options {
    bool from_logits = false;
    double label_smoothing = 0.0;
    std::int64_t axis = -1;
    std::string reduction = "sum_over_batch_size";
    std::string name = "binary_crossentropy";
  };
  BinaryCrossentropy();
  explicit BinaryCrossentropy(Options options);
};

class CategoricalCrossentropy : public Loss {
 public:
  struct Options {
    bool from_logits = false;
    double label_smoothing = 0.0;
    std::int64_t axis = -1;
    std::string reduction = "sum_over_batch_size";
    std::string name = "categorical_crossentropy";
  };
  CategoricalCrossentropy();
  explicit CategoricalCrossentropy(Options options);
};

/// Keras's ignore_class is not supported.
class SparseCategoricalCrossentropy : public Loss {
 public:
  struct Options {
    bool from_logits = false;
    std::string reduction = "sum_over_batch_size";
    std::int64_t axis = -1;
    std::string name = "sparse_categorical_crossentropy";
  };
  SparseCategoricalCrossentropy();
  explicit SparseCategoricalCrossentropy(Options options);
};

class Huber : public Loss {
 public:
  struct Options {
    double delta = 1.0;
    std::string reduction = "sum_over_batch_size";
    std::string name = "huber_loss";
  };
  Huber();
  explicit Huber(Options options);
};

class CosineSimilarity : public Loss {
 public:
  struct Options {
    std::int64_t axis = -1;
    std::string reduction = "sum_over_batch_size";
    std::string name = "cosine_similarity";
  };
  CosineSimilarity();
  explicit CosineSimilarity(Options options);
};

/// The Loss of a Keras loss name, alias or class name ("mse", "huber", "MeanSquaredError"; case-insensitive)
/// with default options, reducing by sum_over_batch_size; "crossentropy" / "ce" choose binary, sparse or
/// categorical from the shapes, as Keras's compile does. Unknown names are a loom::Error listing the known ones.
Loss get(const std::string& name, const Shape& y_true_shape, const Shape& y_pred_shape);

}  // namespace loom::losses
