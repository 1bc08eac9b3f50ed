// Tiny Gemma-3-shaped models written by the tests themselves (random weights), so that the
// forward pass, the memories and the session run in milliseconds without the real file.
#pragma once

#include "tensor_type.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope::test {

struct TinyGemma3Config {
    int n_layer = 4;
    int n_embd = 64;
    int n_ff = 128;
    int n_head = 4;
    int n_head_kv = 2;
    int head_dim = 32;
    int n_ctx = 256;
    int sliding_window = 8;
    int sliding_pattern = 2; ///< written as gemma3.attention.sliding_window_pattern
    float rope_base = 1000000.0f;
    float rope_base_local = 10000.0f;
    bool write_local_base = true;             ///< write gemma3.rope.freq_base_swa
    bool write_pattern = true;                ///< write gemma3.attention.sliding_window_pattern
    TensorType matrix_type = TensorType::F32; ///< type of the projection matrices
    TensorType embd_type = TensorType::F32;
    uint64_t seed = 1;
    std::string architecture = "gemma3";
};

/// The vocabulary of every tiny model: <pad> <eos> <bos> <unk> <start_of_turn> <end_of_turn>,
/// "\n" (user-defined), 256 byte pieces, then "▁" and a few words. Size: tiny_vocab().size().
std::vector<std::string> tiny_vocab();

/// Write a tiny Gemma 3 GGUF to `path`. Weights ~ N(0, 0.02-ish), norms around 1.
void write_tiny_gemma3(const std::string& path, const TinyGemma3Config& cfg);

} // namespace spanscope::test
