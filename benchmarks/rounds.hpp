#pragma once
// What the benchmarks that compare in interleaved rounds share: each measurement runs in a child process (so
// that its peak RSS is its own) and reports one line "tag key=value key=value ...", which the driver reads.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace loom::benchmarks {

using Fields = std::map<std::string, std::string>;

/// Runs `command` (through the shell) and returns the fields of the line it prints that starts with `tag`;
/// empty (with the output echoed to stderr) when there is none.
inline Fields run_child(const std::string& command, const std::string& tag) {
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(tag + " ", 0) != 0) continue;
    Fields fields;
    std::istringstream words(line.substr(tag.size() + 1));
    for (std::string word; words >> word;)
      if (const auto eq = word.find('='); eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    return fields;
  }
  fmt::print(stderr, "no '{}' line from `{}` (status {}):\n{}\n", tag, command, status, output);
  return {};
}

/// The field `key` as a number; 0 when it is missing.
inline double number(const Fields& fields, const std::string& key) {
  const auto it = fields.find(key);
  return it == fields.end() ? 0.0 : std::atof(it->second.c_str());
}

/// `s` quoted for the shell.
inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// This executable's path, to run it again as a child.
inline std::string self_path(const std::string& fallback) {
  std::vector<char> buffer(4096);
  const ssize_t n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  return n > 0 ? std::string(buffer.data(), std::size_t(n)) : fallback;
}

/// The file `name` in the folder of the source file `source` (pass __FILE__): a benchmark's peer script.
inline std::string next_to(const std::string& source, const std::string& name) {
  const auto slash = source.rfind('/');
  return (slash == std::string::npos ? std::string(".") : source.substr(0, slash)) + "/" + name;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// This process's peak RSS (ru_maxrss) in MiB.
inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace loom::benchmarks
