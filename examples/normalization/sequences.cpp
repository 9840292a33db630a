#include "sequences.hpp"

#include <vector>

namespace normalization_study {

using namespace loom;

std::pair<Tensor, Tensor> marker_sequences(std::int64_t n, std::int64_t length, random::Generator& rng) {
  std::vector<std::int64_t> tokens, labels;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t marker = std::int64_t(rng.next() % std::uint64_t(length - 1));
    for (std::int64_t t = 0; t < length; ++t)
      tokens.push_back(t == marker ? 0 : 1 + std::int64_t(rng.next() % std::uint64_t(kSymbols)));
    labels.push_back(tokens[std::size_t(i * length + marker + 1)] - 1);
  }
  return {Tensor::from_vector(tokens, Shape{n, length}), Tensor::from_vector(labels, Shape{n})};
}

}  // namespace normalization_study
