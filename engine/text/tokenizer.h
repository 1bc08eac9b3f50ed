// The model's tokenizer rebuilt from a GGUF vocabulary (tokenizer.ggml.*), so that it encodes
// exactly like the model's own tokenizer. tokenizer.ggml.model chooses the kind: "llama" is
// SentencePiece (Gemma without a space prefix; Llama 2 and Mistral 7B with one): the ModelProto is
// serialised here (protobuf wire format, field numbers of sentencepiece_model.proto) and loaded by
// libsentencepiece; "gpt2" is byte-level BPE (Llama 3, Qwen 2, SmolLM2), served by BpeTokenizer
// (engine/text/bpe_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace spanscope {

class BpeTokenizer;
class GgufFile;

/// How much of a tokenizer Tokenizer::from_gguf builds.
enum class TokenizerBuild {
    Full,
    /// Every check of the vocabulary's metadata, the vocabulary itself (piece, find, the
    /// special ids, add_bos, decode), but no SentencePiece model: encode throws
    /// std::logic_error. A byte-level BPE vocabulary is built in full either way (its merges
    /// are checked against the vocabulary). What a model file's description needs
    /// (engine/model/model_summary.h), without the cost of building SentencePiece's model.
    VocabularyOnly
};

/// Where a text begins in the token sequence it is encoded into. A SentencePiece vocabulary
/// with a space prefix (tokenizer.ggml.add_space_prefix true or absent: Llama 2, Mistral 7B)
/// puts ' ' before every text fragment that begins the sequence or follows a special piece
/// (llama.cpp's tokenize_impl, llama-vocab.cpp: is_prev_special); so a text encoded apart that
/// continues the text before it says Continues, or it would get a space of its own. Other
/// vocabularies (Gemma's, byte-level BPE) encode the same either way.
enum class TextStart {
    Fresh,     ///< the sequence's start, or right after a special piece (control, user-defined)
    Continues, ///< right after ordinary tokens of the same sequence (text encoded before it)
};

class Tokenizer {
public:
    /// Build from the GGUF's tokenizer.ggml.{model,tokens,scores,token_type,*_token_id}.
    /// tokenizer.ggml.model "llama": SentencePiece; "gpt2": byte-level BPE (see
    /// BpeTokenizer::from_gguf for the keys it reads and what it refuses). Throws
    /// std::runtime_error naming the model if it is neither, or if the vocabulary is
    /// inconsistent (counts differ, ids out of range, no unknown piece for SentencePiece, a
    /// piece repeated as SentencePiece refuses it: "tokenizer.ggml.tokens repeats the piece
    /// 'x' (ids 5 and 9)", whichever the build); with TokenizerBuild::VocabularyOnly the same,
    /// except SentencePiece's other refusals of a vocabulary (with libsentencepiece 0.1.97: an
    /// empty piece, byte pieces that are not the 256 <0x00>..<0xFF>), which only building its
    /// model finds.
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf,
                                                TokenizerBuild build = TokenizerBuild::Full);
    ~Tokenizer();

    /// Token ids of `text` (UTF-8), without BOS. User-defined pieces ("\n\n", runs of spaces)
    /// are always matched in the raw text; with parse_special, the text of control tokens
    /// ("<start_of_turn>", "<|im_start|>", ...) becomes those tokens too (llama.cpp's
    /// parse_special), otherwise it is ordinary text. `start`: where the text stands in its
    /// sequence (TextStart; start_after says it for text appended to known tokens): with a
    /// space prefix, the parts of a text encoded apart give the ids of the whole text encoded
    /// at once only when each part after the first continues at a point that no vocabulary
    /// piece spans (after a newline, before a space, at a special piece). Throws
    /// std::invalid_argument on invalid UTF-8, std::logic_error for a tokenizer built
    /// VocabularyOnly.
    std::vector<int32_t> encode(std::string_view text, bool parse_special = false,
                                TextStart start = TextStart::Fresh) const;
    /// How a text appended after `before` starts: Fresh after nothing or a special piece (the
    /// last id is a control, unknown or user-defined token), Continues after ordinary tokens.
    /// Throws std::out_of_range for a last id outside the vocabulary.
    TextStart start_after(const std::vector<int32_t>& before) const;
    /// The bytes a token stands for ("▁" -> space (SentencePiece), "Ġ" -> space (BPE),
    /// <0xAB> -> byte 0xAB; control tokens -> ""). Throws std::out_of_range for a bad id.
    std::string token_bytes(int32_t id) const;
    /// Concatenated token_bytes (may end in an incomplete UTF-8 sequence); with
    /// render_special, control tokens appear as their text ("<start_of_turn>"). With a space
    /// prefix the first token loses one leading space, as in llama.cpp's detokenize ("▁Hello"
    /// alone decodes to "Hello"; after a BOS or any other token nothing is removed).
    std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;
    /// The vocabulary string of a token as stored in the model.
    const std::string& piece(int32_t id) const;
    /// Id of a vocabulary string, -1 if absent.
    int32_t find(std::string_view piece) const;

    int32_t n_vocab() const;
    int32_t bos() const { return bos_; }
    int32_t eos() const { return eos_; }
    int32_t unk() const { return unk_; }
    int32_t pad() const { return pad_; }
    bool add_bos() const { return add_bos_; }
    /// SentencePiece with tokenizer.ggml.add_space_prefix true or absent (see TextStart).
    bool add_space_prefix() const { return add_space_prefix_; }
    /// True for tokens that end generation (<eos>, <end_of_turn> where present; for BPE also
    /// the end-of-turn tokens llama.cpp recognises, such as <|im_end|> and <|endoftext|>).
    bool is_end_of_generation(int32_t id) const;
    bool is_control(int32_t id) const;

private:
    Tokenizer();
    std::unique_ptr<BpeTokenizer> bpe_; ///< set for "gpt2" vocabularies; the rest is unused then
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    std::vector<std::string> pieces_;
    std::vector<int32_t> types_;
    struct SpecialPiece {
        std::string text;
        int32_t id;
        bool always; ///< user-defined: matched even without parse_special
    };
    std::vector<SpecialPiece> special_; ///< longest text first
    int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1, end_of_turn_ = -1;
    bool add_bos_ = true;
    bool add_space_prefix_ = false;
};

/// Streams token bytes out as complete UTF-8 characters (a byte-fallback character spans
/// several tokens).
class Utf8Streamer {
public:
    /// Append bytes; returns the longest complete UTF-8 prefix of everything pending.
    std::string push(const std::string& bytes);
    /// Whatever is pending at the end (invalid tail bytes become U+FFFD).
    std::string flush();

private:
    std::string pending_;
};

} // namespace spanscope
