// A Transformer encoder written with loom's Keras-style API, trained with fit():
//
//   x -> LayerNorm -> MultiHeadAttention -> + x -> LayerNorm -> Dense(ff_dim, relu) -> Dense(d_model) -> + residual
//
// Tasks:
//   --task random    (default) the sanity fit: random inputs, random targets, mean squared error; the loss falls
//   --task reverse   token sequences to reverse: only attention can move a token to the mirrored position
//   --task ablation  a deep stack (6 blocks, lr 3e-3) trained on reverse with and without LayerNorm, side by side
//
// Options: --layers N --d-model N --heads N --ff-dim N --seq-len N --batch N --epochs N --lr X --seed N
//          --no-layernorm (delete the LayerNorms) --post-norm (normalize after each residual add instead)
//          --flash / --no-flash (the attention kernel; default: chosen by size) --save FILE.safetensors
//          --remat (each block keeps only its input for the backward pass and is recomputed there: loom::remat)
//          --mixed-bfloat16 (Keras's mixed_bfloat16 policy: float32 weights, the matmuls on bf16 operands)
//          --pictures DIR (where the PNGs go: the last block's attention per head, the ablation's loss curves)
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

struct Config {
  std::string task = "random";
  int layers = 2;
  std::int64_t d_model = 64, heads = 4, ff_dim = 128, seq_len = 16, batch = 32;
  int epochs = 0;  // 0: the task's default
  double learning_rate = 1e-3;
  std::uint64_t seed = 1;
  bool layernorm = true, post_norm = false;
  std::optional<bool> flash;
  bool remat = false;
  bool mixed_bfloat16 = false;
  std::string save;
  std::string pictures = ".";  // where the PNGs go
  bool layers_given = false, learning_rate_given = false;  // the ablation has its own defaults
};

// One encoder block as a subclassed layer: its children are registered in order, so its weights are named
// "encoder_block/multi_head_attention/query/kernel", ...
class EncoderBlock : public L::Layer {
 public:
  explicit EncoderBlock(const Config& c)
      : Layer("encoder_block"),
        layernorm_(c.layernorm),
        post_norm_(c.post_norm),
        attention_(add_layer(L::MultiHeadAttention({.num_heads = c.heads,
                                                    .key_dim = c.d_model / c.heads,
                                                    .flash_attention = c.flash}))),
        norm1_(add_layer(L::LayerNormalization())),
        norm2_(add_layer(L::LayerNormalization())),
        hidden_(add_layer(L::Dense(c.ff_dim, {.activation = "relu"}))),
        output_(add_layer(L::Dense(c.d_model))) {}

  /// The attention probabilities [batch, heads, seq, seq] this block computes for its input x.
  Tensor attention_scores(const Tensor& x) {
    const Tensor n = post_norm_ ? x : norm(norm1_, x, false);
    return attention_.call_with_scores(n, n, {}).scores;
  }

 protected:
  Tensor call(const Tensor& x, bool training) override {
    if (post_norm_) {  // the original Transformer: normalize after each residual add
      Tensor h = norm(norm1_, x + attention_(x, x, {.training = training}), training);
      return norm(norm2_, h + output_(hidden_(h, training), training), training);
    }
    Tensor n = norm(norm1_, x, training);  // pre-norm: normalize the input of each sub-block
    Tensor h = x + attention_(n, n, {.training = training});
    return h + output_(hidden_(norm(norm2_, h, training), training), training);
  }

 private:
  // --no-layernorm deletes the normalization: the block passes its input through unchanged.
  Tensor norm(L::LayerNormalization& layer, const Tensor& x, bool training) {
    return layernorm_ ? layer(x, training) : x;
  }

  bool layernorm_, post_norm_;
  L::MultiHeadAttention& attention_;
  L::LayerNormalization& norm1_;
  L::LayerNormalization& norm2_;
  L::Dense& hidden_;
  L::Dense& output_;
};

// The whole model: optional token and position embeddings, N blocks, a final projection.
class Encoder : public L::Model {
 public:
  Encoder(const Config& c, std::optional<std::int64_t> vocabulary, std::int64_t outputs)
      : Model("encoder"), layernorm_(c.layernorm && !c.post_norm), remat_(c.remat) {
    if (vocabulary) {
      tokens_ = &add_layer(L::Embedding(*vocabulary, c.d_model));
      positions_ = &add_layer(L::Embedding(c.seq_len, c.d_model));
    }
    for (int i = 0; i < c.layers; ++i) blocks_.push_back(&add_layer(EncoderBlock(c)));
    final_norm_ = &add_layer(L::LayerNormalization());
    head_ = &add_layer(L::Dense(outputs));
  }

  /// The last block's attention probabilities [batch, heads, seq, seq] for inputs x, in inference mode.
  Tensor last_block_scores(const Tensor& x) {
    NoGradGuard no_grad;
    Tensor h = embed(x, false);
    for (std::size_t i = 0; i + 1 < blocks_.size(); ++i) h = (*blocks_[i])(h, false);
    return blocks_.back()->attention_scores(h);
  }

 protected:
  Tensor call(const Tensor& x, bool training) override {
    Tensor h = embed(x, training);
    for (EncoderBlock* block : blocks_) {
      if (!remat_) {
        h = (*block)(h, training);
        continue;
      }
      // --remat: the tape keeps the block's input only; its backward pass runs the block again.
      const auto run_block = [block, training](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{(*block)(in[0], training)};
      };
      h = remat(run_block)({h})[0];
    }
    if (layernorm_) h = (*final_norm_)(h, training);  // pre-norm stacks end with one more normalization
    return (*head_)(h, training);
  }

 private:
  Tensor embed(const Tensor& x, bool training) {
    if (tokens_ == nullptr) return x;
    // Token ids [B, T] -> vectors, plus a learned vector per position.
    const Tensor positions = Tensor::arange(0.0, double(x.size(1)), 1.0, DType::i64);
    return (*tokens_)(x, training) + (*positions_)(positions, training);
  }

  bool layernorm_;
  bool remat_;
  L::Embedding* tokens_ = nullptr;
  L::Embedding* positions_ = nullptr;
  std::vector<EncoderBlock*> blocks_;
  L::LayerNormalization* final_norm_ = nullptr;
  L::Dense* head_ = nullptr;
};

// Token sequences of 1 .. vocabulary-1 and the same sequences reversed.
std::pair<Tensor, Tensor> reversal_data(std::int64_t n, std::int64_t t, std::int64_t vocabulary, std::uint64_t seed) {
  random::Generator rng(seed);
  std::vector<std::int64_t> x(std::size_t(n * t)), y(std::size_t(n * t));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < t; ++j) x[std::size_t(i * t + j)] = 1 + std::int64_t(rng.next() % std::uint64_t(vocabulary - 1));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < t; ++j) y[std::size_t(i * t + j)] = x[std::size_t(i * t + (t - 1 - j))];
  return {Tensor::from_vector(x, {n, t}), Tensor::from_vector(y, {n, t})};
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      check(i + 1 < argc, "encoder: {} needs a value", arg);
      return argv[++i];
    };
    if (arg == "--task") c.task = value();
    else if (arg == "--layers") c.layers = std::stoi(value()), c.layers_given = true;
    else if (arg == "--d-model") c.d_model = std::stoll(value());
    else if (arg == "--heads") c.heads = std::stoll(value());
    else if (arg == "--ff-dim") c.ff_dim = std::stoll(value());
    else if (arg == "--seq-len") c.seq_len = std::stoll(value());
    else if (arg == "--batch") c.batch = std::stoll(value());
    else if (arg == "--epochs") c.epochs = std::stoi(value());
    else if (arg == "--lr") c.learning_rate = std::stod(value()), c.learning_rate_given = true;
    else if (arg == "--seed") c.seed = std::stoull(value());
    else if (arg == "--no-layernorm") c.layernorm = false;
    else if (arg == "--post-norm") c.post_norm = true;
    else if (arg == "--flash") c.flash = true;
    else if (arg == "--no-flash") c.flash = false;
    else if (arg == "--remat") c.remat = true;
    else if (arg == "--mixed-bfloat16") c.mixed_bfloat16 = true;
    else if (arg == "--save") c.save = value();
    else if (arg == "--pictures") c.pictures = value();
    else throw Error(fmt::format("encoder: unknown option '{}' (see the top of examples/encoder/main.cpp)", arg));
  }
  check(c.task == "random" || c.task == "reverse" || c.task == "ablation",
        "encoder: --task must be random, reverse or ablation, got '{}'", c.task);
  check(c.heads > 0 && c.d_model % c.heads == 0, "encoder: --d-model {} must be a multiple of --heads {}", c.d_model,
        c.heads);
  return c;
}

// The data of a task: training and test pairs, and the vocabulary when the inputs are token ids.
struct Data {
  Tensor x, y, x_test, y_test;
  std::optional<std::int64_t> vocabulary;
};

Data make_data(const Config& c) {
  Data data;
  if (c.task == "random") {  // the sanity fit: nothing to learn but the samples themselves
    data.x = Tensor::randn({512, c.seq_len, c.d_model}, DType::f32, c.seed + 100);
    data.y = Tensor::randn({512, c.seq_len, c.d_model}, DType::f32, c.seed + 101);
    return data;
  }
  data.vocabulary = 16;
  std::tie(data.x, data.y) = reversal_data(8192, c.seq_len, *data.vocabulary, c.seed + 100);
  std::tie(data.x_test, data.y_test) = reversal_data(1024, c.seq_len, *data.vocabulary, c.seed + 200);
  return data;
}

struct Result {
  History history;
  std::vector<double> batch_losses;     // the loss of each training batch
  std::optional<double> test_accuracy;  // the reversal task's token accuracy on unseen sequences
};

// One heatmap per head of the last block's attention on the first test (or training) sequence.
void save_attention_pictures(Encoder& model, const Config& c, const Data& data) {
  const Tensor& inputs = data.vocabulary ? data.x_test : data.x;
  const Tensor first = inputs.slice(0, 0, 1);
  const Tensor scores = model.last_block_scores(first);  // [1, heads, seq, seq]
  std::vector<std::string> labels;
  for (std::int64_t t = 0; t < c.seq_len; ++t)
    labels.push_back(data.vocabulary ? std::to_string(first.slice(1, t, t + 1).item<std::int64_t>()) : std::to_string(t));
  for (std::int64_t h = 0; h < c.heads; ++h) {
    const std::string path = fmt::format("{}/encoder_attention_head_{}.png", c.pictures, h);
    io::save_heatmap_png(path, scores.slice(1, h, h + 1).reshape({c.seq_len, c.seq_len}),
                         {.cell = 20, .vmin = 0.0, .vmax = 1.0, .row_labels = labels, .col_labels = labels,
                          .title = fmt::format("last block, head {}", h)});
    fmt::print("{}\n", path);
  }
}

// Builds the model for this configuration, trains it and evaluates it.
Result train(const Config& c, const Data& data, bool print_summary) {
  random::set_seed(c.seed);  // the same initial weights and batches for every configuration
  mixed_precision::set_global_policy(c.mixed_bfloat16 ? "mixed_bfloat16" : "float32");  // the layers made below
  Encoder model(c, data.vocabulary, data.vocabulary ? *data.vocabulary : c.d_model);
  if (!data.vocabulary) {
    model.compile({.optimizer = optim::Adam({.learning_rate = c.learning_rate}), .loss = "mse"});
  } else {
    model.compile({.optimizer = optim::Adam({.learning_rate = c.learning_rate}),
                   .loss = [](const Tensor& ids, const Tensor& logits) {
                     return losses::sparse_categorical_crossentropy(ids, logits, {.from_logits = true});
                   },
                   .metrics = {"accuracy"}});
  }
  // fit logs the running mean over the epoch's batches; with equal batches, batch b's own loss is
  // (b + 1) * mean_b - b * mean_(b-1).
  std::vector<double> batch_losses;
  double previous_mean = 0;
  L::LambdaCallback record({.on_train_batch_end = [&](int batch, const L::Logs& logs) {
    const double mean = logs.at("loss");
    batch_losses.push_back(batch == 0 ? mean : (batch + 1) * mean - batch * previous_mean);
    previous_mean = mean;
  }});
  Result result{model.fit(data.x, data.y, {.batch_size = c.batch, .epochs = c.epochs, .callbacks = {record}}), {},
                std::nullopt};
  result.batch_losses = std::move(batch_losses);
  if (print_summary) {
    model.summary();
    save_attention_pictures(model, c, data);
  }
  if (data.vocabulary) result.test_accuracy = model.evaluate(data.x_test, data.y_test, {.verbose = 0}).at("accuracy");
  if (!c.save.empty()) {
    model.save_weights(c.save);
    fmt::print("weights written to {}\n", c.save);
  }
  return result;
}

std::string describe(const Config& c) {
  return fmt::format("{} block(s), d_model {}, {} heads, ff_dim {}, seq_len {}, {}, lr {}{}", c.layers, c.d_model,
                     c.heads, c.ff_dim, c.seq_len,
                     c.layernorm ? (c.post_norm ? "post-norm" : "pre-norm") : "no LayerNorm", c.learning_rate,
                     c.mixed_bfloat16 ? fmt::format(", mixed_bfloat16 (bf16 matmuls: {})", bf16_matmul_engine())
                                      : "");
}

// The same deep configuration trained twice, with and without its LayerNorms, on the reversal task.
int ablation(Config c) {
  c.task = "reverse";
  const Data data = make_data(c);
  Config without = c;
  without.layernorm = false;
  fmt::print("with LayerNorm: {}\n", describe(c));
  const Result with_norm = train(c, data, false);
  fmt::print("\nwithout LayerNorm: {}\n", describe(without));
  const Result without_norm = train(without, data, false);

  fmt::print("\n{:>5}  {:>22}  {:>22}\n", "epoch", "with LayerNorm", "without LayerNorm");
  fmt::print("{:>5}  {:>10} {:>11}  {:>10} {:>11}\n", "", "loss", "accuracy", "loss", "accuracy");
  const auto& a = with_norm.history.history, & b = without_norm.history.history;
  for (std::size_t e = 0; e < a.at("loss").size(); ++e)
    fmt::print("{:>5}  {:>10.4f} {:>10.2f}%  {:>10.4f} {:>10.2f}%\n", e + 1, a.at("loss")[e],
               100 * a.at("accuracy")[e], b.at("loss")[e], 100 * b.at("accuracy")[e]);
  // Loss curves, averaged over 16 batches so that the chart shows the trend rather than the batch noise.
  auto smoothed = [](const std::vector<double>& losses) {
    std::vector<double> out;
    for (std::size_t i = 0; i + 16 <= losses.size(); i += 16)
      out.push_back(std::accumulate(losses.begin() + long(i), losses.begin() + long(i + 16), 0.0) / 16.0);
    return out;
  };
  const std::string chart = c.pictures + "/ablation_loss.png";
  io::save_line_chart_png(chart, {{"with LayerNorm", smoothed(with_norm.batch_losses)},
                                  {"without LayerNorm", smoothed(without_norm.batch_losses)}},
                          {.title = fmt::format("{} blocks, lr {}: training loss", c.layers, c.learning_rate),
                           .x_label = "steps / 16", .log_y = true});
  fmt::print("\n{}\n", chart);
  const double acc_with = *with_norm.test_accuracy, acc_without = *without_norm.test_accuracy;
  fmt::print("\nverdict: on unseen sequences, {:.2f}% of tokens right with LayerNorm, {:.2f}% without: {}\n",
             100 * acc_with, 100 * acc_without,
             acc_with - acc_without > 0.05 ? "deleting LayerNorm breaks training of this deep stack"
             : acc_with - acc_without > 0.005 ? "deleting LayerNorm hurts a little here"
                                             : "no real difference at this depth and learning rate");
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  Config c = parse(argc, argv);
  if (c.task == "ablation") {
    // Deep enough, and a learning rate high enough, for the normalization to matter (unless given).
    if (!c.layers_given) c.layers = 6;
    if (!c.learning_rate_given) c.learning_rate = 3e-3;
    if (c.epochs == 0) c.epochs = 3;
    return ablation(c);
  }
  if (c.epochs == 0) c.epochs = c.task == "random" ? 10 : 3;
  fmt::print("loom encoder, task {}: {}; OpenBLAS core {}\n", c.task, describe(c), blas_info().core);
  const Result result = train(c, make_data(c), /*print_summary=*/true);
  const std::vector<double>& loss = result.history.history.at("loss");
  const bool fell = loss.size() < 2 || loss.back() < loss.front();
  fmt::print("loss: {:.4f} after the first epoch, {:.4f} after the last ({})\n", loss.front(), loss.back(),
             fell ? "it fell" : "it did not fall");
  if (result.test_accuracy)
    fmt::print("token accuracy on unseen sequences: {:.2f}%\n", 100.0 * *result.test_accuracy);
  return fell ? 0 : 1;
} catch (const Error& e) {
  fmt::print(stderr, "{}\n", e.what());
  return 2;
}
