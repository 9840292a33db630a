// Looking inside a MultiHeadAttention layer: one heatmap of attention weights per head.
//
//   ./build/examples/attention_heatmap [FOLDER]     writes FOLDER/attention_head_0.png, ... (default: .)
//
// Row i of a heatmap is query token i; its cells are how much that token attends to each key token (a row
// sums to 1). With the causal mask a token sees only itself and the tokens before it, so the upper triangle
// is zero. The layer is untrained: the patterns come from random weights, yet a repeated word ("the") has one
// embedding, so within a row each of its occurrences gets the same weight.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;

int main(int argc, char** argv) {
  const std::string folder = argc > 1 ? argv[1] : ".";
  random::set_seed(7);  // the same weights, hence the same pictures, on every run

  // A sentence as token ids: each distinct word gets the next id.
  const std::vector<std::string> words = {"the", "cat", "sat", "on", "the", "mat", "and", "the", "dog", "sat", "too", "."};
  std::map<std::string, std::int64_t> vocabulary;
  std::vector<std::int64_t> ids;
  for (const std::string& w : words) ids.push_back(vocabulary.emplace(w, std::int64_t(vocabulary.size())).first->second);
  const std::int64_t seq_len = std::int64_t(words.size());

  // Embed the tokens ([1, 12] -> [1, 12, 16]) and run self-attention over them, asking for the scores too.
  L::Embedding embed(std::int64_t(vocabulary.size()), 16,
                     {.embeddings_initializer = L::initializers::random_normal(0.0, 1.0)});
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 8});
  const Tensor x = embed(Tensor::from_vector(ids, Shape{1, seq_len}));
  const Tensor scores = mha.call_with_scores(x, x, {.use_causal_mask = true}).scores;  // [1, heads, 12, 12]

  for (std::int64_t head = 0; head < mha.num_heads(); ++head) {
    const std::string path = fmt::format("{}/attention_head_{}.png", folder, head);
    const Tensor weights = scores.slice(1, head, head + 1).reshape(Shape{seq_len, seq_len});
    io::save_heatmap_png(path, weights,
                         {.cell = 24, .vmin = 0.0, .vmax = 1.0, .row_labels = words, .col_labels = words,
                          .title = fmt::format("head {}", head)});
    fmt::print("{}\n", path);
  }
}
