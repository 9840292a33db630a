// libFuzzer target for io::load_npy: any input is either a tensor or a loom::Error; a loaded tensor saves
// and loads back to the same dtype, shape and bytes, and the shape ops on it give results or loom::Errors.
// Anything else (a sanitizer report, another exception, a broken invariant) is a crash.
#include <cstdint>

#include "framework/io/npy.hpp"
#include "framework/tensor/error.hpp"
#include "tests/fuzz/fuzz_helpers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace loom;
  const std::string path = fuzzing::input_file(data, size, "input.npy");
  Tensor loaded;
  try {
    loaded = io::load_npy(path);
  } catch (const Error&) {
    return 0;  // a clean rejection
  }
  fuzzing::exercise_size_arithmetic(loaded);
  const std::string copy = fuzzing::work_dir().file("roundtrip.npy");
  io::save_npy(copy, loaded);
  fuzzing::require_same(loaded, io::load_npy(copy));
  return 0;
}
