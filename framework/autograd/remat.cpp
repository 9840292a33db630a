#include "framework/autograd/remat.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "framework/autograd/detail/forward_without_tape.hpp"
#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"
#include "framework/tensor/random.hpp"

namespace loom {

namespace {

struct OutputMeta {
  Shape shape;
  DType dtype;
};

/// Every output defined and none of them an input (a node cannot make what it was given).
void check_outputs(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  check(!outputs.empty(), "remat: the function returned no tensor");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    check(outputs[i].defined(), "remat: the function's output {} is undefined", i);
    for (std::size_t j = 0; j < inputs.size(); ++j)
      check(!inputs[j].defined() || outputs[i].id() != inputs[j].id(),
            "remat: the function's output {} is its input {} itself (shape {}); remat needs outputs the function "
            "computes", i, j, outputs[i].shape());
  }
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
};

/// The backward rule: the function again under a tape of its own, then d(sum_i <output_i, grad_i>) / d(input).
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
    GradientTape tape;
    for (const Tensor& t : replay.inputs)
      if (t.defined() && is_floating(t.dtype())) tape.watch(t);
    const std::vector<Tensor> again = (*replay.fn)(replay.inputs);
    check_same(again, replay.outputs);
    Tensor target;
    for (std::size_t i = 0; i < again.size(); ++i) {
      if (!is_floating(again[i].dtype()) || !output_grads[i].defined()) continue;
      Tensor term = ops::sum(again[i] * output_grads[i]);
      if (target.defined() && term.dtype() != target.dtype()) term = ops::cast(term, target.dtype());
      target = target.defined() ? target + term : term;
    }
    for (const auto* group : {&replay.inputs, &replay.trainables})
      for (const Tensor& t : *group) {
        const bool differentiable = t.defined() && is_floating(t.dtype());
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

RematFunction remat(RematFunction fn) {
  check(bool(fn), "remat: the function is empty");
  auto shared = std::make_shared<const RematFunction>(std::move(fn));
  return [shared](const std::vector<Tensor>& inputs) {
    if (!autograd::detail::any_tape_recording()) {
      std::vector<Tensor> outputs = (*shared)(inputs);
      check_outputs(outputs, inputs);
      return outputs;
    }
    // A first call that builds layers (creates the Variables it reads) draws their initial values; the
    // recomputation will not, so the pass whose random draws are replayed is run again after the build.
    Replay replay;
    std::vector<Tensor> outputs;
    for (int pass = 0; pass < 2; ++pass) {
      replay = Replay{shared, inputs, {}, random::thread_generator(), std::make_shared<random::detail::SeedLog>(), {}};
      const std::uint64_t first_new_id = next_tensor_id();
      {
        autograd::detail::ForwardWithoutTape forward(inputs);
        const random::detail::UseSeedLog use_seeds(*replay.seeds);
        outputs = (*shared)(inputs);
        replay.trainables = forward.trainable_reads();
      }
      const bool built = std::any_of(replay.trainables.begin(), replay.trainables.end(),
                                     [&](const Tensor& t) { return t.id() >= first_new_id; });
      if (!built) break;
      check(pass == 0, "remat: the function created new Variables on its second call too ({} read); a function "
            "to rematerialize must read the same Variables each time (build its layers once, outside it or on "
            "its first call)", replay.trainables.size());
    }
    check_outputs(outputs, inputs);
    for (const Tensor& t : outputs) replay.outputs.push_back({t.shape(), t.dtype()});
    std::vector<Tensor> node_inputs = inputs;
    node_inputs.insert(node_inputs.end(), replay.trainables.begin(), replay.trainables.end());
    if (autograd::needs_recording(node_inputs))
      autograd::record("remat", node_inputs, outputs,
                       [replay = std::move(replay)](const std::vector<Tensor>& g) { return backward(replay, g); });
    return outputs;
  };
}

}  // namespace loom
