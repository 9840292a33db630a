#include "framework/autograd/tape.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "framework/autograd/detail/forward_without_tape.hpp"
#include "framework/autograd/numerics.hpp"
#include "framework/autograd/record.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom {

// What a tape holds (GradientTape::Recording), private to this file.
struct TensorMeta {
  std::uint64_t id;
  DType dtype;
  Shape shape;
};

/// One recorded op: what it read and wrote, and its backward rule.
struct TapeNode {
  const char* op;
  std::vector<TensorMeta> inputs;
  std::vector<TensorMeta> outputs;
  BackwardFn backward;
};

/// The ids a tape tracks, as a sorted vector: ops create ids in increasing order, so inserting an op's
/// output is an append, and a lookup is a binary search with no per-id allocation (unlike a hash set).
class TensorIdSet {
 public:
  bool contains(std::uint64_t id) const { return std::binary_search(ids_.begin(), ids_.end(), id); }
  void insert(std::uint64_t id) {
    if (ids_.empty() || id > ids_.back()) {
      ids_.push_back(id);
      return;
    }
    auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
    if (*it != id) ids_.insert(it, id);
  }
  void clear() { ids_.clear(); }

 private:
  std::vector<std::uint64_t> ids_;
};

namespace {

/// Per thread: the live tapes (outermost first), the NoGradGuard depth, and the op whose backward rule
/// gradient() is running (named by check_numerics). A tape destroyed on another thread only marks its
/// recording closed; this thread drops it from the list at its next op, so nothing here ever dangles.
struct ThreadAutograd {
  std::vector<std::shared_ptr<GradientTape::Recording>> tapes;
  int no_grad_depth = 0;
  std::string_view replaying;
};

ThreadAutograd& thread_autograd() {
  thread_local ThreadAutograd state;
  return state;
}

/// RAII: marks `op`'s backward rule as running on this thread, restoring the outer one after.
class ReplayingOp {
 public:
  explicit ReplayingOp(std::string_view op) : outer_(std::exchange(thread_autograd().replaying, op)) {}
  ~ReplayingOp() { thread_autograd().replaying = outer_; }
  ReplayingOp(const ReplayingOp&) = delete;
  ReplayingOp& operator=(const ReplayingOp&) = delete;
  std::string_view outer() const { return outer_; }

 private:
  std::string_view outer_;
};

}  // namespace

struct GradientTape::Recording {
  std::atomic<bool> closed{false};  // the tape is gone (set by its destructor, on whichever thread)
  std::thread::id owner = std::this_thread::get_id();
  GradientTapeOptions options;
  bool used = false;
  int paused = 0;
  std::vector<TapeNode> nodes;
  TensorIdSet tracked;  // ids watched or produced by a recorded node
  // A remat forward pass's tape (detail::ForwardWithoutTape): keeps no node, notes the trainable inputs.
  bool keep_nodes = true;
  std::vector<Tensor> trainable_reads;

  bool tracks(const Tensor& t) const {
    return t.defined() && (tracked.contains(t.id()) || (options.watch_accessed_variables && t.impl().trainable));
  }
};

namespace {

bool wants(const GradientTape::Recording& rec, const Tensor& t) { return rec.paused == 0 && rec.tracks(t); }

void append(GradientTape::Recording& rec, TapeNode&& node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs) {
  if (rec.keep_nodes) {
    rec.nodes.push_back(std::move(node));
  } else {
    for (const Tensor& t : inputs)
      if (t.defined() && t.impl().trainable &&
          std::none_of(rec.trainable_reads.begin(), rec.trainable_reads.end(),
                       [&](const Tensor& r) { return r.id() == t.id(); }))
        rec.trainable_reads.push_back(t);
  }
  for (const auto& out : outputs)
    if (out.defined() && is_differentiable(out.dtype())) rec.tracked.insert(out.id());
}

/// This thread's live tapes, after dropping those destroyed on other threads.
std::vector<std::shared_ptr<GradientTape::Recording>>& live_tapes(ThreadAutograd& state) {
  std::erase_if(state.tapes, [](const auto& rec) { return rec->closed.load(std::memory_order_acquire); });
  return state.tapes;
}

}  // namespace

// ---- GradientTape ----

GradientTape::GradientTape(const GradientTapeOptions& options) : recording_(std::make_shared<Recording>()) {
  recording_->options = options;
  thread_autograd().tapes.push_back(recording_);
}

GradientTape::~GradientTape() {
  recording_->closed.store(true, std::memory_order_release);
  if (recording_->owner == std::this_thread::get_id()) live_tapes(thread_autograd());
}

void GradientTape::watch(const Tensor& t) {
  check(t.defined(), "GradientTape.watch: the tensor is undefined");
  check(is_differentiable(t.dtype()),
        "GradientTape.watch: only float32/float64/bf16 tensors can be watched, got {} of shape {}", t.dtype(),
        t.shape());
  recording_->tracked.insert(t.id());
}

void GradientTape::watch(const std::vector<Tensor>& ts) {
  for (const auto& t : ts) watch(t);
}

bool GradientTape::persistent() const { return recording_->options.persistent; }

std::vector<std::string_view> GradientTape::recorded_ops() const {
  std::vector<std::string_view> ops;
  ops.reserve(recording_->nodes.size());
  for (const auto& node : recording_->nodes) ops.emplace_back(node.op);
  return ops;
}

GradientTape::StopRecording::StopRecording(GradientTape& tape) : tape_(tape) { ++tape_.recording_->paused; }
GradientTape::StopRecording::~StopRecording() { --tape_.recording_->paused; }

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Variable>& sources,
                                           const Tensor& output_gradient, UnconnectedGradients unconnected) {
  std::vector<Tensor> tensors;
  tensors.reserve(sources.size());
  for (const auto& v : sources) tensors.push_back(v.value());
  return gradient(target, tensors, output_gradient, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           const Tensor& output_gradient, UnconnectedGradients unconnected) {
  Recording& rec = *recording_;
  check(!rec.used || rec.options.persistent,
        "GradientTape.gradient: a non-persistent tape can only compute gradients once; "
        "create it as GradientTape({{.persistent = true}}) to call gradient() several times");
  check(target.defined(), "GradientTape.gradient: the target is undefined");
  check(is_floating(target.dtype()), "GradientTape.gradient: the target must be float32/float64, got {} of shape {}",
        target.dtype(), target.shape());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    check(sources[i].defined(), "GradientTape.gradient: source {} is undefined", i);
    check(is_differentiable(sources[i].dtype()),
          "GradientTape.gradient: source {} is {} of shape {}; gradients exist only for float32/float64/bf16 "
          "tensors", i, sources[i].dtype(), sources[i].shape());
  }
  if (output_gradient.defined())
    check(output_gradient.shape() == target.shape() && output_gradient.dtype() == target.dtype(),
          "GradientTape.gradient: output_gradient must match the target ({} {}), got {} {}", target.dtype(),
          target.shape(), output_gradient.dtype(), output_gradient.shape());

  const StopRecording replaying(*this);  // outer tapes keep recording: that is what gives higher order

  // Forward sweep: which nodes lie on a path from some source. A source this tape does not track (never
  // watched, not a trainable variable, not produced here) is unconnected, as in TensorFlow, even when it
  // met a tracked tensor in some op.
  std::unordered_set<std::uint64_t> depends_on_source;
  for (const auto& s : sources)
    if (rec.tracks(s)) depends_on_source.insert(s.id());
  std::vector<char> relevant(rec.nodes.size(), 0);
  for (std::size_t n = 0; n < rec.nodes.size(); ++n) {
    for (const auto& in : rec.nodes[n].inputs)
      if (depends_on_source.count(in.id)) relevant[n] = 1;
    if (relevant[n])
      for (const auto& out : rec.nodes[n].outputs) depends_on_source.insert(out.id);
  }

  // Backward sweep in reverse recording order (which is topological). Memory falls as it goes, as in PyTorch:
  // a gradient is dropped once the node that produced its tensor has used it (the sources' are the result),
  // and a non-persistent tape frees each node's backward rule, with the tensors it saved, once it has run (the
  // tape counts as used from here, so that a gradient() that throws midway is not retried on a half-freed tape).
  const bool keep_nodes = rec.options.persistent;
  if (!keep_nodes) rec.used = true;
  std::unordered_set<std::uint64_t> wanted;
  for (const auto& s : sources) wanted.insert(s.id());
  std::unordered_map<std::uint64_t, Tensor> grads;
  grads[target.id()] = output_gradient.defined() ? output_gradient : Tensor::ones_like(target);
  for (std::size_t n = rec.nodes.size(); n-- > 0;) {
    TapeNode& node = rec.nodes[n];
    if (!relevant[n]) {
      if (!keep_nodes) node.backward = nullptr;
      continue;
    }
    // Gradients are carried in compute_dtype: a bf16 tensor's are summed in float32 and a bf16 product's
    // backward rule returns its float32 products unrounded; tape.gradient() rounds a bf16 source's once.
    std::vector<Tensor> output_grads;
    bool any = false;
    for (const auto& out : node.outputs) {
      auto it = grads.find(out.id);
      any = any || it != grads.end();
      output_grads.push_back(it != grads.end() ? it->second : Tensor::zeros(out.shape, compute_dtype(out.dtype)));
    }
    if (!any) {
      if (!keep_nodes) node.backward = nullptr;
      continue;
    }
    std::vector<Tensor> input_grads;
    {
      const ReplayingOp replaying_node(node.op);
      input_grads = node.backward(output_grads);
      if (check_numerics_enabled())
        numerics::check_finite(node.op, output_grads, input_grads,
                               {.backward_rule = true, .gradient_of = replaying_node.outer()});
    }
    output_grads.clear();
    for (const auto& out : node.outputs)
      if (!wanted.count(out.id)) grads.erase(out.id);
    if (!keep_nodes) node.backward = nullptr;
    check(input_grads.size() == node.inputs.size(), "GradientTape.gradient: the backward rule of '{}' returned {} "
          "gradients for {} inputs", node.op, input_grads.size(), node.inputs.size());
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorMeta& in = node.inputs[i];
      Tensor g = input_grads[i];
      if (!g.defined() || !depends_on_source.count(in.id)) continue;
      if (in.dtype == DType::bf16 && g.dtype() == DType::bf16) g = ops::cast(g, DType::f32);
      check(g.dtype() == compute_dtype(in.dtype),
            "GradientTape.gradient: the backward rule of '{}' gave a {} gradient for {} input {}", node.op, g.dtype(),
            in.dtype, i);
      if (g.shape() != in.shape) g = ops::sum_to(g, in.shape);
      auto [it, inserted] = grads.try_emplace(in.id, g);
      if (!inserted) it->second = ops::add(it->second, g);
    }
  }

  std::vector<Tensor> result;
  result.reserve(sources.size());
  for (const auto& s : sources) {
    auto it = grads.find(s.id());
    if (it != grads.end()) result.push_back(ops::cast(it->second, s.dtype()));
    else result.push_back(unconnected == UnconnectedGradients::zero ? Tensor::zeros_like(s) : Tensor());
  }
  rec.used = true;
  if (!rec.options.persistent) {
    rec.nodes.clear();
    rec.nodes.shrink_to_fit();
    rec.tracked.clear();
  }
  return result;
}

// ---- NoGradGuard ----

NoGradGuard::NoGradGuard() { ++thread_autograd().no_grad_depth; }
NoGradGuard::~NoGradGuard() { --thread_autograd().no_grad_depth; }

// ---- recording ----

namespace autograd {

namespace {

const Tensor& tensor_of(const Tensor* t) { return *t; }
const Tensor& tensor_of(const Tensor& t) { return t; }

template <class Inputs>
bool tracked_on_this_thread(const Inputs& inputs) {
  auto& state = thread_autograd();
  if (state.tapes.empty() || state.no_grad_depth > 0) return false;
  for (const auto& rec : live_tapes(state))
    for (const auto& t : inputs)
      if (wants(*rec, tensor_of(t))) return true;
  return false;
}

/// check_numerics sends every op with a float input to record(), which checks its outputs.
template <class Inputs>
bool needs_recording_or_check(const Inputs& inputs) {
  if (check_numerics_enabled())
    for (const auto& t : inputs)
      if (tensor_of(t).defined() && is_differentiable(tensor_of(t).dtype())) return true;
  return tracked_on_this_thread(inputs);
}

}  // namespace

bool needs_recording(std::initializer_list<const Tensor*> inputs) { return needs_recording_or_check(inputs); }
bool needs_recording(const std::vector<Tensor>& inputs) { return needs_recording_or_check(inputs); }
bool tape_tracks(std::initializer_list<const Tensor*> inputs) { return tracked_on_this_thread(inputs); }

void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward) {
  auto& state = thread_autograd();
  if (check_numerics_enabled()) numerics::check_finite(op, inputs, outputs, {.gradient_of = state.replaying});
  if (state.tapes.empty() || state.no_grad_depth > 0) return;
  auto& tapes = live_tapes(state);
  auto wants_any = [&](const std::shared_ptr<GradientTape::Recording>& rec) {
    for (const Tensor& t : inputs)
      if (wants(*rec, t)) return true;
    return false;
  };
  const auto last = std::find_if(tapes.rbegin(), tapes.rend(), wants_any);
  if (last == tapes.rend()) return;

  TapeNode node{op, {}, {}, std::move(backward)};
  node.inputs.reserve(inputs.size());
  for (const Tensor& t : inputs)
    node.inputs.push_back(t.defined() ? TensorMeta{t.id(), t.dtype(), t.shape()} : TensorMeta{0, DType::f32, {}});
  node.outputs.reserve(outputs.size());
  for (const Tensor& t : outputs) node.outputs.push_back(TensorMeta{t.id(), t.dtype(), t.shape()});
  // Outer tapes that want the node get copies (the closure's captured tensors are shared handles); the
  // innermost one takes it by move, so the common single-tape case copies nothing.
  for (auto it = tapes.begin(); *it != *last; ++it)
    if (wants_any(*it)) append(**it, TapeNode(node), inputs, outputs);
  append(**last, std::move(node), inputs, outputs);
}

namespace detail {

bool any_tape_recording() {
  auto& state = thread_autograd();
  return state.no_grad_depth == 0 && !live_tapes(state).empty();
}

ForwardWithoutTape::ForwardWithoutTape(const std::vector<Tensor>& inputs)
    : paused_(live_tapes(thread_autograd())), probe_(std::make_shared<GradientTape::Recording>()) {
  for (const auto& rec : paused_) ++rec->paused;
  probe_->keep_nodes = false;
  for (const Tensor& t : inputs)
    if (t.defined() && is_differentiable(t.dtype())) probe_->tracked.insert(t.id());
  thread_autograd().tapes.push_back(probe_);
}

ForwardWithoutTape::~ForwardWithoutTape() {
  probe_->closed.store(true, std::memory_order_release);
  live_tapes(thread_autograd());
  for (const auto& rec : paused_) --rec->paused;
}

const std::vector<Tensor>& ForwardWithoutTape::trainable_reads() const { return probe_->trainable_reads; }

}  // namespace detail

}  // namespace autograd

}  // namespace loom
