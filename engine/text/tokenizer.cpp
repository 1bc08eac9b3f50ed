#include "engine/text/tokenizer.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/text/bpe_tokenizer.h"
#include "engine/text/special_split.h"
#include "engine/text/text_input.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace spanscope {

namespace {

// GGUF token types (llama.cpp's llama_token_type) and SentencePiece piece types share values:
// 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// Minimal protobuf wire-format writer (https://protobuf.dev/programming-guides/encoding/).
struct ProtoWriter {
    std::string out;
    void varint(uint64_t v) {
        while (v >= 0x80) {
            out.push_back(static_cast<char>((v & 0x7f) | 0x80));
            v >>= 7;
        }
        out.push_back(static_cast<char>(v));
    }
    void tag(int field, int wire) { varint(static_cast<uint64_t>(field) << 3 | wire); }
    void int_field(int field, int64_t v) {
        tag(field, 0);
        varint(static_cast<uint64_t>(v));
    }
    void bool_field(int field, bool v) { int_field(field, v ? 1 : 0); }
    void bytes_field(int field, std::string_view s) {
        tag(field, 2);
        varint(s.size());
        out.append(s);
    }
    void float_field(int field, float f) {
        tag(field, 5);
        char b[4];
        std::memcpy(b, &f, 4);
        out.append(b, 4);
    }
};

const std::string kSpace = "\xe2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

/// `s` in quotes for a one-line message: bytes below 0x20, 0x7f, '\\' and '\'' as \xNN.
std::string quoted(const std::string& s) {
    std::string r = "'";
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f || c == '\\' || c == '\'') {
            static const char* const kHex = "0123456789abcdef";
            r += "\\x";
            r += kHex[u >> 4];
            r += kHex[u & 15];
        } else {
            r += c;
        }
    }
    return r + "'";
}

std::string respell_spaces(const std::string& s) {
    std::string r;
    for (char c : s) {
        if (c == ' ')
            r += kSpace;
        else
            r.push_back(c);
    }
    return r;
}

} // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf, TokenizerBuild build) {
    const std::string model = gguf.get_string("tokenizer.ggml.model");
    if (model == "gpt2") {
        std::unique_ptr<Tokenizer> tok(new Tokenizer());
        tok->bpe_ = BpeTokenizer::from_gguf(gguf);
        tok->bos_ = tok->bpe_->bos();
        tok->eos_ = tok->bpe_->eos();
        tok->unk_ = tok->bpe_->unk();
        tok->pad_ = tok->bpe_->pad();
        tok->end_of_turn_ = tok->bpe_->eot();
        tok->add_bos_ = tok->bpe_->add_bos();
        return tok;
    }
    if (model != "llama")
        throw std::runtime_error("unsupported tokenizer '" + model +
                                 "' (supported: tokenizer.ggml.model = llama (SentencePiece) "
                                 "and gpt2 (byte-level BPE))");
    std::unique_ptr<Tokenizer> tok(new Tokenizer());
    tok->pieces_ = gguf.get_string_array("tokenizer.ggml.tokens");
    const auto scores = gguf.get_float_array("tokenizer.ggml.scores");
    const auto types = gguf.get_int_array("tokenizer.ggml.token_type");
    const size_t n = tok->pieces_.size();
    if (n == 0 || scores.size() != n || types.size() != n)
        throw std::runtime_error("tokenizer arrays disagree: " + std::to_string(n) + " tokens, " +
                                 std::to_string(scores.size()) + " scores, " +
                                 std::to_string(types.size()) + " types");
    auto id_key = [&](const char* key, int32_t fallback) -> int32_t {
        if (!gguf.has(key))
            return fallback;
        const int64_t v = gguf.get_int(key);
        if (v < 0 || static_cast<size_t>(v) >= n)
            throw std::runtime_error(std::string(key) + " = " + std::to_string(v) +
                                     " is outside the vocabulary");
        return static_cast<int32_t>(v);
    };
    tok->bos_ = id_key("tokenizer.ggml.bos_token_id", -1);
    tok->eos_ = id_key("tokenizer.ggml.eos_token_id", -1);
    tok->unk_ = id_key("tokenizer.ggml.unknown_token_id", -1);
    tok->pad_ = id_key("tokenizer.ggml.padding_token_id", -1);
    if (tok->unk_ < 0)
        throw std::runtime_error("the vocabulary has no unknown token id");
    if (gguf.has("tokenizer.ggml.add_bos_token"))
        tok->add_bos_ = gguf.get_bool("tokenizer.ggml.add_bos_token");
    // llama.cpp's default for SentencePiece vocabularies is a space prefix (Llama 2, Mistral 7B
    // files omit the key or set it true); Gemma's files turn it off.
    tok->add_space_prefix_ = !gguf.has("tokenizer.ggml.add_space_prefix") ||
                             gguf.get_bool("tokenizer.ggml.add_space_prefix");

    tok->types_.resize(n);
    ProtoWriter proto;
    // SentencePiece's refusal of a repeated piece (ModelInterface::InitializePieces: "... is
    // already defined"), made here for both builds: two pieces of the same text as written in
    // the proto, among the normal and unused pieces or among the control, unknown and byte ones,
    // met in id order.
    std::unordered_map<std::string, size_t> seen_normal, seen_reserved;
    seen_normal.reserve(n);
    size_t first = 0, repeat = 0;
    for (size_t i = 0; i < n; ++i) {
        int32_t type = static_cast<int32_t>(types[i]);
        if (type < 1 || type > 6)
            type = kNormal;
        // SentencePiece needs exactly one UNKNOWN piece: the model's unknown id.
        if (static_cast<int32_t>(i) == tok->unk_)
            type = kUnknown;
        else if (type == kUnknown)
            type = kControl;
        tok->types_[i] = type;
        // User-defined pieces ("\n\n", runs of spaces) are matched in the raw text before
        // SentencePiece runs, as llama.cpp and Hugging Face tokenizers do, so that a literal
        // U+2581 in the text never becomes one of them. In the proto they are CONTROL pieces
        // (kept at their ids, never matched by SentencePiece), respelled with U+2581 so that
        // no two pieces collide after whitespace escaping.
        const int32_t proto_type = type == kUserDefined ? kControl : type;
        const std::string spelled =
            type == kUserDefined ? respell_spaces(tok->pieces_[i]) : tok->pieces_[i];
        const bool reserved = proto_type != kNormal && proto_type != kUnused;
        if (!spelled.empty() && repeat == 0) { // (an empty piece is SentencePiece's own refusal)
            const auto [at, fresh] =
                (reserved ? seen_reserved : seen_normal).try_emplace(spelled, i);
            if (!fresh) {
                first = at->second;
                repeat = i;
            }
        }
        ProtoWriter piece;
        piece.bytes_field(1, spelled);
        piece.float_field(2, static_cast<float>(scores[i]));
        piece.int_field(3, proto_type);
        proto.bytes_field(1, piece.out); // ModelProto.pieces
        if ((type == kControl || type == kUnknown || type == kUserDefined) &&
            !tok->pieces_[i].empty())
            tok->special_.push_back(
                {tok->pieces_[i], static_cast<int32_t>(i), type == kUserDefined});
    }
    // llama.cpp's tokenizer_st_partition order: longest special text first.
    std::stable_sort(tok->special_.begin(), tok->special_.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
    ProtoWriter trainer;                           // TrainerSpec
    trainer.int_field(3, 2);                       // model_type = BPE
    trainer.int_field(4, static_cast<int64_t>(n)); // vocab_size
    trainer.bool_field(35, true);                  // byte_fallback
    trainer.int_field(40, tok->unk_);              // unk_id
    trainer.int_field(41, tok->bos_);              // bos_id
    trainer.int_field(42, tok->eos_);              // eos_id
    trainer.int_field(43, tok->pad_);              // pad_id
    trainer.bytes_field(45, tok->pieces_[tok->unk_]);
    if (tok->bos_ >= 0)
        trainer.bytes_field(46, tok->pieces_[tok->bos_]);
    if (tok->eos_ >= 0)
        trainer.bytes_field(47, tok->pieces_[tok->eos_]);
    if (tok->pad_ >= 0)
        trainer.bytes_field(48, tok->pieces_[tok->pad_]);
    proto.bytes_field(2, trainer.out);
    ProtoWriter normalizer; // NormalizerSpec: identity, nothing added or removed
    normalizer.bytes_field(1, "identity");
    normalizer.bool_field(3, false); // add_dummy_prefix
    normalizer.bool_field(4, false); // remove_extra_whitespaces
    normalizer.bool_field(5, true);  // escape_whitespaces
    proto.bytes_field(3, normalizer.out);

    if (repeat > 0)
        throw std::runtime_error(
            "tokenizer.ggml.tokens repeats the piece " +
            quoted(tok->types_[repeat] == kUserDefined ? respell_spaces(tok->pieces_[repeat])
                                                       : tok->pieces_[repeat]) +
            " (ids " + std::to_string(first) + " and " + std::to_string(repeat) + ")");

    tok->end_of_turn_ = tok->find("<end_of_turn>");
    if (build == TokenizerBuild::VocabularyOnly)
        return tok; // SentencePiece's model takes most of the time (tokenizer.h)
    tok->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = tok->sp_->LoadFromSerializedProto(proto.out);
    if (!status.ok())
        throw std::runtime_error("SentencePiece rejected the vocabulary: " + status.ToString());
    return tok;
}

const std::string& Tokenizer::piece(int32_t id) const {
    return bpe_ ? bpe_->piece(id) : pieces_.at(static_cast<size_t>(id));
}

int32_t Tokenizer::n_vocab() const {
    return bpe_ ? bpe_->n_vocab() : static_cast<int32_t>(pieces_.size());
}

int32_t Tokenizer::find(std::string_view piece) const {
    if (bpe_)
        return bpe_->find(piece);
    // Called for a few special pieces per prompt: a scan beats building a 262 144-entry map
    // at every start.
    const auto it = std::find(pieces_.begin(), pieces_.end(), piece);
    return it == pieces_.end() ? -1 : static_cast<int32_t>(it - pieces_.begin());
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
    if (bpe_)
        return bpe_->is_end_of_generation(id);
    return id == eos_ || (end_of_turn_ >= 0 && id == end_of_turn_);
}

bool Tokenizer::is_control(int32_t id) const {
    if (bpe_)
        return bpe_->is_control(id);
    return id >= 0 && id < n_vocab() && (types_[id] == kControl || types_[id] == kUnknown);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special,
                                       TextStart start) const {
    if (bpe_)
        return bpe_->encode(text, parse_special);
    if (!sp_)
        throw std::logic_error("this tokenizer holds the vocabulary only (TokenizerBuild)");
    if (!is_valid_utf8(text))
        throw std::invalid_argument("text is not valid UTF-8");
    std::vector<int32_t> out;
    auto encode_plain = [&](std::string_view part) {
        if (part.empty())
            return;
        std::vector<int> ids;
        const auto status = sp_->Encode(part, &ids);
        if (!status.ok())
            throw std::runtime_error("SentencePiece failed to encode: " + status.ToString());
        out.insert(out.end(), ids.begin(), ids.end());
    };
    // Special pieces first (split_at_specials), then the text fragments. With a space prefix, a
    // text fragment that starts the sequence or follows a special piece gets a ' ' in front:
    // llama.cpp's tokenize_impl (llama-vocab.cpp, LLAMA_VOCAB_TYPE_SPM, is_prev_special), which
    // counts user-defined pieces ("\n\n" in Gemma's vocabulary) as special too.
    bool prev_special = start == TextStart::Fresh;
    const auto frags = split_at_specials(text, special_, parse_special);
    for (const auto& f : frags) {
        if (f.id >= 0) {
            out.push_back(f.id);
            prev_special = true;
        } else if (add_space_prefix_ && prev_special) {
            std::string spaced(1, ' '); // (GCC 12 warns falsely about " " + std::string)
            spaced.append(text.substr(f.begin, f.len));
            encode_plain(spaced);
            prev_special = false;
        } else {
            encode_plain(text.substr(f.begin, f.len));
            prev_special = false;
        }
    }
    return out;
}

TextStart Tokenizer::start_after(const std::vector<int32_t>& before) const {
    if (before.empty())
        return TextStart::Fresh;
    const int32_t last = before.back();
    if (bpe_)
        return bpe_->is_control(last) ? TextStart::Fresh : TextStart::Continues;
    // SentencePiece never yields a control, unknown (byte fallback instead) or user-defined
    // piece from text: such a last id came from a special piece.
    if (last < 0 || last >= n_vocab())
        throw std::out_of_range("token id " + std::to_string(last) + " outside the vocabulary");
    const int32_t type = types_[static_cast<size_t>(last)];
    return type == kControl || type == kUnknown || type == kUserDefined ? TextStart::Fresh
                                                                        : TextStart::Continues;
}

std::string Tokenizer::token_bytes(int32_t id) const {
    if (bpe_)
        return bpe_->token_bytes(id);
    if (id < 0 || id >= n_vocab())
        throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary");
    const int32_t type = types_[id];
    const std::string& p = pieces_[id];
    if (type == kControl || type == kUnknown)
        return "";
    if (type == kByte && p.size() == 6 && p.rfind("<0x", 0) == 0)
        return std::string(1, static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
    std::string r;
    for (size_t i = 0; i < p.size();) {
        if (p.compare(i, kSpace.size(), kSpace) == 0) {
            r.push_back(' ');
            i += kSpace.size();
        } else {
            r.push_back(p[i++]);
        }
    }
    return r;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
    if (bpe_)
        return bpe_->decode(ids, render_special);
    std::string r;
    // llama.cpp's detokenize drops the space prefix again: at most one leading space of the
    // first token (token_to_piece's lstrip), even when that token shows nothing.
    bool remove_space = add_space_prefix_;
    for (int32_t id : ids) {
        std::string piece = render_special && is_control(id) ? pieces_[id] : token_bytes(id);
        if (remove_space && !piece.empty() && piece[0] == ' ')
            piece.erase(0, 1);
        remove_space = false;
        r += piece;
    }
    return r;
}

std::string Utf8Streamer::push(const std::string& bytes) {
    pending_ += bytes;
    // Find the longest prefix that does not end inside a multi-byte sequence.
    size_t cut = pending_.size();
    for (size_t back = 1; back <= 4 && back <= pending_.size(); ++back) {
        const unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
        if ((c & 0xc0) == 0x80)
            continue; // continuation byte: keep looking for the lead byte
        int len = c < 0x80             ? 1
                  : (c & 0xe0) == 0xc0 ? 2
                  : (c & 0xf0) == 0xe0 ? 3
                  : (c & 0xf8) == 0xf0 ? 4
                                       : 1;
        if (static_cast<size_t>(len) > back)
            cut = pending_.size() - back;
        break;
    }
    std::string ready = pending_.substr(0, cut);
    pending_.erase(0, cut);
    return ready;
}

std::string Utf8Streamer::flush() {
    std::string r;
    if (!pending_.empty())
        r = is_valid_utf8(pending_) ? pending_ : std::string("\xef\xbf\xbd");
    pending_.clear();
    return r;
}

} // namespace spanscope
