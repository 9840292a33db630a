#include "models/saving/config.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "framework/tensor/error.hpp"
#include "models/saving/detail/json.hpp"

namespace loom::models {

namespace detail {

namespace {

/// Thrown by the parser's callback past the depth limit, turned into a loom::Error by parse_json.
struct TooDeep {};

std::string quoted_excerpt(const std::string& text) {
  constexpr std::size_t kMax = 40;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u >= 0x7f ? '?' : c;
  }
  return fmt::format("\"{}{}\"", out, text.size() > kMax ? "..." : "");
}

}  // namespace

json parse_json(std::string_view text, const std::string& context) {
  check(text.size() <= kMaxJsonBytes, "{}: the JSON text is {} bytes, more than the {} MiB loom reads", context,
        text.size(), kMaxJsonBytes >> 20);
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth < 0 || std::size_t(depth) > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    throw Error(fmt::format("{}: the JSON nests deeper than {} levels", context, kMaxJsonDepth));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", context, e.what()));
  }
}

std::string dump_json(const json& value, const std::string& context, int indent) {
  try {
    return value.dump(indent);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: cannot write the JSON: {}", context, e.what()));
  }
}

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return fmt::format("the boolean {}", value.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return fmt::format("the number {}", value.dump());
    case json::value_t::string:
      return fmt::format("the string {}", quoted_excerpt(value.get_ref<const std::string&>()));
    case json::value_t::array:
      return fmt::format("a list of {} item(s)", value.size());
    case json::value_t::object:
      return "an object";
    default:
      return "a binary value";
  }
}

const json& member(const json& object, std::string_view key, const std::string& context) {
  expect_object(object, context);
  const auto it = object.find(key);
  check(it != object.end(), "{}: the key '{}' is missing", context, key);
  return *it;
}

bool has_value(const json& object, std::string_view key) {
  if (!object.is_object()) return false;
  const auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

const json& expect_object(const json& value, const std::string& what) {
  check(value.is_object(), "{}: expected an object, got {}", what, describe(value));
  return value;
}

const json& expect_array(const json& value, const std::string& what) {
  check(value.is_array(), "{}: expected a list, got {}", what, describe(value));
  return value;
}

bool as_bool(const json& value, const std::string& what) {
  check(value.is_boolean(), "{}: expected true or false, got {}", what, describe(value));
  return value.get<bool>();
}

std::int64_t as_int(const json& value, const std::string& what) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    check(u <= std::uint64_t(std::numeric_limits<std::int64_t>::max()), "{}: the integer {} is too large", what, u);
    return std::int64_t(u);
  }
  check(value.is_number_integer(), "{}: expected an integer, got {}", what, describe(value));
  return value.get<std::int64_t>();
}

double as_double(const json& value, const std::string& what) {
  check(value.is_number(), "{}: expected a number, got {}", what, describe(value));
  return value.get<double>();
}

std::string as_string(const json& value, const std::string& what) {
  check(value.is_string(), "{}: expected a string, got {}", what, describe(value));
  return value.get<std::string>();
}

std::vector<std::int64_t> as_ints(const json& value, const std::string& what) {
  expect_array(value, what);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(as_int(value[i], fmt::format("{}[{}]", what, i)));
  return out;
}

std::vector<std::int64_t> as_shape(const json& value, const std::string& what) {
  expect_array(value, what);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i].is_null()) {
      out.push_back(-1);
      continue;
    }
    const std::int64_t d = as_int(value[i], fmt::format("{}[{}]", what, i));
    check(d >= 0, "{}[{}]: a size must be >= 0 or null, got {}", what, i, d);
    out.push_back(d);
  }
  return out;
}

json shape_json(const std::vector<std::int64_t>& shape) {
  json out = json::array();
  for (auto d : shape) out.push_back(d < 0 ? json(nullptr) : json(d));
  return out;
}

Reader::Reader(const json& config, std::string context) : config_(config), context_(std::move(context)) {
  expect_object(config_, context_);
}

std::string Reader::what(std::string_view key) const { return fmt::format("{}: '{}'", context_, key); }

const json* Reader::find(std::string_view key) {
  used_.insert(std::string(key));
  const auto it = config_.find(key);
  return it == config_.end() || it->is_null() ? nullptr : &*it;
}

const json& Reader::require(std::string_view key) {
  const json* v = find(key);
  check(v != nullptr, "{}: the key '{}' is missing (or null)", context_, key);
  return *v;
}

std::int64_t Reader::integer(std::string_view key) { return as_int(require(key), what(key)); }

std::int64_t Reader::integer(std::string_view key, std::int64_t fallback) {
  const json* v = find(key);
  return v ? as_int(*v, what(key)) : fallback;
}

std::optional<std::int64_t> Reader::optional_integer(std::string_view key) {
  const json* v = find(key);
  return v ? std::optional<std::int64_t>(as_int(*v, what(key))) : std::nullopt;
}

double Reader::number(std::string_view key, double fallback) {
  const json* v = find(key);
  return v ? as_double(*v, what(key)) : fallback;
}

std::optional<double> Reader::optional_number(std::string_view key) {
  const json* v = find(key);
  return v ? std::optional<double>(as_double(*v, what(key))) : std::nullopt;
}

bool Reader::boolean(std::string_view key, bool fallback) {
  const json* v = find(key);
  return v ? as_bool(*v, what(key)) : fallback;
}

std::string Reader::string(std::string_view key, std::string fallback) {
  const json* v = find(key);
  return v ? as_string(*v, what(key)) : std::move(fallback);
}

std::optional<std::string> Reader::optional_string(std::string_view key) {
  const json* v = find(key);
  return v ? std::optional<std::string>(as_string(*v, what(key))) : std::nullopt;
}

std::vector<std::int64_t> Reader::int_or_ints(const json& value, std::string_view key) const {
  if (value.is_array()) return as_ints(value, what(key));
  return {as_int(value, what(key))};
}

std::optional<std::uint64_t> Reader::seed(std::string_view key) {
  const json* v = find(key);
  if (!v) return std::nullopt;
  const std::int64_t s = as_int(*v, what(key));
  check(s >= 0, "{}: a seed must be >= 0, got {}", what(key), s);
  return std::uint64_t(s);
}

void Reader::unsupported(std::initializer_list<std::string_view> keys) {
  for (auto key : keys) {
    const json* v = find(key);
    check(v == nullptr, "{}: loom does not support '{}' (got {}); only null is accepted (no regularizers, "
          "constraints or quantization)", context_, key, v ? describe(*v) : "");
  }
}

void Reader::unsupported_flags(std::initializer_list<std::string_view> keys) {
  for (auto key : keys) check(!boolean(key, false), "{}: loom does not support '{}' = true", context_, key);
}

void Reader::ignore(std::initializer_list<std::string_view> keys) {
  for (auto key : keys) used_.insert(std::string(key));
}

void Reader::finish() const {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : config_.items())
    if (!used_.count(key)) unknown.push_back(key);
  check(unknown.empty(), "{}: loom does not know the argument(s) {} of this class", context_,
        fmt::join(unknown, ", "));
}

Config config_of(const json& object, std::string context) {
  expect_object(object, context);
  Config config(std::move(context));
  config.json().value = object;
  return config;
}

const json& json_of(const Config& config) { return config.json().value; }

}  // namespace detail



Config::Config(std::string context) : context_(std::move(context)), json_(std::make_unique<Json>()) {}
Config::~Config() = default;
Config::Config(const Config& other) : context_(other.context_), json_(std::make_unique<Json>(*other.json_)) {}
Config& Config::operator=(const Config& other) {
  if (this != &other) {
    context_ = other.context_;
    json_ = std::make_unique<Json>(*other.json_);
  }
  return *this;
}
Config::Config(Config&& other) noexcept = default;
Config& Config::operator=(Config&& other) noexcept = default;

Config Config::parse(std::string_view text, std::string context) {
  detail::json value = detail::parse_json(text, context);
  return detail::config_of(value, std::move(context));
}

std::string Config::dump(int indent) const { return detail::dump_json(json_->value, context_, indent); }

const std::string& Config::context() const { return context_; }

bool Config::contains(std::string_view key) const { return json_->value.contains(key); }

bool Config::is_null(std::string_view key) const { return !detail::has_value(json_->value, key); }

std::vector<std::string> Config::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : json_->value.items()) out.push_back(key);
  return out;
}

namespace {
std::string what(const Config& config, std::string_view key) { return fmt::format("{}: '{}'", config.context(), key); }
}  // namespace

bool Config::get_bool(std::string_view key) const {
  return detail::as_bool(detail::member(json_->value, key, context_), what(*this, key));
}
std::int64_t Config::get_int(std::string_view key) const {
  return detail::as_int(detail::member(json_->value, key, context_), what(*this, key));
}
double Config::get_double(std::string_view key) const {
  return detail::as_double(detail::member(json_->value, key, context_), what(*this, key));
}
std::string Config::get_string(std::string_view key) const {
  return detail::as_string(detail::member(json_->value, key, context_), what(*this, key));
}
std::vector<std::int64_t> Config::get_ints(std::string_view key) const {
  return detail::as_ints(detail::member(json_->value, key, context_), what(*this, key));
}
Shape Config::get_shape(std::string_view key) const {
  return detail::as_shape(detail::member(json_->value, key, context_), what(*this, key));
}
Config Config::get_config(std::string_view key) const {
  return detail::config_of(detail::member(json_->value, key, context_), what(*this, key));
}

void Config::set_null(std::string_view key) { json_->value[std::string(key)] = nullptr; }
void Config::set_bool(std::string_view key, bool value) { json_->value[std::string(key)] = value; }
void Config::set_int(std::string_view key, std::int64_t value) { json_->value[std::string(key)] = value; }
void Config::set_double(std::string_view key, double value) {
  check(std::isfinite(value), "{}: '{}' must be a finite number to be saved, got {}", context_, key, value);
  json_->value[std::string(key)] = value;
}
void Config::set_string(std::string_view key, std::string_view value) {
  json_->value[std::string(key)] = std::string(value);
}
void Config::set_ints(std::string_view key, const std::vector<std::int64_t>& values) {
  json_->value[std::string(key)] = values;
}
void Config::set_shape(std::string_view key, const Shape& shape) {
  json_->value[std::string(key)] = detail::shape_json(shape);
}
void Config::set_config(std::string_view key, const Config& value) {
  json_->value[std::string(key)] = value.json_->value;
}

Config::Json& Config::json() { return *json_; }
const Config::Json& Config::json() const { return *json_; }

}  // namespace loom::models
