// Byte-level BPE tokenizer (GPT-2 style) rebuilt from a GGUF vocabulary whose
// tokenizer.ggml.model is "gpt2" (Llama 3, Qwen 2, SmolLM2, GPT-2), encoding as llama.cpp's
// llm_tokenizer_bpe does: special-token partition of the raw text, the pre-tokenizer regular
// expressions named by tokenizer.ggml.pre (run with PCRE2, UTF + Unicode properties), GPT-2's
// byte-to-unicode mapping, then the ranked merges of tokenizer.ggml.merges within each word.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spanscope {

class GgufFile;

class BpeTokenizer {
public:
    /// Build from the GGUF's tokenizer.ggml.{model,pre,tokens,token_type,merges,*_token_id,
    /// add_bos_token}. tokenizer.ggml.pre chooses the pre-tokenizer: "llama-bpe", "llama3",
    /// "llama-v3" (Llama 3: digits in groups of up to three, whole-word vocabulary hits skip the
    /// merges, BOS added by default), "qwen2" (one digit per word), "smollm" (digits split off
    /// one by one, then GPT-2's expression), "gpt-2", and "default" (also used when the key is
    /// absent, as llama.cpp does). Throws std::runtime_error naming the problem when the model
    /// is not "gpt2", the pre-tokenizer is unknown, the token and token-type (or score) counts
    /// differ, a merge is malformed or names a piece that is not in the vocabulary, the BOS or
    /// EOS id is outside the vocabulary (an EOT, EOM, unknown or padding id outside it is left
    /// unset, as llama.cpp does), or add_bos_token is true without a BOS id. GgufError
    /// (a std::runtime_error) when a key has the wrong type.
    static std::unique_ptr<BpeTokenizer> from_gguf(const GgufFile& gguf);
    ~BpeTokenizer();
    BpeTokenizer(const BpeTokenizer&) = delete;
    BpeTokenizer& operator=(const BpeTokenizer&) = delete;

    /// Token ids of `text` (UTF-8), without BOS. User-defined tokens are always cut out of the
    /// raw text first; with parse_special, so are control tokens ("<|im_start|>"), longest
    /// text first (llama.cpp's tokenizer_st_partition); otherwise their text is ordinary text.
    /// Thread-safe. Throws std::invalid_argument on invalid UTF-8, std::runtime_error if PCRE2
    /// fails on a fragment.
    std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
    /// The bytes a token stands for: normal tokens through the inverse GPT-2 byte mapping
    /// ("Ġthe" -> " the"), user-defined tokens as their text, <0xNN> byte tokens as that byte,
    /// control, unknown and unused tokens as "" (as llama.cpp's token_to_piece with
    /// special=false). Throws std::out_of_range for an id outside the vocabulary.
    std::string token_bytes(int32_t id) const;
    /// Concatenated token_bytes (may end inside a UTF-8 sequence); with render_special,
    /// control and unknown tokens appear as their text ("<|im_end|>"). No space clean-up.
    std::string decode(const std::vector<int32_t>& ids, bool render_special) const;
    /// The vocabulary string of a token as stored in the model (byte-mapped: "Ġthe").
    const std::string& piece(int32_t id) const { return pieces_.at(static_cast<size_t>(id)); }
    /// Id of a vocabulary string, -1 if absent (the last id when a string repeats, as llama.cpp).
    int32_t find(std::string_view piece) const;

    int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
    int32_t bos() const { return bos_; }
    int32_t eos() const { return eos_; }
    /// End of turn ("<|im_end|>", "<|eot_id|>"): tokenizer.ggml.eot_token_id, else found by
    /// its text as llama.cpp does; -1 if none.
    int32_t eot() const { return eot_; }
    int32_t unk() const { return unk_; }
    int32_t pad() const { return pad_; }
    /// Whether a prompt starts with BOS: tokenizer.ggml.add_bos_token, else the pre-tokenizer's
    /// default (true for Llama 3, false otherwise, as llama.cpp).
    bool add_bos() const { return add_bos_; }
    const std::string& pre() const { return pre_; }
    /// EOS, EOT, EOM and the tokens llama.cpp recognises as ending generation by their text
    /// ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", ...).
    bool is_end_of_generation(int32_t id) const;
    /// Control or unknown token (never produced from text without parse_special).
    bool is_control(int32_t id) const;

    /// The GPT-2 byte-to-unicode mapping: the printable bytes '!'..'~', U+00A1..U+00AC and
    /// U+00AE..U+00FF stand for themselves, the other 68 bytes for U+0100, U+0101, ... in byte
    /// order (so ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A). Returns the UTF-8 of the code point.
    static std::string byte_to_unicode(uint8_t b);

private:
    BpeTokenizer();
    struct Regex;
    void pre_tokenize(std::string_view fragment, std::vector<std::string_view>& words) const;
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;
    int merge_rank(std::string_view left, std::string_view right) const;

    std::string pre_;
    std::vector<std::string> pieces_;
    std::vector<int32_t> types_;       ///< GGUF token types (1 normal, 3 control, ...)
    std::vector<std::string> decoded_; ///< token_bytes of each token, computed once
    std::unordered_map<std::string, int32_t> ids_;
    std::unordered_map<std::string, int> ranks_; ///< "left right" -> merge rank
    std::vector<std::unique_ptr<Regex>> regexes_;
    bool ignore_merges_ = false;
    struct SpecialPiece {
        std::string text;
        int32_t id;
        bool always; ///< user-defined: matched even without parse_special
    };
    std::vector<SpecialPiece> special_; ///< longest text first
    std::vector<int32_t> end_of_generation_;
    std::array<std::string, 256> byte_map_;
    int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1;
    bool add_bos_ = false;
};

} // namespace spanscope
