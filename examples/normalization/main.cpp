// Which normalization for which network, measured.
//
//   ./build/examples/normalization [--quick] [--out FILE.png]
//
// 1. The same small CNN with BatchNormalization, GroupNormalization, LayerNormalization or no normalization,
//    trained at batch sizes 2 .. 64 on 16x16 pictures of striped disks whose exposure varies (images.hpp).
// 2. A small pre-norm Transformer with BatchNormalization or LayerNormalization in its blocks, trained to find
//    the symbol after a marker (sequences.hpp): once with every batch 33 tokens long, once with each batch at
//    its own length from 2 to 64.
// Every configuration is trained once per seed (the seed draws the initial weights, the shuffles and the
// sequences; seed s gives every normalization and batch size the same ones), with Adam, on the same number of
// samples; test accuracy is measured in inference mode, where BatchNormalization uses its moving statistics.
// The program prints one line per run, then the table of mean accuracies, and draws them to FILE.png
// (default normalization.png). --quick: 3 batch sizes, one seed, fewer samples: a smoke test of half a minute.
// docs/normalization.md explains what each layer averages over and discusses the numbers.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "loom.hpp"
#include "chart.hpp"
#include "images.hpp"
#include "sequences.hpp"

using namespace loom;
namespace L = loom::layers;
using namespace normalization_study;

namespace {

enum class Norm { batch, group, layer, none };

std::string name(Norm norm) {
  switch (norm) {
    case Norm::batch: return "BatchNormalization";
    case Norm::group: return "GroupNormalization";
    case Norm::layer: return "LayerNormalization";
    case Norm::none: break;
  }
  return "none";
}

// The same colour for a normalization in both panels of the picture (matplotlib's tab10).
Rgb color(Norm norm) {
  switch (norm) {
    case Norm::batch: return {31, 119, 180};
    case Norm::group: return {44, 160, 44};
    case Norm::layer: return {255, 127, 14};
    case Norm::none: break;
  }
  return {127, 127, 127};
}

// What the program runs: the full study or the smoke test.
struct Settings {
  std::vector<std::int64_t> batch_sizes;
  int cnn_epochs;                        // over 2048 training images, at every batch size
  std::vector<std::uint64_t> cnn_seeds;
  std::int64_t sequence_samples;         // sequences the Transformer trains on
  std::vector<std::uint64_t> sequence_seeds;
  std::int64_t sequence_batch = 16;      // sequences per Transformer batch
};

const Settings kFull{{2, 4, 8, 16, 32, 64}, 8, {1, 2}, 40000, {1, 2, 3}};
const Settings kQuick{{2, 8, 32}, 2, {1}, 8000, {1}};
constexpr std::int64_t kFixedLength = (kMinLength + kMaxLength) / 2;  // the control: the same mean length

// The result of one training run.
struct Run {
  double first_loss = 0, last_loss = 0;  // training loss at the start and at the end
  double accuracy = 0;                   // on the test set, in inference mode
  std::vector<double> by_length;         // Transformer with varying lengths: the accuracy at each length
};

// ---- 1. the CNN ----

// The normalization after a convolution, on x [batch, height, width, channels].
Tensor normalize(const Tensor& x, Norm norm) {
  if (norm == Norm::batch) return L::BatchNormalization()(x);                    // per channel
  if (norm == Norm::group) return L::GroupNormalization({.groups = 4})(x);       // per sample and 4 channel groups
  if (norm == Norm::layer) return L::LayerNormalization({.axis = {1, 2, 3}})(x);  // per sample
  return x;
}

// Conv 3x3 -> norm -> ReLU -> max pool -> conv 3x3 -> norm -> ReLU -> global average -> softmax.
Model make_cnn(Norm norm) {
  Tensor images = L::Input({kImageSide, kImageSide, 1});
  Tensor h = ops::relu(normalize(L::Conv2D(32, {3, 3}, {.padding = "same"})(images), norm));
  h = L::MaxPooling2D({.pool_size = {2, 2}})(h);
  h = ops::relu(normalize(L::Conv2D(64, {3, 3}, {.padding = "same"})(h), norm));
  Tensor probabilities = L::Dense(kImageClasses, {.activation = "softmax"})(L::GlobalAveragePooling2D()(h));
  return Model(images, probabilities);
}

struct ImageData {
  Tensor x, y, x_test, y_test;
};

Run train_cnn(Norm norm, std::int64_t batch_size, int epochs, std::uint64_t seed, const ImageData& data) {
  random::set_seed(seed);  // the initial weights and the shuffles
  Model model = make_cnn(norm);
  model.compile({.optimizer = optim::Adam({.learning_rate = 3e-3}),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});
  const History history = model.fit(data.x, data.y, {.batch_size = batch_size, .epochs = epochs, .verbose = 0});
  const std::vector<double>& loss = history.history.at("loss");
  const L::Logs test = model.evaluate(data.x_test, data.y_test, {.batch_size = 256, .verbose = 0});
  return {loss.front(), loss.back(), test.at("accuracy"), {}};
}

// ---- 2. the Transformer ----

// A pre-norm encoder block, as in examples/encoder: h = x + attention(norm(x)), then h + feed_forward(norm(h)).
// NormLayer is L::BatchNormalization (statistics per feature over the batch and the positions) or
// L::LayerNormalization (over the features of each position).
template <class NormLayer>
class EncoderBlock : public L::Layer {
 public:
  explicit EncoderBlock(std::int64_t width)
      : Layer("encoder_block"),
        norm1_(add_layer(NormLayer())),
        attention_(add_layer(L::MultiHeadAttention({.num_heads = 2, .key_dim = width / 2}))),
        norm2_(add_layer(NormLayer())),
        hidden_(add_layer(L::Dense(2 * width, {.activation = "relu"}))),
        output_(add_layer(L::Dense(width))) {}

 protected:
  Tensor call(const Tensor& x, bool training) override {
    const Tensor n = norm1_(x, training);
    const Tensor h = x + attention_(n, n, {.training = training});
    return h + output_(hidden_(norm2_(h, training), training), training);
  }

 private:
  NormLayer& norm1_;
  L::MultiHeadAttention& attention_;
  NormLayer& norm2_;
  L::Dense& hidden_;
  L::Dense& output_;
};

// Token and position embeddings, two encoder blocks, a final norm, the mean over positions, softmax.
template <class NormLayer>
class SequenceClassifier : public Model {
 public:
  explicit SequenceClassifier(std::int64_t width = 32)
      : Model("sequence_classifier"),
        tokens_(add_layer(L::Embedding(kVocabulary, width))),
        positions_(add_layer(L::Embedding(kMaxLength, width))),
        block1_(add_layer(EncoderBlock<NormLayer>(width))),
        block2_(add_layer(EncoderBlock<NormLayer>(width))),
        final_norm_(add_layer(NormLayer())),
        head_(add_layer(L::Dense(kSymbols, {.activation = "softmax"}))) {}

 protected:
  Tensor call(const Tensor& x, bool training) override {
    Tensor h = tokens_(x, training) + positions_(Tensor::arange(x.size(1)), training);
    h = final_norm_(block2_(block1_(h, training), training), training);
    return head_(ops::mean(h, {1}), training);
  }

 private:
  L::Embedding& tokens_;
  L::Embedding& positions_;
  EncoderBlock<NormLayer>& block1_;
  EncoderBlock<NormLayer>& block2_;
  NormLayer& final_norm_;
  L::Dense& head_;
};

// Trains on fresh batches, each of one length (kFixedLength, or drawn from kMinLength .. kMaxLength when
// `varying`), the same batches for either norm; tests at every length it trained on, 64 sequences each.
template <class NormLayer>
Run train_transformer(bool varying, std::uint64_t seed, const Settings& settings) {
  random::set_seed(seed);  // the initial weights
  SequenceClassifier<NormLayer> model;
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-3}),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});
  random::Generator rng(100 + seed);  // the training sequences
  auto draw_length = [&] {
    return varying ? kMinLength + std::int64_t(rng.next() % std::uint64_t(kMaxLength - kMinLength + 1)) : kFixedLength;
  };
  // The training loss is reported as the mean over the first and over the last tenth of the steps.
  const std::int64_t steps = settings.sequence_samples / settings.sequence_batch, tenth = steps / 10;
  Run run;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto [x, y] = marker_sequences(settings.sequence_batch, draw_length(), rng);
    const double loss = model.train_on_batch(x, y).at("loss");
    if (step < tenth) run.first_loss += loss / double(tenth);
    if (step >= steps - tenth) run.last_loss += loss / double(tenth);
  }
  random::Generator test_rng(0);  // the same test sequences for every run
  const std::int64_t lo = varying ? kMinLength : kFixedLength, hi = varying ? kMaxLength : kFixedLength;
  for (std::int64_t length = lo; length <= hi; ++length) {
    const auto [x, y] = marker_sequences(64, length, test_rng);
    run.by_length.push_back(model.evaluate(x, y, {.batch_size = 64, .verbose = 0}).at("accuracy"));
    run.accuracy += run.by_length.back() / double(hi - lo + 1);
  }
  return run;
}

// "lengths 2-22: 99%, 23-43: 95%, 44-64: 80%": the accuracy of a varying-length run over thirds of the lengths.
std::string by_length_thirds(const Run& run) {
  std::string text;
  const std::size_t third = run.by_length.size() / 3;
  for (std::size_t part = 0; part < 3; ++part) {
    const std::size_t begin = part * third, end = part == 2 ? run.by_length.size() : begin + third;
    double sum = 0;
    for (std::size_t i = begin; i < end; ++i) sum += run.by_length[i];
    text += fmt::format("{}{}-{}: {:.0f}%", part == 0 ? "lengths " : ", ", kMinLength + std::int64_t(begin),
                        kMinLength + std::int64_t(end) - 1, 100 * sum / double(end - begin));
  }
  return text;
}

// ---- the program ----

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Fails now, not after minutes of training, if the picture cannot be written there: writes and removes a
// one-pixel PNG in the same folder, the way the picture itself will be written.
void check_writable(const std::string& path) {
  std::error_code ignored;
  check(!path.empty() && !std::filesystem::is_directory(path, ignored), "normalization: --out '{}' must name a file",
        path);
  const std::string probe = path + ".check.png";
  io::save_png(probe, {255, 255, 255}, 1, 1);
  std::filesystem::remove(probe, ignored);
}

}  // namespace

int main(int argc, char** argv) try {
  Settings settings = kFull;
  std::string out = "normalization.png";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") settings = kQuick;
    else if (arg == "--out" && i + 1 < argc) out = argv[++i];
    else
      throw Error(fmt::format("normalization: unknown option '{}'; usage: normalization [--quick] [--out FILE]", arg));
  }
  check_writable(out);
  const auto start = std::chrono::steady_clock::now();

  // 1. The CNN: every normalization at every batch size, the same epochs over the same 2048 images.
  ImageData images;
  std::tie(images.x, images.y) = striped_disks(2048, /*seed=*/1);
  std::tie(images.x_test, images.y_test) = striped_disks(1024, /*seed=*/2);
  const std::vector<Norm> cnn_norms = {Norm::batch, Norm::group, Norm::layer, Norm::none};
  const std::size_t runs = cnn_norms.size() * settings.batch_sizes.size() * settings.cnn_seeds.size() +
                           4 * settings.sequence_seeds.size();
  std::size_t done = 0, loss_fell = 0;
  auto report = [&](const std::string& what, const Run& run, double seconds, const std::string& extra) {
    loss_fell += run.last_loss < run.first_loss;
    fmt::print("[{:2}/{}] {}: loss {:.3f} -> {:.3f}, test accuracy {:.1f}%{} ({:.1f} s)\n", ++done, runs, what,
               run.first_loss, run.last_loss, 100 * run.accuracy, extra, seconds);
    std::fflush(stdout);
  };
  std::vector<std::vector<std::vector<double>>> cnn_accuracy;  // [norm][batch size][seed]
  for (Norm norm : cnn_norms) {
    cnn_accuracy.emplace_back();
    for (std::int64_t batch : settings.batch_sizes) {
      cnn_accuracy.back().emplace_back();
      for (std::uint64_t seed : settings.cnn_seeds) {
        const auto t0 = std::chrono::steady_clock::now();
        const Run run = train_cnn(norm, batch, settings.cnn_epochs, seed, images);
        report(fmt::format("CNN, {}, batch {}, seed {}", name(norm), batch, seed), run, seconds_since(t0), "");
        cnn_accuracy.back().back().push_back(run.accuracy);
      }
    }
  }

  // 2. The Transformer: BatchNormalization and LayerNormalization, with fixed and with varying lengths.
  const std::string fixed = fmt::format("length {}", kFixedLength);
  const std::string varying_lengths = fmt::format("lengths {}-{}", kMinLength, kMaxLength);
  // [batch, layer][fixed, varying][seed]
  std::vector<std::vector<std::vector<double>>> sequence_accuracy(2, std::vector<std::vector<double>>(2));
  for (bool varying : {false, true})
    for (Norm norm : {Norm::batch, Norm::layer})
      for (std::uint64_t seed : settings.sequence_seeds) {
        const auto t0 = std::chrono::steady_clock::now();
        const Run run = norm == Norm::batch ? train_transformer<L::BatchNormalization>(varying, seed, settings)
                                            : train_transformer<L::LayerNormalization>(varying, seed, settings);
        report(fmt::format("Transformer, {}, {}, seed {}", name(norm), varying ? varying_lengths : fixed, seed), run,
               seconds_since(t0), varying ? " (" + by_length_thirds(run) + ")" : "");
        sequence_accuracy[norm == Norm::batch ? 0 : 1][varying ? 1 : 0].push_back(run.accuracy);
      }

  // The tables: the mean over the seeds, and for the Transformer each seed's result too.
  auto seeds_text = [](const std::vector<double>& seeds) {
    std::string text;
    for (double a : seeds) text += fmt::format("{}{:.1f}", text.empty() ? "" : " ", 100 * a);
    return text;
  };
  fmt::print("\nCNN on striped disks: test accuracy (%), mean of {} seed(s), {} epochs of 2048 images\n",
             settings.cnn_seeds.size(), settings.cnn_epochs);
  fmt::print("{:<20}", "batch size");
  for (std::int64_t batch : settings.batch_sizes) fmt::print("{:>7}", batch);
  fmt::print("\n");
  for (std::size_t n = 0; n < cnn_norms.size(); ++n) {
    fmt::print("{:<20}", name(cnn_norms[n]));
    for (const std::vector<double>& seeds : cnn_accuracy[n]) fmt::print("{:>7.1f}", 100 * mean(seeds));
    fmt::print("\n");
  }
  fmt::print("\nTransformer: test accuracy (%), mean of {} seed(s) (each seed's), batches of {}, {} sequences\n",
             settings.sequence_seeds.size(), settings.sequence_batch, settings.sequence_samples);
  fmt::print("{:<20}{:>30}{:>30}\n", "", fixed, varying_lengths);
  for (std::size_t n = 0; n < 2; ++n) {
    fmt::print("{:<20}", name(n == 0 ? Norm::batch : Norm::layer));
    for (const std::vector<double>& seeds : sequence_accuracy[n])
      fmt::print("{:>30}", fmt::format("{:.1f} ({})", 100 * mean(seeds), seeds_text(seeds)));
    fmt::print("\n");
  }
  fmt::print("\nthe training loss fell in {} of {} runs; {:.0f} s in all\n", loss_fell, runs, seconds_since(start));

  // The picture.
  LinePanel line_panel{"CNN: test accuracy against batch size", settings.batch_sizes, {}};
  for (std::size_t n = 0; n < cnn_norms.size(); ++n)
    line_panel.lines.push_back({name(cnn_norms[n]), color(cnn_norms[n]), cnn_accuracy[n]});
  BarPanel bar_panel{fmt::format("Transformer, batch {}", settings.sequence_batch), {fixed, varying_lengths}, {}};
  for (std::size_t n = 0; n < 2; ++n) {
    const Norm norm = n == 0 ? Norm::batch : Norm::layer;
    bar_panel.bars.push_back({name(norm), color(norm), sequence_accuracy[n]});
  }
  save_chart(out, line_panel, bar_panel);
  fmt::print("{}\n", out);
  return 0;
} catch (const Error& e) {
  fmt::print(stderr, "{}\n", e.what());
  return 2;
}
