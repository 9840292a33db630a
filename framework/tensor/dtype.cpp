#include "framework/tensor/dtype.hpp"

namespace loom {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::boolean: return 1;
    case DType::bf16: return 2;
  }
  return 0;
}

}  // namespace loom
