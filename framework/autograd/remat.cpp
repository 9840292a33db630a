#include "framework/autograd/remat.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "framework/autograd/detail/forward_without_tape.hpp"
#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"
#include "framework/tensor/random.hpp"
#include "framework/tensor/variable.hpp"

namespace loom {

namespace {

struct OutputMeta {
  Shape shape;
  DType dtype;
};

/// Every output defined.
void check_outputs(const std::vector<Tensor>& outputs) {
  check(!outputs.empty(), "remat: the function returned no tensor");
  for (std::size_t i = 0; i < outputs.size(); ++i) check(outputs[i].defined(), "remat: the function's output {} is undefined", i);
}

/// The outputs the function computed: those that are not one of its inputs passed through.
std::vector<std::size_t> computed_outputs(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  std::vector<std::size_t> computed;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const Tensor& t) { return t.defined() && t.id() == outputs[i].id(); }))
      computed.push_back(i);
  return computed;
}

/// The second run's outputs must be the first run's.
void check_same(const std::vector<Tensor>& again, const std::vector<OutputMeta>& first) {
  check(again.size() == first.size(), "remat: the function returned {} tensors on its second run, {} on its first",
        again.size(), first.size());
  for (std::size_t i = 0; i < again.size(); ++i)
    check(again[i].defined() && again[i].shape() == first[i].shape && again[i].dtype() == first[i].dtype,
          "remat: the function's output {} differs between its two runs: {} {} on the first, {} on the second", i,
          first[i].dtype, first[i].shape,
          again[i].defined() ? fmt::format("{} {}", again[i].dtype(), again[i].shape()) : "undefined");
}

/// The state a recomputation needs to repeat the first pass exactly.
struct Replay {
  std::shared_ptr<const RematFunction> fn;
  std::vector<Tensor> inputs;      // the function's inputs
  std::vector<Tensor> trainables;  // the Variables' values it read
  random::Generator generator{0};  // this thread's generator before the pass that is replayed
  std::shared_ptr<random::detail::SeedLog> seeds;
  std::vector<OutputMeta> outputs;
  std::vector<std::size_t> computed;  // the outputs that are the node's, in its order
};

/// The backward rule: the function again under a tape of its own, then d(sum_i <output_i, grad_i>) / d(input).
/// What the recomputation assigns to Variables (BatchNormalization's moving statistics) is undone.
std::vector<Tensor> backward(const Replay& replay, const std::vector<Tensor>& output_grads) {
  random::Generator& thread_generator = random::thread_generator();
  const random::Generator after_first_pass = thread_generator;
  thread_generator = replay.generator;
  replay.seeds->start_replay();
  std::vector<Tensor> sources;
  std::vector<std::size_t> source_of;  // node input -> index in sources, or npos
  std::vector<Tensor> grads;
  {
    const random::detail::UseSeedLog use_seeds(*replay.seeds);
    AssignJournal recomputation_writes;
    GradientTape tape;
    for (const Tensor& t : replay.inputs)
      if (t.defined() && is_differentiable(t.dtype())) tape.watch(t);
    const std::vector<Tensor> again = (*replay.fn)(replay.inputs);
    recomputation_writes.restore();
    check_same(again, replay.outputs);
    Tensor target;
    for (std::size_t k = 0; k < replay.computed.size(); ++k) {
      const Tensor& out = again[replay.computed[k]];
      if (!is_differentiable(out.dtype()) || !output_grads[k].defined()) continue;
      // A bf16 output's gradient is float32 (the tape carries bf16 gradients in float32).
      Tensor term = ops::sum((out.dtype() == DType::bf16 ? ops::cast(out, DType::f32) : out) * output_grads[k]);
      if (target.defined() && term.dtype() != target.dtype()) term = ops::cast(term, target.dtype());
      target = target.defined() ? target + term : term;
    }
    // A tensor given twice (self-attention's query and value) gets its gradient once, at its first place.
    std::set<std::uint64_t> seen;
    for (const auto* group : {&replay.inputs, &replay.trainables})
      for (const Tensor& t : *group) {
        const bool differentiable = t.defined() && is_differentiable(t.dtype()) && seen.insert(t.id()).second;
        source_of.push_back(differentiable ? sources.size() : std::size_t(-1));
        if (differentiable) sources.push_back(t);
      }
    if (target.defined() && !sources.empty())
      grads = tape.gradient(target, sources, {}, UnconnectedGradients::none);
  }
  thread_generator = after_first_pass;
  std::vector<Tensor> out;
  out.reserve(source_of.size());
  for (const std::size_t s : source_of) out.push_back(s == std::size_t(-1) || grads.empty() ? Tensor() : grads[s]);
  return out;
}

}  // namespace

UnaryRematFunction remat(UnaryRematFunction fn) {
  check(bool(fn), "remat: the function is empty");
  RematFunction rematerialized = remat([fn = std::move(fn)](const std::vector<Tensor>& inputs) {
    return std::vector<Tensor>{fn(inputs[0])};
  });
  return [rematerialized = std::move(rematerialized)](const Tensor& input) { return rematerialized({input})[0]; };
}

RematFunction remat(RematFunction fn) {
  check(bool(fn), "remat: the function is empty");
  auto shared = std::make_shared<const RematFunction>(std::move(fn));
  return [shared](const std::vector<Tensor>& inputs) {
    if (!autograd::detail::any_tape_recording()) {
      std::vector<Tensor> outputs = (*shared)(inputs);
      check_outputs(outputs);
      return outputs;
    }
    // A first call that builds layers (creates the Variables it reads) draws their initial values; the
    // recomputation will not, so the pass whose random draws are replayed is run again after the build, from
    // the Variables' values before the first (its assignments undone).
    Replay replay;
    std::vector<Tensor> outputs;
    for (int pass = 0; pass < 2; ++pass) {
      replay = Replay{shared, inputs, {}, random::thread_generator(), std::make_shared<random::detail::SeedLog>(), {}, {}};
      const std::uint64_t first_new_id = next_tensor_id();
      AssignJournal pass_writes;
      {
        autograd::detail::ForwardWithoutTape forward(inputs);
        const random::detail::UseSeedLog use_seeds(*replay.seeds);
        outputs = (*shared)(inputs);
        replay.trainables = forward.trainable_reads();
      }
      const bool built = std::any_of(replay.trainables.begin(), replay.trainables.end(),
                                     [&](const Tensor& t) { return t.id() >= first_new_id; });
      if (!built) break;
      pass_writes.restore();
      check(pass == 0, "remat: the function created new Variables on its second call too ({} read); a function "
            "to rematerialize must read the same Variables each time (build its layers once, outside it or on "
            "its first call)", replay.trainables.size());
    }
    check_outputs(outputs);
    for (const Tensor& t : outputs) replay.outputs.push_back({t.shape(), t.dtype()});
    replay.computed = computed_outputs(outputs, inputs);
    std::vector<Tensor> node_inputs = inputs;
    node_inputs.insert(node_inputs.end(), replay.trainables.begin(), replay.trainables.end());
    std::vector<Tensor> node_outputs;
    for (const std::size_t i : replay.computed) node_outputs.push_back(outputs[i]);
    if (!node_outputs.empty() && autograd::needs_recording(node_inputs))
      autograd::record("remat", node_inputs, node_outputs,
                       [replay = std::move(replay)](const std::vector<Tensor>& g) { return backward(replay, g); });
    return outputs;
  };
}

}  // namespace loom

namespace loom {

namespace {
thread_local std::vector<const RematScope*> remat_scopes;  // innermost last
}  // namespace

RematScope::RematScope(RematMode mode) : mode_(std::move(mode)) {
  static const std::vector<std::string> modes{"full", "activations", "larger_than", "list_of_layers"};
  check(!mode_.mode || std::find(modes.begin(), modes.end(), *mode_.mode) != modes.end(),
        "RematScope: unknown mode '{}'; expected \"full\", \"activations\", \"larger_than\", \"list_of_layers\" or "
        "none (std::nullopt)", mode_.mode.value_or(""));
  check(mode_.output_size_threshold >= 0, "RematScope: output_size_threshold must be >= 0, got {}",
        mode_.output_size_threshold);
  remat_scopes.push_back(this);
}

RematScope::~RematScope() {
  // Scopes end in reverse order when they live on the stack; one held elsewhere leaves from where it is.
  const auto it = std::find(remat_scopes.rbegin(), remat_scopes.rend(), this);
  if (it != remat_scopes.rend()) remat_scopes.erase(std::next(it).base());
}

std::optional<RematMode> current_remat_mode() {
  if (remat_scopes.empty()) return std::nullopt;
  return remat_scopes.back()->mode();
}

}  // namespace loom
