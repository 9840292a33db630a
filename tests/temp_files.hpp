#pragma once
// Files for the tests of the file writers and readers: a fresh folder removed at the end of a test, and whole
// files read and written as bytes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include <fmt/format.h>

namespace loom::testing {

/// A fresh folder, removed with its contents at the end of the test.
struct TempDir {
  std::filesystem::path path;
  /// `kind` names the folder ("loom-<kind>-test-<random>"), so a leftover one says which test made it.
  explicit TempDir(const std::string& kind) {
    std::random_device entropy;
    path = std::filesystem::temp_directory_path() /
           fmt::format("loom-{}-test-{:08x}{:08x}", kind, entropy(), entropy());
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

/// While alive, the working directory is a fresh temporary folder: for examples that write files next to
/// themselves as users' programs do, so that the suite runs from a read-only working directory too.
struct TempWorkingDirectory {
  TempDir dir;
  std::filesystem::path previous = std::filesystem::current_path();
  explicit TempWorkingDirectory(const std::string& kind) : dir(kind) { std::filesystem::current_path(dir.path); }
  ~TempWorkingDirectory() {
    std::error_code ignored;
    std::filesystem::current_path(previous, ignored);
  }
  TempWorkingDirectory(const TempWorkingDirectory&) = delete;
  TempWorkingDirectory& operator=(const TempWorkingDirectory&) = delete;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace loom::testing
