// libFuzzer target for the safetensors reader: any input is either a file's tensors and metadata or a
// loom::Error; what loads saves and loads back to the same names, metadata, dtypes, shapes and bytes.
// Anything else (a sanitizer report, another exception, a broken invariant) is a crash.
#include <cstdint>

#include "framework/io/safetensors.hpp"
#include "framework/tensor/error.hpp"
#include "tests/fuzz/fuzz_helpers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace loom;
  const std::string path = fuzzing::input_file(data, size, "input.safetensors");
  io::SafetensorsFile loaded;
  try {
    loaded = io::read_safetensors(path);
  } catch (const Error&) {
    return 0;  // a clean rejection
  }
  for (const auto& entry : loaded.tensors) fuzzing::exercise_size_arithmetic(entry.second);
  const std::string copy = fuzzing::work_dir().file("roundtrip.safetensors");
  try {
    io::save_safetensors(copy, loaded.tensors, loaded.metadata);
  } catch (const Error&) {
    return 0;  // the writer refuses some names the reader accepts (an empty name)
  }
  const io::SafetensorsFile reloaded = io::read_safetensors(copy);
  fuzzing::require(reloaded.metadata == loaded.metadata, "the round trip keeps the metadata");
  fuzzing::require(reloaded.tensors.size() == loaded.tensors.size(), "the round trip keeps every tensor");
  for (std::size_t i = 0; i < loaded.tensors.size(); ++i) {
    fuzzing::require(reloaded.tensors[i].first == loaded.tensors[i].first, "the round trip keeps the names in order");
    fuzzing::require_same(loaded.tensors[i].second, reloaded.tensors[i].second);
  }
  return 0;
}
