// A pre-norm Transformer encoder block trained on random data with loom's tape, to see the loss fall:
//   x -> LayerNorm -> self-attention -> + x -> LayerNorm -> FFN (Dense -> relu -> Dense) -> + residual
// Written with loom ops and Variables directly; the Keras-style layers version of this example replaces it
// once the layers exist.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/loom.hpp"

using namespace loom;

namespace {

constexpr std::int64_t kBatch = 8, kSeq = 16, kModel = 32, kHeads = 4, kFF = 64;
constexpr int kSteps = 60;
constexpr double kLearningRate = 0.05;

Variable weight(const std::string& name, const Shape& shape, std::uint64_t seed) {
  // Glorot-style scale keeps the activations of the untrained block near unit variance.
  const double scale = std::sqrt(2.0 / double(shape.front() + shape.back()));
  return Variable(Tensor::randn(shape, DType::f32, seed) * scale, name);
}

Tensor layer_norm(const Tensor& x, double epsilon = 1e-3) {
  Tensor centered = x - ops::mean(x, {-1}, /*keepdims=*/true);
  return centered * ops::rsqrt(ops::var(x, {-1}, /*keepdims=*/true) + epsilon);
}

/// [batch, seq, model] -> [batch, heads, seq, model / heads]
Tensor split_heads(const Tensor& x) { return x.reshape({kBatch, kSeq, kHeads, kModel / kHeads}).permute({0, 2, 1, 3}); }
Tensor merge_heads(const Tensor& x) { return x.permute({0, 2, 1, 3}).reshape({kBatch, kSeq, kModel}); }

struct EncoderBlock {
  Variable wq = weight("wq", {kModel, kModel}, 1), wk = weight("wk", {kModel, kModel}, 2),
           wv = weight("wv", {kModel, kModel}, 3), wo = weight("wo", {kModel, kModel}, 4),
           w1 = weight("w1", {kModel, kFF}, 5), w2 = weight("w2", {kFF, kModel}, 6);

  std::vector<Variable> weights() const { return {wq, wk, wv, wo, w1, w2}; }

  Tensor operator()(const Tensor& x) const {
    Tensor h = layer_norm(x);
    Tensor attended = ops::scaled_dot_product_attention(split_heads(ops::matmul(h, wq)),
                                                        split_heads(ops::matmul(h, wk)),
                                                        split_heads(ops::matmul(h, wv)));
    Tensor x1 = x + ops::matmul(merge_heads(attended), wo);
    Tensor ff = ops::matmul(ops::relu(ops::matmul(layer_norm(x1), w1)), w2);
    return x1 + ff;
  }
};

}  // namespace

int main() {
  const BlasInfo blas = blas_info();
  std::printf("loom encoder block: batch %lld, seq %lld, d_model %lld, %lld heads, OpenBLAS core %s\n",
              (long long)kBatch, (long long)kSeq, (long long)kModel, (long long)kHeads, blas.core.c_str());

  const Tensor x = Tensor::randn({kBatch, kSeq, kModel}, DType::f32, 100);
  const Tensor target = Tensor::randn({kBatch, kSeq, kModel}, DType::f32, 101);
  EncoderBlock block;

  double first = 0, last = 0;
  for (int step = 0; step < kSteps; ++step) {
    GradientTape tape;
    const Tensor loss = ops::mean(ops::square(block(x) - target));
    const auto grads = tape.gradient(loss, block.weights());
    auto weights = block.weights();
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i].assign_sub(grads[i] * kLearningRate);
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 10 == 0 || step == kSteps - 1) std::printf("step %3d  loss %.4f\n", step, last);
  }
  std::printf("loss fell from %.4f to %.4f\n", first, last);
  return last < first ? 0 : 1;
}
