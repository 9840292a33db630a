#include "layers/dtype_policy.hpp"

#include <mutex>

#include "framework/tensor/error.hpp"

namespace loom {

DTypePolicy DTypePolicy::from_name(const std::string& name, std::string_view what) {
  if (name == "float32" || name == "float64") return {name, false};
  if (name == "mixed_bfloat16") return {name, true};
  if (name == "bfloat16")
    throw Error(fmt::format("{}: the policy 'bfloat16' keeps variables in bf16, which loom cannot train (it has "
                            "no bf16 arithmetic outside matmul); use 'mixed_bfloat16' (variables float32)", what));
  if (name == "float16" || name == "mixed_float16")
    throw Error(fmt::format("{}: loom has no float16; the policy '{}' is not supported (use 'mixed_bfloat16')", what,
                            name));
  throw Error(fmt::format("{}: unknown dtype policy '{}'; expected 'float32', 'float64' or 'mixed_bfloat16'", what,
                          name));
}

namespace mixed_precision {

namespace {
std::mutex policy_mutex;
DTypePolicy current_policy;
}  // namespace

void set_global_policy(const std::string& name) {
  DTypePolicy policy = DTypePolicy::from_name(name, "mixed_precision::set_global_policy");
  const std::lock_guard lock(policy_mutex);
  current_policy = std::move(policy);
}

DTypePolicy global_policy() {
  const std::lock_guard lock(policy_mutex);
  return current_policy;
}

}  // namespace mixed_precision

}  // namespace loom
