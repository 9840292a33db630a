#pragma once
// Replacing a file atomically: readers see either the old file or the complete new one, never a torn write.
#include <string>
#include <string_view>
#include <vector>

namespace loom::io {

/// Writes the concatenation of `pieces` to `path`: first to a fresh temporary file in the same folder (so the
/// final rename stays on one file system), flushed and fsync'ed, then renamed over `path`. On failure the
/// temporary is removed, any existing `path` is left as it was, and a loom::Error names `caller`, the path and
/// the step that failed ("creating the temporary file", "writing", "syncing", "renaming ...").
///
/// A symbolic link at `path` is followed: the file it ends at is replaced (created for a dangling link) and
/// the link stays. The temporary is named ".<up to 100 bytes of the name>.<hash>.<random>.loom-tmp", so any
/// legal name has a legal temporary; it is locked while written, and temporaries of the same target left by a
/// writer that died (unlocked, untouched for 10 s) are removed by the next save.
void write_file_atomically(std::string_view caller, const std::string& path, const std::vector<std::string_view>& pieces);

}  // namespace loom::io
