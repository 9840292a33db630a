#pragma once
// An environment variable set (or removed) for a scope, the previous value restored after. Not thread-safe:
// the environment is one per process, so use it before starting threads that read it.
#include <cstdlib>
#include <optional>
#include <string>

namespace loom {

class ScopedEnvironment {
 public:
  /// Sets `name` to `value`, or removes it when `value` is null.
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnvironment() {
    if (previous_) setenv(name_, previous_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

}  // namespace loom
