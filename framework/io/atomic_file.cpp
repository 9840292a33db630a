#include "framework/io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "framework/tensor/error.hpp"

namespace loom::io {

namespace {

std::string error_text() { return std::strerror(errno); }

/// After the rename, the new directory entry itself must reach the disk for the replacement to survive a
/// crash. Best effort: the file is already in place, so a failure here is no reason to report the save failed.
void sync_parent_directory(const std::string& path) {
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (folder.empty()) folder = ".";
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(std::string_view caller, const std::string& path, const std::vector<std::string_view>& pieces) {
  // "x" refuses to reuse an existing file, so two writers never share a temporary.
  std::random_device entropy;
  const std::string temporary =
      fmt::format("{}.tmp-{:08x}{:08x}", path, std::uint32_t(entropy()), std::uint32_t(entropy()));
  std::FILE* file = std::fopen(temporary.c_str(), "wbx");
  check(file != nullptr, "{}: '{}': cannot create the temporary file '{}': {}", caller, path, temporary, error_text());
  auto fail = [&](const char* step) {
    const std::string reason = error_text();
    if (file != nullptr) std::fclose(file);
    std::remove(temporary.c_str());
    throw Error(fmt::format("{}: '{}': {} failed: {}", caller, path, step, reason));
  };
  errno = 0;
  for (std::string_view piece : pieces)
    if (!piece.empty() && std::fwrite(piece.data(), 1, piece.size(), file) != piece.size()) fail("writing");
  if (std::fflush(file) != 0) fail("flushing");
  // Without fsync a crash after the rename could leave the new name pointing at empty data.
  if (::fsync(::fileno(file)) != 0) fail("syncing");
  const int closed = std::fclose(file);
  file = nullptr;
  if (closed != 0) fail("closing");
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("renaming the temporary file over it");
  sync_parent_directory(path);
}

}  // namespace loom::io
