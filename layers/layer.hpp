#pragma once
// Layer: the Keras-style building block. A layer creates its weights from the shape of its first input
// (Keras's build), registers them and its child layers by name, in order, and computes in call().
//
//   class Residual : public L::Layer {
//    public:
//     Residual() : Layer("residual") {}
//    protected:
//     void build(const Shape& input_shape) override {
//       w_ = add_weight("kernel", {input_shape.back(), input_shape.back()}, "glorot_uniform");
//     }
//     Tensor call(const Tensor& x, bool training) override { return x + ops::matmul(x, w_); }
//    private:
//     Variable w_;
//   };
//
// Child layers are added with add_layer(), which takes the layer by value and returns a reference that stays
// valid for the parent's life (children live on the heap, so moving the parent does not move them):
//   L::Dense& dense_ = add_layer(L::Dense(64));
//
// Losses (Keras's layer.losses): a weight created with a regularizer adds its penalty, computed whenever
// losses() is asked (so it is on the caller's tape); call() may add_loss() tensors, and a layer with an
// activity_regularizer adds the penalty of its output divided by the batch size. Those call losses are
// cleared at the start of each outermost call, for the layer and all its sublayers, as in Keras.
//
// Layers are movable, not copyable: a copy would silently share or duplicate weights. To use one layer in two
// places, hold it by std::shared_ptr, or (Functional API) call the same layer object twice.
//
// Rematerialization (Keras's RematScope, framework/autograd/remat.hpp): a layer keeps the scope that was active
// when it was constructed, and its calls on real tensors follow that mode. Losses a rematerialized call adds
// stay differentiable (they leave the recomputed function as outputs of its tape node).
//
// Called on symbolic tensors (framework/graph/symbolic.hpp), a layer records a graph node instead of
// computing. The graph owns a temporary, `L::Dense(3)(x)` (moved in, move_into_shared), and a layer held by a
// std::shared_ptr; a layer object in a variable must outlive the models built from it (it may move).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "framework/autograd/remat.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/tensor/tensor.hpp"
#include "framework/tensor/variable.hpp"
#include "layers/constraints/constraints.hpp"
#include "layers/dtype_policy.hpp"
#include "layers/initializers/initializers.hpp"
#include "layers/regularizers/regularizers.hpp"

namespace loom::layers {

class Layer;

/// How graph nodes and parent layers refer to a layer: its address, kept current when the layer moves and
/// cleared when it is destroyed, and the layer itself when they own it.
struct LayerHandle {
  Layer* layer = nullptr;
  std::string name;  // the layer's, for the message when it is gone
  std::shared_ptr<Layer> owned;
  /// The graph nodes recorded so far for the layer (the next one's Keras node_index).
  std::size_t nodes = 0;
  /// The layer; a loom::Error naming `user` when it was destroyed.
  Layer& get(std::string_view user) const;
};

class Layer : public std::enable_shared_from_this<Layer> {
 public:
  virtual ~Layer();
  Layer(Layer&& other) noexcept;
  Layer& operator=(Layer&& other) noexcept;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  /// Builds the layer from x's shape on the first call, then returns call(x, training). `training` is Keras's
  /// flag: dropout drops and BatchNormalization uses (and updates) batch statistics only when it is true.
  /// When x carries a Keras mask (Tensor::keras_mask), call_with_mask gets it instead; a layer that supports
  /// masking gives its output compute_mask's result (a layer that does not drops the mask, as in Keras).
  Tensor operator()(const Tensor& x, bool training = false) &;
  /// The same for a temporary; on a symbolic tensor the temporary moves into the graph.
  Tensor operator()(const Tensor& x, bool training = false) &&;

  /// Keras's supports_masking: the layer accepts a masked input; by default it then passes the mask on.
  virtual bool supports_masking() const { return false; }
  /// Keras's compute_mask: the mask of the output for an input with this mask (undefined: none). By default
  /// `mask` itself when supports_masking(), else none.
  virtual Tensor compute_mask(const Tensor& input, const Tensor& mask) const;

  /// Builds now for inputs of this shape (batch dimension included) and dtype, if not built yet.
  void maybe_build(const Shape& input_shape, DType dtype = DType::f32);
  bool built() const { return built_; }

  /// The output shape for an input of this shape, without running data (Keras compute_output_shape).
  /// The default is the input shape, right for layers that keep it.
  virtual Shape compute_output_shape(const Shape& input_shape) const;
  /// Keras's compute_output_spec for a call on one symbolic tensor: the output's shape (-1 where free) and
  /// dtype without running the layer. The default (none) learns them by running the layer on stand-ins
  /// (framework/graph/symbolic.hpp); layers whose output sizes a stand-in cannot reveal (a stride, a window
  /// longer than the stand-in) override it with their exact compute_output_shape.
  virtual std::optional<graph::OutputSpec> compute_output_spec(const Tensor& x) const;

  /// Keras auto-naming: the class's snake_case name, then _1, _2, ... ("dense", "dense_1").
  const std::string& name() const { return name_; }
  /// The Keras class name ("Dense", "MultiHeadAttention"), shown by summary(). By default the CamelCase of
  /// the snake_case default name; layers whose class name is not that (RMSNormalization) override it.
  virtual std::string class_name() const;
  /// The snake_case name the class is known by ("dense"), before any _1, _2 suffix; weights files key
  /// layers by it, so that a fresh model with other auto-names loads them.
  const std::string& base_name() const { return base_name_; }
  /// The hierarchical name: the parents' names and this one, joined by '/' ("encoder/mha/query").
  const std::string& path() const { return path_; }
  /// The shape of the output of the latest call on data (summary() shows it), none before one.
  const std::optional<Shape>& last_output_shape() const { return last_output_shape_; }
  /// The dtype of the weights: that of the first input (floating inputs), float32 by default.
  DType dtype() const { return dtype_; }

  /// Own weights (trainable ones first, as Keras), then each child's, in registration order. Each weight's
  /// name() is its path, e.g. "encoder/mha/query/kernel".
  std::vector<Variable> weights() const;
  std::vector<Variable> trainable_weights() const;
  std::vector<Variable> non_trainable_weights() const;
  std::int64_t count_params() const;
  /// This layer's own weights, not its children's, trainable ones first (Keras's variable order).
  std::vector<Variable> own_weights() const;

  /// A frozen layer (trainable = false) has no trainable weights, its weights are not watched by tapes, and
  /// (as in Keras) BatchNormalization then runs in inference mode. Applies to every child too.
  bool trainable() const { return trainable_; }
  virtual void set_trainable(bool trainable);

  /// Direct children, in registration order.
  std::vector<std::shared_ptr<Layer>> layers() const;

  /// This layer's handle (made on first use; graph nodes and parents hold it).
  std::shared_ptr<LayerHandle> handle();

  /// Keras's losses: the add_loss and activity-regularizer losses of the latest outermost call, this layer's
  /// first, then each sublayer's (in Keras's _flatten_layers order), then the penalty of every trainable
  /// weight that has a regularizer, computed now. A model's training and evaluation loss add their sums.
  std::vector<Tensor> losses() const;
  /// Keras's add_loss, for call() (or build()): a loss tensor of any shape (its sum joins the model's loss);
  /// kept until the next outermost call. A symbolic tensor is refused; during the stand-in runs that learn a
  /// symbolic call's output shapes, losses are not kept.
  void add_loss(const Tensor& loss);
  /// Keras's activity_regularizer, which every layer has: after each call through operator() on a single
  /// tensor, the penalty of the output divided by its batch size (axis 0) is added as a loss. Layers with
  /// activity_regularizer in their options set it from there.
  const Regularizer& activity_regularizer() const { return activity_regularizer_; }
  void set_activity_regularizer(Regularizer regularizer) { activity_regularizer_ = std::move(regularizer); }

  /// The RematScope's mode this layer was constructed under (Keras's _remat_mode); nullopt outside any scope.
  const std::optional<RematMode>& remat_mode() const { return remat_mode_; }

  /// Keras's dtype_policy: the global policy when the layer was constructed, or the one its options named.
  const DTypePolicy& dtype_policy() const { return dtype_policy_; }
  /// Sets it by Keras name (an options struct's `.dtype`, a .keras file's config). Before the layer is built.
  void set_dtype_policy(const std::string& name);
  /// An operand of one of the layer's matmuls as the policy computes it: cast to bf16 under mixed_bfloat16,
  /// else unchanged. The product of two such operands is float32 either way.
  Tensor matmul_operand(const Tensor& t) const;

 protected:
  /// `default_name` is the Keras class name in snake_case ("dense"); a given `name` is used as is.
  explicit Layer(std::string_view default_name, std::optional<std::string> name = {});

  /// Creates the weights for inputs of this shape. Called once, before the first call().
  virtual void build(const Shape& input_shape);
  /// The computation. Layers with other inputs (MultiHeadAttention, Add) add their own operator() and may
  /// leave this one throwing.
  virtual Tensor call(const Tensor& x, bool training);
  /// call() for an input that carries a mask (Keras's call(inputs, mask=...)). By default call(x, training):
  /// layers that use the mask (pooling, attention) override this.
  virtual Tensor call_with_mask(const Tensor& x, const Tensor& mask, bool training);

  /// Creates a weight named `name` (under this layer's path) in the layer's dtype, initialized now. A
  /// regularizer's penalty joins losses() while the weight is trainable; a constraint becomes the Variable's,
  /// which optimizers apply after each update. Both are checked against the weight's shape (an
  /// OrthogonalRegularizer needs rank 2, a constraint's axes must lie within the rank).
  Variable add_weight(const std::string& name, const Shape& shape, const Initializer& initializer,
                      bool trainable = true, std::optional<Fans> fans = {}, const Regularizer& regularizer = {},
                      const Constraint& constraint = {});

  /// While alive, marks the outermost layer call on this thread (Keras's call context): made at the start of
  /// a call, it clears the layer's and its sublayers' call losses when no call is in progress. operator()
  /// makes one; so do the other call operators of a layer (a Functional model's list of inputs).
  class CallScope {
   public:
    explicit CallScope(Layer& layer);
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    bool outermost_;
  };

  /// Registers a child layer, taking ownership; returns a reference valid as long as this layer lives.
  template <class L>
  L& add_layer(L&& layer) {
    static_assert(std::is_base_of_v<Layer, std::decay_t<L>>, "add_layer takes a layer");
    auto child = std::make_shared<std::decay_t<L>>(std::forward<L>(layer));
    L& ref = *child;
    register_child(std::move(child));
    return ref;
  }
  /// Registers a layer that the caller shares (the same weights used in several places).
  void add_layer(std::shared_ptr<Layer> layer) { register_child(std::move(layer)); }

  /// Unregisters a child (Sequential::pop); its weights leave this layer's weights().
  void remove_layer(const Layer& child);

  /// For layers that build from several inputs (MultiHeadAttention): call once the weights exist.
  void mark_built(DType dtype);
  /// For operators with several inputs: records the output's shape for last_output_shape().
  void note_output(const Tensor& output) { last_output_shape_ = output.shape(); }

  /// Moves this layer to the heap (Functional API: a temporary called on symbolic tensors). Each layer
  /// class overrides it as `return std::make_shared<Class>(std::move(*this));`; the default throws.
  virtual std::shared_ptr<Layer> move_into_shared() &&;

  /// What a graph node runs: this layer (or the heap copy it moved into) called on real inputs.
  using LayerCall = std::function<std::vector<Tensor>(Layer& self, const std::vector<Tensor>& inputs, bool training)>;
  /// Records `call` on `inputs` (some symbolic) as a graph node of this layer, owned by `owner` when given
  /// (this layer's heap copy), and returns the symbolic outputs. Operators with several inputs use it;
  /// `attributes` are the call's other arguments by Keras's names ({"use_causal_mask", true}); `output_specs`,
  /// when given, are the outputs' specs (no stand-in run).
  std::vector<Tensor> record_call(const std::vector<Tensor>& inputs, LayerCall call,
                                  std::shared_ptr<Layer> owner = nullptr, graph::Attributes attributes = {},
                                  std::optional<std::vector<graph::OutputSpec>> output_specs = std::nullopt);

  /// Registers graph layers of a Functional model: as children, without re-rooting their weight paths.
  void adopt_layer(std::shared_ptr<LayerHandle> layer);

  /// Keras's rematerialized_call, applied: `call` on real `inputs`, rematerialized when this layer's remat mode
  /// says so ("full"; "list_of_layers" naming it; "larger_than" when the outputs' shapes, asked only then, have
  /// more elements together than the threshold). Every differentiable tensor `call` reads, besides Variables, must be one of
  /// `inputs`; `call` is kept for the backward pass, so it captures by value (masks, options) and reaches the
  /// layer through its `self` argument. A layer's operator() does this around call(); operators with other
  /// inputs (MultiHeadAttention's) do it themselves.
  std::vector<Tensor> rematerialized_call(const std::vector<Tensor>& inputs, bool training,
                                          const std::function<std::vector<Shape>()>& output_shapes, LayerCall call);
  /// call_with_mask(x, mask, training) (call(x, training) without a mask) under the remat mode: what operator()
  /// runs on real tensors, for operators that take the mask as an argument.
  Tensor call_on_data(const Tensor& x, const Tensor& mask, bool training);
  /// `activation(x)`, rematerialized when this layer's remat mode is "activations" (Keras's mode for layers
  /// with an activation: Dense, EinsumDense, the convolutions, Activation).
  Tensor apply_activation(const std::function<Tensor(const Tensor&)>& activation, const Tensor& x) const;

 private:
  void register_child(std::shared_ptr<Layer> child);
  void register_child(std::shared_ptr<LayerHandle> child, bool re_root);
  /// Keras's _clear_losses: forgets the call losses of this layer and of every sublayer.
  void clear_losses();
  /// Adds the activity regularizer's loss for output `y` of a call.
  void add_activity_loss(const Tensor& y);
  void set_path(const std::string& parent_path);
  /// Whether a call with outputs of these shapes is rematerialized (modes other than "activations").
  bool rematerializes(const std::function<std::vector<Shape>()>& output_shapes) const;
  /// True while a rematerialized call of this layer runs its function: calls of this layer inside it (a graph
  /// node's re-entry) run directly.
  bool rematerializing_ = false;
  /// This layer and every layer below it, each once.
  std::vector<Layer*> self_and_sublayers();

  struct Weight {
    Variable variable;
    bool trainable;  // as created; set_trainable(false) hides it without forgetting
  };
  std::string base_name_;
  std::string name_;
  std::string path_;
  bool built_ = false;
  bool trainable_ = true;
  DType dtype_ = DType::f32;
  std::vector<Weight> weights_;
  std::vector<std::shared_ptr<LayerHandle>> children_;
  std::weak_ptr<LayerHandle> handle_;
  std::optional<Shape> last_output_shape_;
  std::vector<Tensor> call_losses_;
  Regularizer activity_regularizer_;
  std::optional<RematMode> remat_mode_;
  DTypePolicy dtype_policy_;
};

/// Keras's naming: the first layer named `base` gets `base`, the next `base_1`, ... (per thread; ops on
/// symbolic tensors draw from the same names, as in Keras).
std::string unique_layer_name(std::string_view base);
/// Forgets the names given so far on this thread (Keras clear_session).
void reset_layer_names();

}  // namespace loom::layers
