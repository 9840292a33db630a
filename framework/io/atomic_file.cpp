#include "framework/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "framework/tensor/error.hpp"

namespace loom::io {

namespace {

namespace fs = std::filesystem;

std::string error_text() { return std::strerror(errno); }

constexpr int kMaxLinkHops = 40;                   // Linux's own limit before ELOOP
constexpr std::size_t kNameShownInTemporary = 100;  // bytes of the target's name kept in a temporary's name
constexpr const char* kTemporarySuffix = ".loom-tmp";
// A temporary whose writer has died (its lock is gone) is removed once it is this old.
constexpr auto kStaleAfter = std::chrono::seconds(10);

/// FNV-1a: a hash that every build computes alike, so any version finds the temporaries of a target.
std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

/// Where a save of `path` writes: the end of its chain of symbolic links (a dangling link's target is
/// created), as writing through the link with open() would.
fs::path resolve_links(std::string_view caller, const std::string& path) {
  fs::path p = path;
  for (int hops = 0; hops < kMaxLinkHops; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path target = fs::read_symlink(p, ec);
    check(!ec, "{}: '{}': cannot read the symbolic link '{}': {}", caller, path, p.string(), ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw Error(fmt::format("{}: '{}': more than {} symbolic links in a chain", caller, path, kMaxLinkHops));
}

/// ".<start of the name>.<hash of the name>.": what every temporary of this target starts with. Short, so that
/// a name of NAME_MAX bytes still has a legal temporary beside it.
std::string temporary_prefix(const fs::path& target) {
  const std::string name = target.filename().string();
  return fmt::format(".{}.{:016x}.", name.substr(0, kNameShownInTemporary), stable_hash(name));
}

/// Removes the temporaries of earlier saves of this target whose writers died (kill -9, a power cut): no
/// process holds their lock and they are not fresh. Best effort: a failure leaves them for the next save.
void remove_stale_temporaries(const fs::path& folder, const std::string& prefix) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(folder.empty() ? "." : folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !name.ends_with(kTemporarySuffix)) continue;
    std::error_code time_ec;
    const auto written = fs::last_write_time(it->path(), time_ec);
    if (time_ec || now - written < kStaleAfter) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(it->path().c_str());
    ::close(fd);
  }
}

/// After the rename, the new directory entry itself must reach the disk for the replacement to survive a
/// crash. Best effort: the file is already in place, so a failure here is no reason to report the save failed.
void sync_directory(const fs::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(std::string_view caller, const std::string& path,
                           const std::vector<std::string_view>& pieces) {
  const fs::path target = resolve_links(caller, path);
  const fs::path folder = target.parent_path();
  const std::string prefix = temporary_prefix(target);
  remove_stale_temporaries(folder, prefix);

  // O_EXCL refuses to reuse an existing file, so two writers never share a temporary; the lock, held until the
  // descriptor closes (or the process dies), tells later saves that this one is still being written.
  std::random_device entropy;
  const std::string temporary =
      (folder / fmt::format("{}{:08x}{:08x}{}", prefix, std::uint32_t(entropy()), std::uint32_t(entropy()),
                            kTemporarySuffix)).string();
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  check(fd >= 0, "{}: '{}': cannot create the temporary file '{}': {}", caller, path, temporary, error_text());
  ::flock(fd, LOCK_EX);
  std::FILE* file = ::fdopen(fd, "wb");
  auto fail = [&](const char* step) {
    const std::string reason = error_text();
    if (file != nullptr) std::fclose(file);
    std::remove(temporary.c_str());
    throw Error(fmt::format("{}: '{}': {} failed: {}", caller, path, step, reason));
  };
  if (file == nullptr) {
    ::close(fd);
    fail("opening the temporary file");
  }
  errno = 0;
  for (std::string_view piece : pieces)
    if (!piece.empty() && std::fwrite(piece.data(), 1, piece.size(), file) != piece.size()) fail("writing");
  if (std::fflush(file) != 0) fail("flushing");
  // Without fsync a crash after the rename could leave the new name pointing at empty data.
  if (::fsync(::fileno(file)) != 0) fail("syncing");
  const int closed = std::fclose(file);  // releases the lock; the file was just written, so it is not stale
  file = nullptr;
  if (closed != 0) fail("closing");
  if (std::rename(temporary.c_str(), target.c_str()) != 0) fail("renaming the temporary file over it");
  sync_directory(folder);
}

}  // namespace loom::io
