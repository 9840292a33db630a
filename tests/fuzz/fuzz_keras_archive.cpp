// libFuzzer target for models::load_model: any input is either a model or a loom::Error; a model that loads
// saves and loads back to the same architecture, compile settings and weight shapes (the weights' values once
// the archive's model.weights.h5 is read and written). The first byte chooses what the rest is: 0, a
// whole .keras archive (the zip reader's checks); otherwise a config.json, stored in a fresh archive beside the
// fixture's metadata, so that mutations reach the config readers instead of failing the zip's checksums.
// Anything else (a sanitizer report, another exception, a broken invariant) is a crash.
#include <zip.h>

#include <cstdint>
#include <string>

#include "framework/tensor/error.hpp"
#include "models/models.hpp"
#include "tests/fuzz/fuzz_helpers.hpp"

namespace {

/// A stored zip holding metadata.json and `config` as config.json.
std::string archive_with_config(const std::string& config) {
  const std::string path = loom::fuzzing::work_dir().file("config_input.keras");
  std::remove(path.c_str());
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_EXCL, &code);
  loom::fuzzing::require(z != nullptr, "a fresh zip opens");
  const std::string metadata = R"({"keras_version": "3.15.1", "date_saved": "2026-01-01@00:00:00"})";
  for (const auto& [name, data] : {std::pair<const char*, const std::string*>{"metadata.json", &metadata},
                                   std::pair<const char*, const std::string*>{"config.json", &config}}) {
    zip_source_t* source = zip_source_buffer(z, data->data(), data->size(), 0);
    loom::fuzzing::require(source != nullptr && zip_file_add(z, name, source, 0) >= 0, "a member adds");
  }
  loom::fuzzing::require(zip_close(z) == 0, "the zip closes");
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace loom;
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string path = data[0] == 0 ? fuzzing::input_file(data + 1, size - 1, "input.keras")
                                        : archive_with_config(rest);
  std::shared_ptr<Model> model;
  try {
    model = models::load_model(path);
  } catch (const Error&) {
    return 0;  // a clean rejection
  }
  const std::string copy = fuzzing::work_dir().file("roundtrip.keras");
  try {
    model->save(copy);
  } catch (const Error&) {
    return 0;  // the writer refuses some settings the reader accepts (a layer without a Keras form)
  }
  const auto reloaded = models::load_model(copy);
  fuzzing::require(reloaded->summary_string() == model->summary_string(), "the round trip keeps the architecture");
  fuzzing::require(reloaded->compiled() == model->compiled(), "the round trip keeps the compile settings");
  const auto a = model->weights(), b = reloaded->weights();
  fuzzing::require(a.size() == b.size(), "the round trip keeps every weight");
  for (std::size_t i = 0; i < a.size(); ++i) {
    fuzzing::require(a[i].shape() == b[i].shape(), "the round trip keeps the weights' shapes");
    fuzzing::require(a[i].dtype() == b[i].dtype(), "the round trip keeps the weights' dtypes");
  }
  return 0;
}
