#pragma once
// Config: a Keras config, the JSON object that a .keras archive holds for each layer (Keras's get_config() /
// from_config()), read and written with checked types. Custom layer classes get and fill one
// (models/saving/layer_registry.hpp):
//
//   models::Config config;
//   config.set_int("units", 8);  config.set_string("activation", "relu");  config.set_shape("shape", {-1, 4});
//   std::int64_t units = config.get_int("units");   // a loom::Error naming the key unless it is an integer
//
// A getter throws a loom::Error naming the config (its context, e.g. "layer 'dense' (Dense) config"), the key,
// what was expected and what the value is: a missing key, a wrong type, an integer out of range. JSON's null
// is Keras's None: is_null() is true for it and for a missing key. Shapes hold -1 where Keras writes None.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "framework/tensor/shape.hpp"

namespace loom::models {

class Config {
 public:
  /// An empty object; `context` names it in error messages.
  explicit Config(std::string context = "config");
  ~Config();
  Config(const Config& other);
  Config& operator=(const Config& other);
  Config(Config&& other) noexcept;
  Config& operator=(Config&& other) noexcept;

  /// Parses JSON text that holds an object. Malformed text, another JSON type, nesting deeper than 256 levels
  /// or text over 256 MiB is a loom::Error naming `context`.
  static Config parse(std::string_view text, std::string context = "config");
  /// The JSON text; `indent` < 0 writes one line.
  std::string dump(int indent = -1) const;

  const std::string& context() const;
  bool contains(std::string_view key) const;
  /// True when the key is missing or holds null.
  bool is_null(std::string_view key) const;
  /// The keys, sorted.
  std::vector<std::string> keys() const;

  bool get_bool(std::string_view key) const;
  /// An integer (a JSON number without fraction or exponent, within int64).
  std::int64_t get_int(std::string_view key) const;
  /// A number (integer or not).
  double get_double(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  /// A list of integers.
  std::vector<std::int64_t> get_ints(std::string_view key) const;
  /// A list of integers or nulls, each null read as -1 (Keras's None in a shape).
  Shape get_shape(std::string_view key) const;
  /// A nested object; its context names this one and the key.
  Config get_config(std::string_view key) const;

  void set_null(std::string_view key);
  void set_bool(std::string_view key, bool value);
  void set_int(std::string_view key, std::int64_t value);
  /// A finite number (NaN and infinities are a loom::Error: JSON cannot hold them).
  void set_double(std::string_view key, double value);
  void set_string(std::string_view key, std::string_view value);
  void set_ints(std::string_view key, const std::vector<std::int64_t>& values);
  /// Each -1 is written as null.
  void set_shape(std::string_view key, const Shape& shape);
  void set_config(std::string_view key, const Config& value);

  /// The JSON value behind the config (internal to models/saving, for the parts of an archive that are not
  /// flat objects).
  struct Json;
  Json& json();
  const Json& json() const;

 private:
  std::string context_;
  std::unique_ptr<Json> json_;
};

}  // namespace loom::models
