#pragma once
// Internal to models/saving: the JSON library (nlohmann-json) behind Config, bounded parsing, and the checked
// reads every part of the archive code uses. Not installed: the public headers pull in no JSON library.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/saving/config.hpp"

namespace loom::models {

struct Config::Json {
  nlohmann::ordered_json value = nlohmann::ordered_json::object();
};

namespace detail {

using json = nlohmann::ordered_json;

/// Limits on untrusted JSON: its size in bytes and how deeply arrays and objects nest.
constexpr std::size_t kMaxJsonBytes = std::size_t(256) << 20;
constexpr std::size_t kMaxJsonDepth = 256;

/// Parses `text` (any JSON value) within the limits above; a loom::Error naming `context` otherwise.
json parse_json(std::string_view text, const std::string& context);
/// One line of JSON text; a loom::Error naming `context` when a string is not valid UTF-8.
std::string dump_json(const json& value, const std::string& context, int indent = -1);

/// "a string \"abc\"", "an object", "null": the type of a value (and a short excerpt), for messages.
std::string describe(const json& value);

/// The checked reads: each names `what` (e.g. "layer 'dense' (Dense) config: 'units'") in its loom::Error.
const json& member(const json& object, std::string_view key, const std::string& context);
bool has_value(const json& object, std::string_view key);  // present and not null
const json& expect_object(const json& value, const std::string& what);
const json& expect_array(const json& value, const std::string& what);
bool as_bool(const json& value, const std::string& what);
std::int64_t as_int(const json& value, const std::string& what);
double as_double(const json& value, const std::string& what);
std::string as_string(const json& value, const std::string& what);
std::vector<std::int64_t> as_ints(const json& value, const std::string& what);
/// A list of integers or nulls (null: -1).
std::vector<std::int64_t> as_shape(const json& value, const std::string& what);
/// A shape as Keras writes it: -1 as null.
json shape_json(const std::vector<std::int64_t>& shape);
/// Keras's None for an empty optional, the value otherwise.
template <class T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

/// Reads one config object key by key, each read once with its type checked (a missing or null key takes the
/// fallback); finish() rejects the keys no read asked for, so a setting loom does not know is an error rather
/// than silently dropped.
class Reader {
 public:
  Reader(const json& config, std::string context);
  const std::string& context() const { return context_; }
  /// "<context>: '<key>'", for messages.
  std::string what(std::string_view key) const;

  /// The value at `key`; null when it is missing or null.
  const json* find(std::string_view key);
  const json& require(std::string_view key);
  std::int64_t integer(std::string_view key);
  std::int64_t integer(std::string_view key, std::int64_t fallback);
  std::optional<std::int64_t> optional_integer(std::string_view key);
  double number(std::string_view key, double fallback);
  std::optional<double> optional_number(std::string_view key);
  bool boolean(std::string_view key, bool fallback);
  std::string string(std::string_view key, std::string fallback);
  std::optional<std::string> optional_string(std::string_view key);
  /// An integer or a list of them (Keras takes both for axes and shapes).
  std::vector<std::int64_t> int_or_ints(const json& value, std::string_view key) const;
  /// A seed: null or an integer >= 0.
  std::optional<std::uint64_t> seed(std::string_view key = "seed");
  /// Keys loom has no counterpart for (regularizers, constraints, quantization): null or absent only.
  void unsupported(std::initializer_list<std::string_view> keys);
  /// Flags loom does not support: false or absent only.
  void unsupported_flags(std::initializer_list<std::string_view> keys);
  /// Keys whose value does not change what loom computes.
  void ignore(std::initializer_list<std::string_view> keys);
  void finish() const;

 private:
  const json& config_;
  std::string context_;
  std::set<std::string, std::less<>> used_;
};

/// A Config over a JSON object (copied), and the object behind one.
Config config_of(const json& object, std::string context);
const json& json_of(const Config& config);

}  // namespace detail
}  // namespace loom::models
