// A model trained in Keras, trained on in C++, and back to Keras: the round trip a Keras user makes.
//
//   python examples/keras_interop/train_in_keras.py train /tmp/interop      # Keras trains and saves
//   ./build/examples/keras_interop /tmp/interop [--epochs N]                # loom loads, evaluates, fine-tunes
//   python examples/keras_interop/train_in_keras.py evaluate /tmp/interop   # Keras opens loom's archive
//
// The C++ side: load the .keras archive (its custom PositionEmbedding layer registered by name), check that
// loom predicts what Keras predicted, evaluate, continue training with fit (the archive's Adam, with its
// state), evaluate again, and save loom_finetuned.keras and loom's predictions for the Python side to check.
#include <charconv>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "examples/keras_interop/position_embedding.hpp"
#include "loom.hpp"

using namespace loom;
namespace fs = std::filesystem;

namespace {

struct Arguments {
  fs::path folder;
  int epochs = 4;
};

Arguments parse(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--epochs" && i + 1 < argc) {
      const std::string_view value = argv[++i];
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), args.epochs);
      if (error != std::errc() || end != value.data() + value.size() || args.epochs < 0 || args.epochs > 1000) {
        throw Error(fmt::format("--epochs: expected a number from 0 to 1000, got '{}'", value));
      }
    } else if (args.folder.empty() && arg.rfind("--", 0) != 0) {
      args.folder = arg;
    } else {
      throw Error(fmt::format("unexpected argument '{}'", arg));
    }
  }
  if (args.folder.empty()) throw Error("usage: keras_interop FOLDER [--epochs N] (FOLDER from train_in_keras.py)");
  return args;
}

/// Fails now, not after the training, when the results could not be written to `folder`.
void check_writable(const fs::path& folder) {
  const fs::path probe = folder / ".loom_write_check";
  if (!std::ofstream(probe)) throw Error(fmt::format("cannot write to {}", folder.string()));
  fs::remove(probe);
}

Tensor load(const fs::path& folder, const std::string& name) {
  const fs::path path = folder / (name + ".npy");
  if (!fs::exists(path)) {
    throw Error(fmt::format("{} is missing: run train_in_keras.py train {} first", path.string(), folder.string()));
  }
  return io::load_npy(path.string());
}

void run(const Arguments& args) {
  const fs::path keras_archive = args.folder / "text_classifier.keras";
  const Tensor x_train = load(args.folder, "x_train"), y_train = load(args.folder, "y_train");
  const Tensor x_test = load(args.folder, "x_test"), y_test = load(args.folder, "y_test");
  const Tensor keras_predictions = load(args.folder, "keras_predictions");
  check_writable(args.folder);

  models::register_layer_class(loom_example::position_embedding_name, loom_example::position_embedding_class());
  auto model = models::load_model(keras_archive.string());
  model->summary();

  const Tensor predictions = model->predict(x_test, {.verbose = 0});
  const double difference = ops::max(ops::abs(predictions - keras_predictions)).item<double>();
  fmt::print("largest difference from Keras's predictions: {:.2e}\n", difference);
  const layers::Logs before = model->evaluate(x_test, y_test, {.verbose = 0});
  fmt::print("loom, as Keras trained it, test set: loss {:.4f}, accuracy {:.4f}\n", before.at("loss"),
             before.at("accuracy"));

  random::set_seed(7);  // the shuffling and dropout of the fine-tuning: the same run every time
  model->fit(x_train, y_train, {.epochs = args.epochs, .verbose = 2, .validation_data = {{{x_test}, {y_test}}}});
  const layers::Logs after = model->evaluate(x_test, y_test, {.verbose = 0});
  fmt::print("loom, fine-tuned, test set: loss {:.4f}, accuracy {:.4f}\n", after.at("loss"), after.at("accuracy"));

  const fs::path finetuned = args.folder / "loom_finetuned.keras";
  model->save(finetuned.string());
  io::save_npy((args.folder / "loom_predictions.npy").string(), model->predict(x_test, {.verbose = 0}));
  fmt::print("wrote {}: open it with train_in_keras.py evaluate {}\n", finetuned.string(), args.folder.string());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "keras_interop: %s\n", e.what());
    return 1;
  }
}
