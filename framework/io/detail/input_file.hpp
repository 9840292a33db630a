#pragma once
// Opening a file to read it whole: a FIFO, a device or a directory is refused before anything waits on it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "framework/tensor/error.hpp"

namespace loom::io::detail {

/// A regular file open for reading with stdio, and its size. It is opened non-blocking (opening a FIFO then
/// returns at once) and checked with fstat before the first read; only then is it read blocking as usual.
/// Throws loom::Error "<caller>: cannot open '<path>': <reason>" or "<caller>: '<path>' is not a regular file".
class InputFile {
 public:
  InputFile(std::string_view caller, const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    check(fd >= 0, "{}: cannot open '{}': {}", caller, path, std::strerror(errno));
    struct stat info {};
    const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
    if (regular) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (regular) file_ = ::fdopen(fd, "rb");
    if (file_ == nullptr) {
      const std::string reason = regular ? std::strerror(errno) : "";
      ::close(fd);
      check(regular, "{}: '{}' is not a regular file", caller, path);
      throw Error(fmt::format("{}: cannot open '{}': {}", caller, path, reason));
    }
    size_ = std::uint64_t(info.st_size);
  }
  ~InputFile() { std::fclose(file_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::FILE* get() const { return file_; }
  std::uint64_t size() const { return size_; }

 private:
  std::FILE* file_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace loom::io::detail
