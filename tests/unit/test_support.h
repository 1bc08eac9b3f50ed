// Helpers shared by the unit and integration tests.
#pragma once

#include "engine/kernels/thread_pool.h"
#include "engine/model/model.h"
#include "storage/document_loader.h"
#include <optional>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spanscope::test {

/// Absolute path of the tests/ folder in the source tree.
std::string data_dir();
/// Path of the default real model if it is installed (same search as the CLI without --model),
/// std::nullopt otherwise. Tests that need it GTEST_SKIP() with a printed reason.
std::optional<std::string> real_model_path();
/// Path of SmolLM2-135M-Instruct (Q4_1 GGUF, byte-level BPE vocabulary) if installed:
/// $SPANSCOPE_SMOLLM2_MODEL when set, else spanscope/models/SmolLM2-135M-Instruct.Q4_1.gguf
/// in the XDG data directories (where `bash scripts/setup.sh model` puts it), as the default
/// model is found; std::nullopt otherwise (tests GTEST_SKIP() with a printed reason).
std::optional<std::string> smollm2_model_path();
/// Varied prose of at least min_bytes bytes: sentences from a word list (fixed by seed),
/// paragraphs separated by blank lines. ~1 token per byte with the tiny models' vocabulary.
std::string sample_prose(uint32_t seed, size_t min_bytes);
/// A loaded UTF-8 plain-text document holding `text` (one offset anchor), as the loaders make.
LoadedDocument text_document(const std::string& text);
/// The whole content of a file ("" if it cannot be read).
std::string read_file(const std::string& path);
/// n token ids: BOS (2) then ids drawn uniformly from [6, vocab) (past the tiny models'
/// special pieces), fixed by seed.
std::vector<int32_t> random_tokens(int n, int vocab, uint64_t seed);
/// max_i |v[i]|; 0 for an empty vector.
float max_abs(const std::vector<float>& v);
/// max_i |a[i] - b[i]|; infinity when the sizes differ or both are empty.
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
/// The bytes of a base64 text (RFC 4648 alphabet; '=' padding and other characters skipped), as
/// the reference fixtures store float32 logits.
std::vector<uint8_t> base64_decode(const std::string& s);
/// The bytes written as hex digits ("48690a" -> "Hi\n"), as the tokenizer fixtures store text.
std::string text_from_hex(const std::string& h);
/// Token ids as "[1 2 3]", for failure messages.
std::string ids_text(const std::vector<int32_t>& ids);
/// Next-token logits of every position of `tokens` (positions 0..n-1) prefilled from a fresh
/// memory of `m` (its new_memory) in ubatches of `ubatch` tokens: [n][n_vocab]. `memory`, when
/// given, receives the memory after the prefill.
std::vector<float> prefill_logits(const Model& m, const std::vector<int32_t>& tokens,
                                  int64_t ubatch, ThreadPool& pool, ModelMemory* memory = nullptr);
/// How far our logits are from a reference's (llama.cpp's), both [n_positions][n_vocab].
struct LogitsAgreement {
    float max_rel_gap = 0;   ///< max |ours - ref| / max |ref| (infinity when the sizes differ)
    int64_t argmax_same = 0; ///< positions whose largest logit is at the same id in both
};
/// Throws std::invalid_argument when `ref` does not hold n_positions × n_vocab logits.
LogitsAgreement compare_logits(const std::vector<float>& ours, const std::vector<float>& ref,
                               int64_t n_positions, int64_t n_vocab);
/// A fresh temporary directory (removed by the OS's /tmp policy; tests remove what they write).
std::string temp_dir();
/// A fresh temporary directory removed with everything in it at the end of its scope.
struct TempDir {
    std::string path = temp_dir();
    ~TempDir();
    TempDir() = default;
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return path + "/" + name; }
};
/// Writes `bytes` to `path` (binary, replacing it); false when that fails.
bool write_file(const std::string& path, const std::string& bytes);
/// The DocumentError message of load_document(path, options), or "" if it loaded.
std::string document_error(const std::string& path, const LoadOptions& options = {});
/// Expects load_document(path, options) refused in one line that starts with the path and
/// contains `what` (a gtest failure otherwise).
void expect_document_refused(const std::string& path, const std::string& what,
                             const LoadOptions& options = {});
/// stdout of a shell command; std::nullopt if it could not run or exited non-zero.
std::optional<std::string> run_command(const std::string& command);
/// Whether `name` is a program on $PATH.
bool have_program(const std::string& name);
/// Words for comparing a loader's text with a reference: maximal runs of letters and digits,
/// lower-cased. ASCII punctuation and markup are not words, nor are the symbols of
/// U+2000-U+2BFF (dashes, quotes, arrows, list bullets), U+3000-U+303F, the variation selectors
/// and U+00A0; other non-ASCII characters are letters.
std::vector<std::string> letter_words(const std::string& s);
/// Length of the longest common subsequence of two word sequences (the word agreement "in
/// order" of the document loaders' tests): two-row dynamic program, O(|a| |b|) time.
size_t lcs_length(const std::vector<std::string>& a, const std::vector<std::string>& b);

} // namespace spanscope::test
