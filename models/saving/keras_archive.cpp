// The .keras archive itself: the zip (read and written with libzip), its members, and the two entry points,
// Model::save and models::load_model. The configs are models/saving/{layer,model,compile}_config.cpp; the
// weights member is models/saving/keras_weights_h5.cpp.
#include "models/saving/keras_archive.hpp"

#include <unistd.h>
#include <zip.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <list>
#include <utility>

#include <fmt/format.h>

#include "framework/io/atomic_file.hpp"
#include "models/saving/detail/serialization.hpp"
#include "models/saving/keras_weights_h5.hpp"

namespace loom {

namespace {

using models::detail::json;

constexpr const char* kConfigMember = "config.json";
constexpr const char* kMetadataMember = "metadata.json";
constexpr const char* kWeightsMember = "model.weights.h5";
/// The Keras version whose archive format loom reads and writes.
constexpr const char* kKerasVersion = "3.15.1";

/// Limits on what an archive may declare: JSON members are read into memory, the weights are copied to a
/// file in pieces. A member that expands more than kMaxExpansion times its stored size (beyond 1 MiB) is
/// refused as a decompression bomb.
constexpr std::uint64_t kMaxJsonMember = std::uint64_t(64) << 20;
constexpr std::uint64_t kMaxWeightsMember = std::uint64_t(64) << 30;
constexpr std::uint64_t kMaxExpansion = 1000;
constexpr std::uint64_t kExpansionFloor = std::uint64_t(1) << 20;
constexpr std::size_t kCopyChunk = std::size_t(1) << 20;

std::string libzip_error(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

// ---- reading ----

class ZipReader {
 public:
  ZipReader(const std::string& path, std::string context) : context_(std::move(context)) {
    std::error_code ec;
    check(std::filesystem::is_regular_file(path, ec), "{}: no such file", context_);
    int code = 0;
    zip_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    check(zip_ != nullptr, "{}: not a readable .keras archive (a zip file): {}", context_, libzip_error(code));
  }
  ~ZipReader() {
    if (zip_) zip_discard(zip_);
  }
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  bool has(const char* name) const { return zip_name_locate(zip_, name, 0) >= 0; }

  /// A member's whole content, at most `limit` bytes.
  std::string read(const char* name, std::uint64_t limit) const {
    const zip_stat_t st = stat(name, limit);
    std::string data(std::size_t(st.size), '\0');
    Member member(*this, name);
    std::uint64_t done = 0;
    while (done < st.size) {
      const zip_int64_t n = zip_fread(member.file, data.data() + done, st.size - done);
      check(n > 0, "{}: reading '{}' failed after {} of {} bytes: {}", context_, name, done, st.size,
            n < 0 ? zip_file_strerror(member.file) : "the member ends early");
      done += std::uint64_t(n);
    }
    member.finish(done);
    return data;
  }

  /// Copies a member to an open file, in pieces; at most `limit` bytes.
  void copy_to(const char* name, std::uint64_t limit, std::FILE* out, const std::string& out_path) const {
    const zip_stat_t st = stat(name, limit);
    Member member(*this, name);
    std::vector<char> buffer(kCopyChunk);
    std::uint64_t done = 0;
    while (done < st.size) {
      const zip_uint64_t want = std::min<std::uint64_t>(buffer.size(), st.size - done);
      const zip_int64_t n = zip_fread(member.file, buffer.data(), want);
      check(n > 0, "{}: reading '{}' failed after {} of {} bytes: {}", context_, name, done, st.size,
            n < 0 ? zip_file_strerror(member.file) : "the member ends early");
      check(std::fwrite(buffer.data(), 1, std::size_t(n), out) == std::size_t(n), "{}: writing '{}' to '{}' failed",
            context_, name, out_path);
      done += std::uint64_t(n);
    }
    member.finish(done);
  }

 private:
  /// An open member; finish() checks that it holds nothing past its declared size and that its checksum holds.
  struct Member {
    const ZipReader& reader;
    const char* name;
    zip_file_t* file;
    Member(const ZipReader& r, const char* n) : reader(r), name(n), file(zip_fopen(r.zip_, n, 0)) {
      check(file != nullptr, "{}: cannot open '{}': {}", reader.context_, name, zip_strerror(reader.zip_));
    }
    ~Member() {
      if (file) zip_fclose(file);
    }
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;
    void finish(std::uint64_t done) {
      char extra = 0;
      const zip_int64_t n = zip_fread(file, &extra, 1);
      check(n == 0, "{}: '{}' holds more than the {} bytes it declares{}", reader.context_, name, done,
            n < 0 ? fmt::format(" ({})", zip_file_strerror(file)) : std::string());
      const int closed = zip_fclose(file);
      file = nullptr;
      check(closed == 0, "{}: '{}' is corrupt: {}", reader.context_, name, libzip_error(closed));
    }
  };

  zip_stat_t stat(const char* name, std::uint64_t limit) const {
    zip_stat_t st;
    zip_stat_init(&st);
    check(zip_stat(zip_, name, 0, &st) == 0, "{}: the archive has no '{}' (a .keras archive holds {}, {} and {})",
          context_, name, kMetadataMember, kConfigMember, kWeightsMember);
    check((st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE), "{}: '{}' declares no size", context_, name);
    check(st.size <= limit, "{}: '{}' declares {} bytes, more than the {} loom reads", context_, name, st.size, limit);
    check(st.size <= kExpansionFloor || st.size / kMaxExpansion <= st.comp_size, "{}: '{}' declares {} bytes but "
          "stores {}: refused as a decompression bomb", context_, name, st.size, st.comp_size);
    return st;
  }

  std::string context_;
  zip_t* zip_ = nullptr;
};

// ---- writing ----

/// A zip built in memory; bytes() closes it and returns the archive. Members are stored uncompressed, as
/// Keras stores them.
class ZipWriter {
 public:
  explicit ZipWriter(std::string context) : context_(std::move(context)) {
    zip_error_t error;
    zip_error_init(&error);
    buffer_ = zip_source_buffer_create(nullptr, 0, 0, &error);
    if (buffer_ == nullptr) fail("creating the archive in memory", error);
    zip_source_keep(buffer_);  // the bytes outlive the zip
    zip_ = zip_open_from_source(buffer_, ZIP_TRUNCATE, &error);
    if (zip_ == nullptr) {
      zip_source_free(buffer_);
      fail("creating the archive in memory", error);
    }
    zip_error_fini(&error);
  }
  ~ZipWriter() {
    if (zip_) zip_discard(zip_);
    if (buffer_) zip_source_free(buffer_);
  }
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  void add_bytes(const char* name, std::string data) {
    const std::string& kept = members_.emplace_back(std::move(data));
    zip_source_t* source = zip_source_buffer(zip_, kept.data(), kept.size(), 0);
    check(source != nullptr, "{}: adding '{}': {}", context_, name, zip_strerror(zip_));
    const zip_int64_t index = zip_file_add(zip_, name, source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      throw Error(fmt::format("{}: adding '{}': {}", context_, name, zip_strerror(zip_)));
    }
    check(zip_set_file_compression(zip_, zip_uint64_t(index), ZIP_CM_STORE, 0) == 0, "{}: storing '{}': {}",
          context_, name, zip_strerror(zip_));
  }

  /// Closes the zip and returns its bytes.
  std::string bytes() {
    check(zip_close(zip_) == 0, "{}: writing the archive failed: {}", context_, zip_strerror(zip_));
    zip_ = nullptr;
    check(zip_source_open(buffer_) == 0, "{}: reading the archive back from memory failed", context_);
    std::string out;
    std::vector<char> chunk(kCopyChunk);
    for (zip_int64_t n; (n = zip_source_read(buffer_, chunk.data(), chunk.size())) != 0;) {
      if (n < 0) {
        zip_source_close(buffer_);
        throw Error(fmt::format("{}: reading the archive back from memory failed", context_));
      }
      out.append(chunk.data(), std::size_t(n));
    }
    zip_source_close(buffer_);
    return out;
  }

 private:
  [[noreturn]] void fail(const char* step, zip_error_t& error) {
    const std::string message = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw Error(fmt::format("{}: {}: {}", context_, step, message));
  }

  std::string context_;
  zip_source_t* buffer_ = nullptr;
  zip_t* zip_ = nullptr;
  std::list<std::string> members_;  // the members' bytes, alive until the zip closes
};

/// The output path's checks, before any work: a ".keras" name in an existing, writable folder.
void check_output_path(const std::string& path, const std::string& context) {
  namespace fs = std::filesystem;
  check(path.size() > 6 && path.ends_with(".keras"), "{}: the path must end in \".keras\" (as Keras requires); use "
        "save_weights for a weights file", context);
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  check(fs::is_directory(folder, ec), "{}: the folder '{}' does not exist", context, folder.string());
  check(::access(folder.c_str(), W_OK) == 0, "{}: the folder '{}' is not writable", context, folder.string());
  check(!fs::is_directory(path, ec), "{}: a folder of that name exists", context);
}

std::string date_saved() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d@%H:%M:%S", &local);
  return text;
}

}  // namespace

namespace models {

std::shared_ptr<layers::Model> load_model(const std::string& path, LoadModelOptions options) {
  const std::string context = fmt::format("load_model: '{}'", path);
  try {
    const ZipReader zip(path, context);
    if (zip.has(kMetadataMember)) {
      const json metadata = detail::parse_json(zip.read(kMetadataMember, kMaxJsonMember), context + ": metadata.json");
      detail::expect_object(metadata, context + ": metadata.json");
    }
    const json config = detail::parse_json(zip.read(kConfigMember, kMaxJsonMember), context + ": config.json");
    const std::string where = context + ": config.json";
    detail::expect_object(config, where);
    check(detail::is_model_entry(config), "{}: the archive holds {}, not a Sequential or Functional model", where,
          config.contains("class_name") ? detail::describe(config["class_name"]) : std::string("no class_name"));
    const detail::LoadContext load{&options.custom_objects};
    std::shared_ptr<layers::Model> model = detail::deserialize_model(config, load, where);
    if (options.compile && detail::has_value(config, "compile_config"))
      detail::compile_from_config(*model, config["compile_config"], where + ": compile_config");
    // The optimizer's variables load when the model was compiled and they fit it, as in Keras's load_model.
    models::load_keras_weights_image(*model, zip.read(kWeightsMember, kMaxWeightsMember),
                                     fmt::format("{}: {}", path, kWeightsMember),
                                     model->compiled() ? OptimizerVariables::load_if_matching
                                                       : OptimizerVariables::ignore);
    return model;
  } catch (const nlohmann::ordered_json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON content: {}", context, e.what()));
  }
}

}  // namespace models

namespace layers {

void Model::save(const std::string& path) const {
  const std::string context = fmt::format("{}.save: '{}'", name(), path);
  check_output_path(path, context);
  check(built(), "{}: the model is not built; call it on data or start it with an Input", context);
  models::detail::json config = models::detail::serialize_model(*this);
  if (compiled()) config["compile_config"] = models::detail::serialize_compile(*this);
  const models::detail::json metadata = {{"keras_version", kKerasVersion}, {"date_saved", date_saved()},
                                         {"saved_by", "loom"}};
  ZipWriter zip(context);
  zip.add_bytes(kMetadataMember, models::detail::dump_json(metadata, context));
  zip.add_bytes(kConfigMember, models::detail::dump_json(config, context));
  zip.add_bytes(kWeightsMember, models::keras_weights_file_image(*this, /*include_optimizer=*/compiled()));
  const std::string archive = zip.bytes();
  io::write_file_atomically(context, path, {archive});
}

}  // namespace layers
}  // namespace loom
