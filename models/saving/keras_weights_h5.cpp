#include "models/saving/keras_weights_h5.hpp"

#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "framework/io/atomic_file.hpp"
#include "models/sequential.hpp"
#include "optim/optimizer.hpp"

namespace loom::models {

using layers::Layer;
using layers::Model;

namespace {

// ---- the HDF5 library ----

/// Debian's libhdf5 is built without thread safety: every use of it holds this lock. The library's own error
/// printing is switched off once; loom reports errors itself.
std::unique_lock<std::mutex> lock_hdf5() {
  static std::mutex mutex;
  static std::once_flag silenced;
  std::unique_lock<std::mutex> lock(mutex);
  std::call_once(silenced, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
  return lock;
}

/// The innermost message of HDF5's error stack, for loom's messages ("" when the stack is empty).
std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        auto& text = *static_cast<std::string*>(out);
        if (text.empty() && error->desc != nullptr) text = error->desc;
        return 0;
      },
      &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "the HDF5 library reports an error" : reason;
}

/// An HDF5 identifier, closed when it goes out of scope.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  Id(Id&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id& operator=(Id&&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

/// Every in-memory file gets its own name: the core driver identifies open files by name.
std::string memory_file_name() {
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("loom-memory-{}.h5", counter++);
}

// ---- the layout: which group holds which variables ----

struct VariableGroup {
  std::string path;  // below the file's root; "" for the model's own variables
  std::string name;  // the layer's name: the "name" attribute of the vars group
  std::vector<Variable> variables;  // in Keras's order (trainable first)
};

/// Keras keys a layer's sub-layers by the attribute holding them (saving_lib._walk_saveable visits the
/// attributes sorted, public ones first, so a sub-layer reachable by a public property is saved under it).
/// For loom's layers with sub-layers: each child's Keras attribute, by the child's name, and the attributes
/// of Keras's sub-layers that have no variables (saved as empty groups).
struct KerasAttributes {
  std::map<std::string, std::string> of_child;
  std::vector<std::string> weightless;
};

const KerasAttributes* keras_attributes(const std::string& class_name) {
  static const std::map<std::string, KerasAttributes> table = {
      {"MultiHeadAttention",
       {{{"query", "query_dense"}, {"key", "key_dense"}, {"value", "value_dense"}, {"gate", "_gate_dense"},
         {"attention_output", "output_dense"}},
        {"_dropout_layer", "_softmax"}}},
      {"GroupQueryAttention",
       {{{"query", "_query_dense"}, {"key", "_key_dense"}, {"value", "_value_dense"}, {"gate", "_gate_dense"},
         {"attention_output", "_output_dense"}},
        {"_dropout_layer", "_softmax"}}},
  };
  const auto it = table.find(class_name);
  return it == table.end() ? nullptr : &it->second;
}

bool is_sequential_or_functional(const Layer& layer) {
  const auto* model = dynamic_cast<const Model*>(&layer);
  return model != nullptr && (model->is_functional() || dynamic_cast<const layers::Sequential*>(model) != nullptr);
}

class Layout {
 public:
  explicit Layout(const Model& model) { add(model, ""); }
  const std::vector<VariableGroup>& groups() const { return groups_; }

 private:
  void add(const Layer& layer, const std::string& path) {
    if (!visited_.insert(&layer).second) return;  // a shared layer is saved once, where first met
    groups_.push_back({path, layer.name(), layer.own_weights()});
    const std::string prefix = path.empty() ? "" : path + "/";
    // Keras's container rule: the k-th layer of a class is "<class>_<k>" (saving_lib._save_container_state).
    std::map<std::string, int> used;
    auto by_class = [&](const Layer& child) {
      const int k = used[child.base_name()]++;
      return k == 0 ? child.base_name() : fmt::format("{}_{}", child.base_name(), k);
    };
    if (is_sequential_or_functional(layer)) {
      for (const auto& child : layer.layers()) add(*child, prefix + "layers/" + by_class(*child));
      return;
    }
    const KerasAttributes* attributes = keras_attributes(layer.class_name());
    for (const auto& child : layer.layers()) {
      const std::string* attribute = nullptr;
      if (attributes != nullptr)
        if (auto it = attributes->of_child.find(child->name()); it != attributes->of_child.end())
          attribute = &it->second;
      add(*child, prefix + (attribute != nullptr ? *attribute : by_class(*child)));
    }
    if (attributes != nullptr)
      for (const std::string& attribute : attributes->weightless)
        groups_.push_back({prefix + attribute, attribute.substr(1), {}});
  }

  std::vector<VariableGroup> groups_;
  std::set<const Layer*> visited_;
};

std::string vars_path(const std::string& group) { return group.empty() ? "vars" : group + "/vars"; }
std::string shown(const std::string& group) { return group.empty() ? "the model's own group" : "'" + group + "'"; }

/// Keras's optimizer.variables for the model's trainable weights, with their names in loom's optimizer state.
struct OptimizerLayout {
  std::vector<Variable> trainable;
  bool has_learning_rate = false;  // a constant rate is a variable; a schedule is not
  std::vector<std::string> slot_keys;  // averages, accumulators, slots ("<variable name>/<slot>"), then the
                                       // optimizer's own entries, in Keras's order
  std::size_t size() const { return 1 + (has_learning_rate ? 1 : 0) + slot_keys.size(); }
};

OptimizerLayout optimizer_layout(const Model& model, const optim::Optimizer& optimizer) {
  OptimizerLayout layout;
  layout.trainable = model.trainable_weights();
  layout.has_learning_rate = !optimizer.learning_rate_setting().is_schedule();
  layout.slot_keys = optimizer.keras_variable_order(layout.trainable);
  return layout;
}

// ---- writing ----

/// The type a tensor is stored as. The only integer Keras stores is the optimizer's iteration count, an int32.
hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return H5T_IEEE_F32LE;
    case DType::f64: return H5T_IEEE_F64LE;
    case DType::i64: return H5T_STD_I32LE;
    default: throw Error(fmt::format("save_weights (.weights.h5): cannot store a {} tensor", dtype));
  }
}

hid_t native_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::i64: return H5T_NATIVE_INT64;
    default: throw Error(fmt::format("load_weights (.weights.h5): cannot read into a {} tensor", dtype));
  }
}

class Writer {
 public:
  explicit Writer(std::string context) : context_(std::move(context)) {
    fapl_ = std::make_unique<Id>(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    need(fapl_->valid() && H5Pset_fapl_core(fapl_->get(), 1 << 20, false) >= 0, "setting up an in-memory file");
    file_ = std::make_unique<Id>(H5Fcreate(memory_file_name().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl_->get()),
                                 H5Fclose);
    need(file_->valid(), "creating the file");
    lcpl_ = std::make_unique<Id>(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    need(lcpl_->valid() && H5Pset_create_intermediate_group(lcpl_->get(), 1) >= 0, "setting up group creation");
  }

  /// Creates `<group>/vars` with its "name" attribute, then one dataset per variable.
  void write_group(const std::string& group, const std::string& name, const std::vector<Tensor>& values) {
    const std::string path = vars_path(group);
    Id vars(H5Gcreate2(file_->get(), path.c_str(), lcpl_->get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    need(vars.valid(), "creating the group '" + path + "'");
    write_name(vars.get(), name, path);
    for (std::size_t i = 0; i < values.size(); ++i) write_dataset(vars.get(), std::to_string(i), values[i], path);
  }

  std::string image() {
    need(H5Fflush(file_->get(), H5F_SCOPE_GLOBAL) >= 0, "flushing the file");
    const ssize_t size = H5Fget_file_image(file_->get(), nullptr, 0);
    need(size > 0, "measuring the file");
    std::string bytes(std::size_t(size), '\0');
    need(H5Fget_file_image(file_->get(), bytes.data(), bytes.size()) == size, "copying the file");
    return bytes;
  }

 private:
  void need(bool ok, const std::string& step) const {
    if (!ok) throw Error(fmt::format("{}: {} failed: {}", context_, step, hdf5_reason()));
  }

  // h5py writes a str attribute as a scalar variable-length UTF-8 string; so does this.
  void write_name(hid_t vars, const std::string& name, const std::string& path) {
    Id type(H5Tcopy(H5T_C_S1), H5Tclose);
    need(type.valid() && H5Tset_size(type.get(), H5T_VARIABLE) >= 0 && H5Tset_cset(type.get(), H5T_CSET_UTF8) >= 0,
         "making a string type");
    Id space(H5Screate(H5S_SCALAR), H5Sclose);
    Id attribute(H5Acreate2(vars, "name", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const char* text = name.c_str();
    need(attribute.valid() && H5Awrite(attribute.get(), type.get(), &text) >= 0,
         "writing the name attribute of '" + path + "'");
  }

  void write_dataset(hid_t vars, const std::string& key, const Tensor& value, const std::string& path) {
    const Tensor data = value.contiguous();
    std::vector<hsize_t> dims(data.shape().begin(), data.shape().end());
    Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
             H5Sclose);
    const std::string where = path + "/" + key;
    need(space.valid(), "describing the shape of '" + where + "'");
    Id dataset(H5Dcreate2(vars, key.c_str(), file_type(data.dtype()), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT),
               H5Dclose);
    need(dataset.valid(), "creating '" + where + "'");
    if (data.numel() == 0) return;
    const void* bytes = data.dtype() == DType::f32   ? static_cast<const void*>(data.data<float>())
                        : data.dtype() == DType::f64 ? static_cast<const void*>(data.data<double>())
                                                     : static_cast<const void*>(data.data<std::int64_t>());
    need(H5Dwrite(dataset.get(), native_type(data.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) >= 0,
         "writing '" + where + "'");
  }

  std::string context_;
  std::unique_ptr<Id> fapl_, file_, lcpl_;
};

// ---- reading ----

/// What the file holds: for each group path, the names in its vars group; and what does not fit the layout.
struct FileContents {
  std::map<std::string, std::set<std::string>> vars;  // group path -> dataset names in <group>/vars
  std::vector<std::string> problems;
};

FileContents list_contents(hid_t file) {
  FileContents contents;
  struct Visit {
    FileContents* contents;
    hid_t file;
  } visit{&contents, file};
  const herr_t status = H5Lvisit(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
        auto& v = *static_cast<Visit*>(data);
        const std::string path = name;
        if (info->type != H5L_TYPE_HARD) {
          v.contents->problems.push_back(fmt::format("'{}' is a soft or external link; loom reads hard links only",
                                                     path));
          return 0;
        }
        Id object(H5Oopen(v.file, name, H5P_DEFAULT), H5Oclose);
        if (!object.valid()) {
          v.contents->problems.push_back(fmt::format("'{}' cannot be opened: {}", path, hdf5_reason()));
          return 0;
        }
        if (H5Iget_type(object.get()) != H5I_DATASET) return 0;
        const auto slash = path.rfind('/');
        const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
        const std::string key = slash == std::string::npos ? path : path.substr(slash + 1);
        const bool in_vars = parent == "vars" || (parent.size() > 5 && parent.ends_with("/vars"));
        if (!in_vars) {
          v.contents->problems.push_back(fmt::format("'{}' is a dataset outside any vars group", path));
          return 0;
        }
        v.contents->vars[parent == "vars" ? "" : parent.substr(0, parent.size() - 5)].insert(key);
        return 0;
      },
      &visit);
  check(status >= 0, "listing the file's contents failed: {}", hdf5_reason());
  return contents;
}

/// What loom checks of a dataset before reading it.
struct DatasetInfo {
  Shape shape;
  H5T_class_t type_class = H5T_NO_CLASS;
  bool bfloat16 = false;
};

DatasetInfo dataset_info(hid_t dataset) {
  DatasetInfo info;
  Id space(H5Dget_space(dataset), H5Sclose);
  check(space.valid(), "its shape cannot be read: {}", hdf5_reason());
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check(rank >= 0 && rank <= H5S_MAX_RANK, "its shape cannot be read: {}", hdf5_reason());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank), 0);
  if (rank > 0) check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) == rank, "its shape cannot be read");
  for (hsize_t d : dims) {
    check(d <= hsize_t(std::numeric_limits<std::int64_t>::max()), "a dimension of {} is too large", d);
    info.shape.push_back(std::int64_t(d));
  }
  Id type(H5Dget_type(dataset), H5Tclose);
  check(type.valid(), "its type cannot be read: {}", hdf5_reason());
  info.type_class = H5Tget_class(type.get());
  // Keras stores bfloat16 variables with a "dtype" attribute saying so (saving_lib.H5IOStore).
  info.bfloat16 = H5Aexists(dataset, "dtype") > 0;
  return info;
}

class Reader {
 public:
  Reader(hid_t file, std::string origin) : file_(file), origin_(std::move(origin)) {}

  /// True when `<group>/vars/<index>` is a dataset of this shape holding floating-point values (integers
  /// when not `floating`); otherwise false, with the reason added to `problems`.
  bool check_variable(const std::string& group, std::size_t index, const Shape& shape, bool floating,
                      std::vector<std::string>& problems) const {
    const std::string path = vars_path(group) + "/" + std::to_string(index);
    Id dataset(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
    if (!dataset.valid()) {
      problems.push_back(fmt::format("'{}' cannot be opened: {}", path, hdf5_reason()));
      return false;
    }
    DatasetInfo info;
    try {
      info = dataset_info(dataset.get());
    } catch (const Error& e) {
      problems.push_back(fmt::format("'{}': {}", path, e.what()));
      return false;
    }
    const bool type_ok = floating ? info.type_class == H5T_FLOAT : info.type_class == H5T_INTEGER;
    if (info.bfloat16 || !type_ok) {
      problems.push_back(fmt::format("'{}' holds {}; expected {}", path,
                                     info.bfloat16 ? "bfloat16 values" : type_name(info.type_class),
                                     floating ? "floating-point values" : "an integer"));
      return false;
    }
    if (info.shape != shape) {
      problems.push_back(fmt::format("'{}' has shape {} in the file; the model's variable has shape {}", path,
                                     info.shape, shape));
      return false;
    }
    return true;
  }

  /// Reads `<group>/vars/<index>` into `out` (checked by check_variable), converting to its dtype.
  void read(const std::string& group, std::size_t index, Tensor& out) const {
    const std::string path = vars_path(group) + "/" + std::to_string(index);
    Id dataset(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
    void* bytes = out.dtype() == DType::f32   ? static_cast<void*>(out.data<float>())
                  : out.dtype() == DType::f64 ? static_cast<void*>(out.data<double>())
                                              : static_cast<void*>(out.data<std::int64_t>());
    const bool ok = dataset.valid() &&
                    (out.numel() == 0 ||
                     H5Dread(dataset.get(), native_type(out.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) >= 0);
    check(ok, "{}: reading '{}' failed: {}", origin_, path, hdf5_reason());
  }

 private:
  static std::string type_name(H5T_class_t c) {
    switch (c) {
      case H5T_INTEGER: return "integers";
      case H5T_FLOAT: return "floating-point values";
      case H5T_STRING: return "strings";
      default: return "values of a type loom does not read";
    }
  }

  hid_t file_;
  std::string origin_;
};

// Keras visits a layer's attributes sorted, private ones ("_softmax") last, and the layers of a list in order
// ("dense", "dense_1", ..., "dense_10"): the order a subclassed model's groups were written in.
std::tuple<bool, std::string, long long> component_key(const std::string& component) {
  const bool private_name = !component.empty() && component.front() == '_';
  const auto underscore = component.rfind('_');
  if (underscore != std::string::npos && underscore > 0 && underscore + 1 < component.size() &&
      component.size() - underscore <= 10 &&
      std::all_of(component.begin() + long(underscore) + 1, component.end(),
                  [](char c) { return c >= '0' && c <= '9'; }))
    return {private_name, component.substr(0, underscore), std::stoll(component.substr(underscore + 1)) + 1};
  return {private_name, component, 0};
}

bool keras_visit_order(const std::string& a, const std::string& b) {
  auto split = [](const std::string& path) {
    std::vector<std::tuple<bool, std::string, long long>> keys;
    std::size_t start = 0;
    while (start <= path.size()) {
      const auto slash = std::min(path.find('/', start), path.size());
      keys.push_back(component_key(path.substr(start, slash - start)));
      start = slash + 1;
    }
    return keys;
  };
  return split(a) < split(b);
}

/// A weight and the file variable it is loaded from.
struct Source {
  Variable variable;
  std::string group;
  std::size_t index;
};

/// Matches the file's groups to the layout, by path or (a subclassed model's fallback) by order, and checks
/// each matched variable; `sources` gets the matches, the result every problem.
std::vector<std::string> match_weights(const Reader& reader, const FileContents& contents,
                                       const std::vector<VariableGroup>& groups, bool by_order,
                                       std::vector<Source>& sources) {
  std::vector<std::string> problems;
  std::vector<std::pair<const VariableGroup*, std::string>> matched;  // layout group, file group
  if (!by_order) {
    std::set<std::string> expected;
    for (const auto& group : groups) {
      expected.insert(group.path);
      const auto it = contents.vars.find(group.path);
      const std::size_t in_file = it == contents.vars.end() ? 0 : it->second.size();
      if (in_file != group.variables.size())
        problems.push_back(fmt::format("{} (layer '{}') holds {} variable(s) in the file; the layer has {}",
                                       shown(group.path), group.name, in_file, group.variables.size()));
      else
        matched.emplace_back(&group, group.path);
    }
    for (const auto& [path, names] : contents.vars)
      if (path != "optimizer" && !expected.count(path))
        problems.push_back(fmt::format("'{}' in the file ({} variable(s)) matches no layer of the model", path,
                                       names.size()));
  } else {
    // Each of the model's layers takes the first group not taken yet, in Keras's visiting order, whose
    // variables have the layer's shapes (a list's layers are visited in order but keyed by class, so the
    // sorted names alone do not give the order).
    std::vector<std::string> file_groups;
    for (const auto& [path, names] : contents.vars)
      if (path != "optimizer") file_groups.push_back(path);
    std::sort(file_groups.begin(), file_groups.end(), keras_visit_order);
    std::vector<bool> taken(file_groups.size(), false);
    auto fits = [&](const VariableGroup& group, const std::string& file_group) {
      if (contents.vars.at(file_group).size() != group.variables.size()) return false;
      std::vector<std::string> ignored;
      for (std::size_t i = 0; i < group.variables.size(); ++i)
        if (!contents.vars.at(file_group).count(std::to_string(i)) ||
            !reader.check_variable(file_group, i, group.variables[i].shape(), true, ignored))
          return false;
      return true;
    };
    for (const auto& group : groups) {
      if (group.variables.empty()) continue;
      std::size_t g = 0;
      while (g < file_groups.size() && (taken[g] || !fits(group, file_groups[g]))) ++g;
      if (g == file_groups.size()) {
        problems.push_back(fmt::format("no group of the file left fits layer '{}' ({} variable(s))", group.name,
                                       group.variables.size()));
        continue;
      }
      taken[g] = true;
      matched.emplace_back(&group, file_groups[g]);
    }
    for (std::size_t g = 0; g < file_groups.size(); ++g)
      if (!taken[g]) problems.push_back(fmt::format("'{}' in the file fits no layer of the model", file_groups[g]));
  }
  for (const auto& [group, file_group] : matched) {
    if (group->variables.empty()) continue;
    const auto& names = contents.vars.at(file_group);
    for (std::size_t i = 0; i < group->variables.size(); ++i) {
      const Variable& var = group->variables[i];
      if (!names.count(std::to_string(i)))
        problems.push_back(fmt::format("'{}/{}' is missing", vars_path(file_group), i));
      else if (reader.check_variable(file_group, i, var.shape(), true, problems))
        sources.push_back({var, file_group, i});
    }
  }
  return problems;
}

/// The optimizer's state from the file, in loom's names (optim::Optimizer::state), and its learning rate
/// when the file has one; nothing when the file's variables do not fit (a problem then, for `required`).
struct OptimizerPlan {
  std::map<std::string, Tensor> state;
  std::optional<Tensor> learning_rate;
};

std::optional<OptimizerPlan> plan_optimizer(const Reader& reader, const FileContents& contents, const Model& model,
                                            bool required, std::vector<std::string>& problems) {
  const optim::Optimizer* optimizer = model.optimizer();
  if (optimizer == nullptr) {
    if (required) problems.push_back("include_optimizer needs a compiled model");
    return std::nullopt;
  }
  OptimizerLayout layout = optimizer_layout(model, *optimizer);
  const auto it = contents.vars.find("optimizer");
  const std::size_t in_file = it == contents.vars.end() ? 0 : it->second.size();
  // Keras writes the learning rate only when it is not a schedule: accept the file either way.
  const std::size_t slots = layout.slot_keys.size();
  const bool with_rate = in_file == slots + 2;
  if (in_file != slots + 1 && !with_rate) {
    if (required)
      problems.push_back(fmt::format("the file holds {} optimizer variable(s); the {} optimizer ({} over {} trainable "
                                     "weights) has {} (iterations, learning rate, then {})",
                                     in_file, optimizer->name(), fmt::join(optimizer->keras_slot_order(), " then "),
                                     layout.trainable.size(), slots + 2, fmt::join(layout.slot_keys, ", ")));
    return std::nullopt;
  }
  OptimizerPlan plan;
  std::size_t index = 0;
  const std::size_t problems_before = problems.size();
  auto take = [&](const Shape& shape, DType dtype, bool floating) -> std::optional<Tensor> {
    const std::size_t i = index++;
    if (!it->second.count(std::to_string(i))) {
      problems.push_back(fmt::format("'optimizer/vars/{}' is missing", i));
      return std::nullopt;
    }
    if (!reader.check_variable("optimizer", i, shape, floating, problems)) return std::nullopt;
    Tensor value = Tensor::empty(shape, dtype);
    reader.read("optimizer", i, value);
    return value;
  };
  if (auto iterations = take(Shape{}, DType::i64, false)) plan.state.emplace("iteration", *iterations);
  if (with_rate) plan.learning_rate = take(Shape{}, DType::f64, true);
  // The optimizer's own state for these weights gives each entry's shape and dtype.
  std::map<std::string, Tensor> expected;
  for (auto& [key, value] : optimizer->state(layout.trainable)) expected.emplace(key, value);
  for (const std::string& key : layout.slot_keys) {
    const Tensor& like = expected.at(key);
    if (auto value = take(like.shape(), like.dtype(), like.dtype() != DType::i64)) plan.state.emplace(key, *value);
  }
  if (problems.size() != problems_before) return std::nullopt;
  return plan;
}

void load_from(Model& model, hid_t file, const std::string& origin, OptimizerVariables optimizer_mode) {
  const std::string context = fmt::format("{}.load_weights: '{}'", model.name(), origin);
  check(model.built(), "{}: the model is not built; call it on data or start it with an Input", context);
  const FileContents contents = list_contents(file);
  const Reader reader(file, origin);
  const Layout layout(model);

  // Check everything first and report every problem at once; only then change anything.
  std::vector<Source> sources;
  std::vector<std::string> problems = match_weights(reader, contents, layout.groups(), false, sources);
  if (!problems.empty() && !is_sequential_or_functional(model)) {
    std::vector<Source> by_order;
    if (match_weights(reader, contents, layout.groups(), true, by_order).empty()) {
      problems.clear();
      sources = std::move(by_order);
    }
  }
  problems.insert(problems.begin(), contents.problems.begin(), contents.problems.end());
  std::optional<OptimizerPlan> optimizer;
  if (optimizer_mode != OptimizerVariables::ignore)
    optimizer = plan_optimizer(reader, contents, model, optimizer_mode == OptimizerVariables::load, problems);
  if (!problems.empty()) {
    std::string message = fmt::format("{} does not match the model ({} problem{}):", context, problems.size(),
                                      problems.size() == 1 ? "" : "s");
    for (const auto& p : problems) message += "\n  " + p;
    throw Error(message);
  }

  std::vector<Tensor> values;
  for (const Source& source : sources) {
    values.push_back(Tensor::empty(source.variable.shape(), source.variable.dtype()));
    reader.read(source.group, source.index, values.back());
  }
  if (optimizer) {
    optim::Optimizer& target = *model.optimizer();
    target.load_state(optimizer->state, optimizer_layout(model, target).trainable);  // validates before changing
    if (optimizer->learning_rate && !target.learning_rate_setting().is_schedule())
      target.set_learning_rate(optimizer->learning_rate->item<double>());
  }
  for (std::size_t i = 0; i < sources.size(); ++i) {
    Variable var = sources[i].variable;  // a handle: assigning through the copy sets the weight
    var.assign(values[i]);
  }
}

/// Opens an HDF5 file read-only, from a path or from bytes in memory.
Id open_file(const std::string& path, std::string_view image, const std::string& context) {
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  check(fapl.valid(), "{}: setting up the HDF5 library failed: {}", context, hdf5_reason());
  std::string name = path;
  if (path.empty()) {
    check(H5Pset_fapl_core(fapl.get(), 1 << 20, false) >= 0 &&
              H5Pset_file_image(fapl.get(), const_cast<char*>(image.data()), image.size()) >= 0,
          "{}: setting up an in-memory file failed: {}", context, hdf5_reason());
    name = memory_file_name();
  } else {
    // stat, not open: opening a FIFO would wait for a writer.
    std::error_code ec;
    check(std::filesystem::is_regular_file(path, ec), "{}: cannot open the file: {}", context,
          std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  }
  Id file(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  check(file.valid(), "{}: not a readable HDF5 file: {}", context, hdf5_reason());
  return file;
}

}  // namespace

bool is_keras_weights_path(std::string_view path) { return path.ends_with(".weights.h5"); }

std::string keras_weights_file_image(const Model& model, bool include_optimizer) {
  const std::string context = fmt::format("{}.save_weights (.weights.h5)", model.name());
  check(model.built(), "{}: the model is not built; call it on data or start it with an Input", context);
  const optim::Optimizer* optimizer = model.optimizer();
  check(!include_optimizer || optimizer != nullptr, "{}: include_optimizer needs a compiled model", context);
  const Layout layout(model);

  auto lock = lock_hdf5();
  Writer writer(context);
  for (const auto& group : layout.groups()) {
    std::vector<Tensor> values;
    for (const Variable& var : group.variables) values.push_back(var.value());
    writer.write_group(group.path, group.name, values);
  }
  if (include_optimizer) {
    const OptimizerLayout variables = optimizer_layout(model, *optimizer);
    std::map<std::string, Tensor> state;
    for (auto& [key, value] : optimizer->state(variables.trainable)) state.emplace(key, value);
    const std::int64_t iterations = state.at("iteration").item<std::int64_t>();
    check(iterations <= std::numeric_limits<std::int32_t>::max(),
          "{}: the optimizer took {} steps; Keras counts them in an int32", context, iterations);
    std::vector<Tensor> values{Tensor::from_vector(std::vector<std::int64_t>{iterations}, Shape{})};
    if (variables.has_learning_rate)
      values.push_back(Tensor::from_vector(std::vector<float>{float(optimizer->learning_rate())}, Shape{}));
    for (const std::string& key : variables.slot_keys) values.push_back(state.at(key));
    writer.write_group("optimizer", optimizer->name(), values);
  }
  return writer.image();
}

void save_keras_weights(const Model& model, const std::string& path, bool include_optimizer) {
  const std::string image = keras_weights_file_image(model, include_optimizer);
  io::write_file_atomically(fmt::format("{}.save_weights", model.name()), path, {image});
}

void load_keras_weights(Model& model, const std::string& path, OptimizerVariables optimizer) {
  auto lock = lock_hdf5();
  const Id file = open_file(path, {}, fmt::format("{}.load_weights: '{}'", model.name(), path));
  load_from(model, file.get(), path, optimizer);
}

void load_keras_weights_image(Model& model, std::string_view image, const std::string& origin,
                              OptimizerVariables optimizer) {
  auto lock = lock_hdf5();
  const Id file = open_file("", image, fmt::format("{}.load_weights: '{}'", model.name(), origin));
  load_from(model, file.get(), origin, optimizer);
}

}  // namespace loom::models
