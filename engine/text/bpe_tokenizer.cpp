#include "engine/text/bpe_tokenizer.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/text/special_split.h"
#include "engine/text/text_input.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <queue>
#include <stdexcept>

namespace spanscope {

namespace {

// GGUF token types (llama.cpp's llama_token_type).
// Type 5 (unused) and anything else decode to nothing and are never matched in text.
constexpr int32_t kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4,
                  kByte = 6;

// The pre-tokenizer expressions, written for PCRE2 from the behaviour of llama.cpp's
// llm_tokenizer_bpe (each list is applied in order: every expression splits each piece left by
// the previous ones; text between matches stays a piece of its own).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 and Qwen 2 spell the case-insensitive contractions as explicit classes, as
// llama.cpp does.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreTokenizer {
    const char* name;
    std::vector<const char*> expressions;
    bool ignore_merges; ///< a word that is itself in the vocabulary is one token
    bool add_bos;       ///< default of tokenizer.ggml.add_bos_token
};

const std::vector<PreTokenizer>& pre_tokenizers() {
    static const std::vector<PreTokenizer> all = {
        {"llama-bpe", {kLlama3}, true, true},
        {"llama3", {kLlama3}, true, true},
        {"llama-v3", {kLlama3}, true, true},
        {"qwen2", {kQwen2}, false, false},
        {"smollm", {R"(\p{N})", kGpt2}, false, false},
        {"gpt-2", {kGpt2}, false, false},
        {"default",
         {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"},
         false,
         false},
    };
    return all;
}

// Tokens llama.cpp treats as end of turn / end of generation by their text.
constexpr const char* kEndOfTurnTexts[] = {"<|eot_id|>",    "<|im_end|>",        "<|end|>",
                                           "<end_of_turn>", "<|endoftext|>",     "<|end_of_text|>",
                                           "<EOT>",         "<end_of_utterance>"};
// llama.cpp also ends generation at the fill-in-the-middle pad, repository and file-separator
// tokens (so SmolLM2's "<reponame>" ends it).
constexpr const char* kEndOfGenerationTexts[] = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>",   "<end_of_turn>",   "<|endoftext|>",
    "<|eom_id|>",    "<EOT>",      "</s>",      "<|end_of_text|>", "<end_of_utterance>",
    "<|fim_pad|>",   "<fim-pad>",  "<fim_pad>", "<PAD>",           "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>",    "<reponame>",      "<|file_sep|>"};

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
        out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
}

// Length of the UTF-8 sequence starting with lead byte c (1 for a stray continuation byte).
size_t utf8_len(unsigned char c) {
    return c < 0x80             ? 1
           : (c & 0xe0) == 0xc0 ? 2
           : (c & 0xf0) == 0xe0 ? 3
           : (c & 0xf8) == 0xf0 ? 4
                                : 1;
}

// Decode one code point of valid UTF-8 at s[i], advancing i.
uint32_t next_code_point(std::string_view s, size_t& i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = std::min(utf8_len(c), s.size() - i);
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < n; ++k)
        cp = cp << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    i += n;
    return cp;
}

uint32_t gpt2_code_point(uint8_t b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    if (printable)
        return b;
    uint32_t n = 0; // rank of b among the non-printable bytes
    for (int x = 0; x < b; ++x) {
        const bool p = (x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
        if (!p)
            ++n;
    }
    return 256 + n;
}

std::string quoted(const std::string& s) {
    return "'" + s + "'";
}

} // namespace

struct BpeTokenizer::Regex {
    pcre2_code* code = nullptr;
    ~Regex() {
        if (code)
            pcre2_code_free(code);
    }
};

std::string BpeTokenizer::byte_to_unicode(uint8_t b) {
    std::string s;
    append_utf8(s, gpt2_code_point(b));
    return s;
}

BpeTokenizer::BpeTokenizer() = default;
BpeTokenizer::~BpeTokenizer() = default;

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_gguf(const GgufFile& gguf) {
    const std::string model = gguf.get_string("tokenizer.ggml.model");
    if (model != "gpt2")
        throw std::runtime_error("tokenizer.ggml.model is '" + model +
                                 "', not a byte-level BPE ('gpt2') vocabulary");
    std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer());
    tok->pre_ = gguf.has("tokenizer.ggml.pre") ? gguf.get_string("tokenizer.ggml.pre") : "default";
    const PreTokenizer* pre = nullptr;
    std::string known;
    for (const auto& p : pre_tokenizers()) {
        if (p.name == tok->pre_)
            pre = &p;
        known += std::string(known.empty() ? "" : ", ") + p.name;
    }
    if (!pre)
        throw std::runtime_error("unsupported BPE pre-tokenizer tokenizer.ggml.pre = '" +
                                 tok->pre_ + "' (supported: " + known + ")");
    tok->ignore_merges_ = pre->ignore_merges;
    tok->add_bos_ = pre->add_bos;
    for (const char* expr : pre->expressions) {
        auto re = std::make_unique<Regex>();
        int err = 0;
        PCRE2_SIZE at = 0;
        re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expr), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
        if (!re->code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            throw std::runtime_error("PCRE2 rejected the pre-tokenizer expression " +
                                     std::string(expr) + ": " + reinterpret_cast<const char*>(msg));
        }
        // JIT where PCRE2 has it (pcre2_match then uses it); the interpreter otherwise.
        pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
        tok->regexes_.push_back(std::move(re));
    }

    tok->pieces_ = gguf.get_string_array("tokenizer.ggml.tokens");
    const size_t n = tok->pieces_.size();
    if (n == 0)
        throw std::runtime_error("tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX))
        throw std::runtime_error("tokenizer.ggml.tokens has more than 2^31 - 1 tokens");
    tok->types_.assign(n, kNormal);
    if (gguf.has("tokenizer.ggml.token_type")) {
        const auto types = gguf.get_int_array("tokenizer.ggml.token_type");
        if (types.size() != n)
            throw std::runtime_error("tokenizer arrays disagree: " + std::to_string(n) +
                                     " tokens but " + std::to_string(types.size()) +
                                     " token types");
        for (size_t i = 0; i < n; ++i)
            tok->types_[i] = types[i] >= kNormal && types[i] <= kByte
                                 ? static_cast<int32_t>(types[i])
                                 : kUndefined;
    }
    // Scores play no part in BPE (the merges rank the pairs); a file that has them must still
    // agree with itself.
    if (gguf.has("tokenizer.ggml.scores")) {
        const size_t n_scores = gguf.get_float_array("tokenizer.ggml.scores").size();
        if (n_scores != n)
            throw std::runtime_error("tokenizer arrays disagree: " + std::to_string(n) +
                                     " tokens but " + std::to_string(n_scores) + " scores");
    }
    for (size_t i = 0; i < n; ++i) {
        if (tok->pieces_[i].empty()) // as llama.cpp: an empty piece gets a name nothing matches
            tok->pieces_[i] = "[EMPTY_" + std::to_string(i) + "]";
        tok->ids_[tok->pieces_[i]] = static_cast<int32_t>(i);
    }

    if (!gguf.has("tokenizer.ggml.merges"))
        throw std::runtime_error("a BPE vocabulary needs tokenizer.ggml.merges, which is absent");
    const auto& merges = gguf.get_string_array("tokenizer.ggml.merges");
    for (size_t r = 0; r < merges.size(); ++r) {
        const std::string& m = merges[r];
        const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
        const std::string where = "tokenizer.ggml.merges[" + std::to_string(r) + "] " + quoted(m);
        if (space == std::string::npos || space + 1 >= m.size())
            throw std::runtime_error(where + " is not two pieces separated by a space");
        const std::string left = m.substr(0, space), right = m.substr(space + 1);
        for (const std::string& p : {left, right, left + right})
            if (!tok->ids_.count(p))
                throw std::runtime_error(where + " names " + quoted(p) +
                                         ", which is not in the vocabulary");
        tok->ranks_.emplace(m, static_cast<int>(r)); // first rank wins, as llama.cpp
    }

    // BOS and EOS outside the vocabulary are refused; the optional ids (end of turn or
    // message, unknown, padding) are left unset, as llama.cpp does ("bad special token"): files
    // with a padding id one past the vocabulary exist.
    auto id_key = [&](const char* key, bool required) -> int32_t {
        if (!gguf.has(key))
            return -1;
        const int64_t v = gguf.get_int(key);
        if (v < 0 || static_cast<uint64_t>(v) >= n) {
            if (!required)
                return -1;
            throw std::runtime_error(std::string(key) + " = " + std::to_string(v) +
                                     " is outside the vocabulary of " + std::to_string(n) +
                                     " tokens");
        }
        return static_cast<int32_t>(v);
    };
    tok->bos_ = id_key("tokenizer.ggml.bos_token_id", true);
    tok->eos_ = id_key("tokenizer.ggml.eos_token_id", true);
    tok->eot_ = id_key("tokenizer.ggml.eot_token_id", false);
    tok->eom_ = id_key("tokenizer.ggml.eom_token_id", false);
    tok->unk_ = id_key("tokenizer.ggml.unknown_token_id", false);
    tok->pad_ = id_key("tokenizer.ggml.padding_token_id", false);
    if (gguf.has("tokenizer.ggml.add_bos_token"))
        tok->add_bos_ = gguf.get_bool("tokenizer.ggml.add_bos_token");
    if (tok->add_bos_ && tok->bos_ < 0)
        throw std::runtime_error("the vocabulary asks for a BOS token (tokenizer.ggml."
                                 "add_bos_token) but has no tokenizer.ggml.bos_token_id");

    // End of turn and end of generation by text where the file does not say, as llama.cpp;
    // tokens found by their text are control tokens even if the file types them otherwise.
    std::vector<int32_t> by_text;
    for (const char* t : kEndOfTurnTexts) {
        if (tok->eot_ >= 0)
            break;
        if ((tok->eot_ = tok->find(t)) >= 0)
            by_text.push_back(tok->eot_);
    }
    for (const char* t : kEndOfGenerationTexts)
        if (const int32_t id = tok->find(t); id >= 0)
            by_text.push_back(id);
    for (int32_t id : by_text)
        if (tok->types_[id] != kControl && tok->types_[id] != kUnknown)
            tok->types_[id] = kControl;
    for (int32_t id : {tok->eos_, tok->eot_, tok->eom_})
        if (id >= 0)
            tok->end_of_generation_.push_back(id);
    tok->end_of_generation_.insert(tok->end_of_generation_.end(), by_text.begin(), by_text.end());

    for (int b = 0; b < 256; ++b)
        tok->byte_map_[b] = byte_to_unicode(static_cast<uint8_t>(b));
    std::unordered_map<uint32_t, char> unicode_to_byte;
    for (int b = 0; b < 256; ++b)
        unicode_to_byte[gpt2_code_point(static_cast<uint8_t>(b))] = static_cast<char>(b);

    tok->decoded_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const std::string& p = tok->pieces_[i];
        const int32_t type = tok->types_[i];
        if (type == kUserDefined) {
            tok->decoded_[i] = p;
        } else if (type == kByte) { // "<0xNN>" is byte NN; a malformed byte piece gives ""
            const bool hex = p.size() == 6 && p.rfind("<0x", 0) == 0 && p[5] == '>' &&
                             std::isxdigit(static_cast<unsigned char>(p[3])) &&
                             std::isxdigit(static_cast<unsigned char>(p[4]));
            if (hex)
                tok->decoded_[i] =
                    std::string(1, static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
        } else if (type == kNormal) {
            // Code points outside the mapping (none in a well-formed vocabulary) pass through.
            std::string bytes;
            for (size_t k = 0; k < p.size();) {
                const size_t start = k;
                const uint32_t cp = next_code_point(p, k);
                if (const auto it = unicode_to_byte.find(cp); it != unicode_to_byte.end())
                    bytes.push_back(it->second);
                else
                    bytes.append(p, start, k - start);
            }
            tok->decoded_[i] = std::move(bytes);
        } // control, unknown, unused, undefined: ""
        // A special text that is not valid UTF-8 could only match inside a character of the
        // (valid) input; such pieces are left out of the partition.
        if ((type == kControl || type == kUnknown || type == kUserDefined) && is_valid_utf8(p))
            tok->special_.push_back({p, static_cast<int32_t>(i), type == kUserDefined});
    }
    // llama.cpp's tokenizer_st_partition order: longest special text first.
    std::stable_sort(tok->special_.begin(), tok->special_.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
    return tok;
}

int32_t BpeTokenizer::find(std::string_view piece) const {
    const auto it = ids_.find(std::string(piece));
    return it == ids_.end() ? -1 : it->second;
}

bool BpeTokenizer::is_end_of_generation(int32_t id) const {
    return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) !=
           end_of_generation_.end();
}

bool BpeTokenizer::is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() && (types_[id] == kControl || types_[id] == kUnknown);
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= n_vocab())
        throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary");
    return decoded_[id];
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
    std::string r;
    for (int32_t id : ids)
        r += render_special && is_control(id) ? pieces_.at(id) : token_bytes(id);
    return r;
}

int BpeTokenizer::merge_rank(std::string_view left, std::string_view right) const {
    std::string key;
    key.reserve(left.size() + right.size() + 1);
    key.append(left).push_back(' ');
    key.append(right);
    const auto it = ranks_.find(key);
    return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::pre_tokenize(std::string_view fragment,
                                std::vector<std::string_view>& words) const {
    words.assign(1, fragment);
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(nullptr,
                                                                           pcre2_match_data_free);
    std::vector<std::string_view> next;
    for (const auto& re : regexes_) {
        md.reset(pcre2_match_data_create_from_pattern(re->code, nullptr));
        if (!md)
            throw std::runtime_error("PCRE2 could not allocate match data");
        next.clear();
        for (std::string_view piece : words) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            size_t at = 0, kept = 0; // kept: end of the last piece emitted
            while (at < piece.size()) {
                // The text was checked once (encode) and pieces start and end on characters.
                int rc = pcre2_match(re->code, subject, piece.size(), at, PCRE2_NO_UTF_CHECK,
                                     md.get(), nullptr);
                if (rc == PCRE2_ERROR_NOMATCH)
                    break;
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT) // deep backtracking: the interpreter
                    rc = pcre2_match(re->code, subject, piece.size(), at,
                                     PCRE2_NO_JIT | PCRE2_NO_UTF_CHECK, md.get(), nullptr);
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    throw std::runtime_error(std::string("PCRE2 failed to pre-tokenize: ") +
                                             reinterpret_cast<const char*>(msg));
                }
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
                const size_t b = ov[0], e = ov[1];
                if (b > kept) // text no expression matched stays a piece of its own
                    next.push_back(piece.substr(kept, b - kept));
                if (e > b) {
                    next.push_back(piece.substr(b, e - b));
                    kept = at = e;
                } else { // an empty match (none of our expressions makes one): step a character
                    kept = b;
                    at = b + utf8_len(static_cast<unsigned char>(piece[b]));
                }
            }
            if (kept < piece.size())
                next.push_back(piece.substr(kept));
        }
        words.swap(next);
    }
}

void BpeTokenizer::encode_word(std::string_view raw, std::vector<int32_t>& out) const {
    std::string word;
    for (char c : raw)
        word += byte_map_[static_cast<unsigned char>(c)];
    if (ignore_merges_) {
        if (const int32_t id = find(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    // Symbols: one per character of the mapped word, linked in a list; merges are applied
    // lowest rank first, the leftmost pair first among equal ranks; a queued pair whose
    // symbols have changed since it was queued is dropped when it comes up.
    struct Symbol {
        size_t begin, len;
        int prev, next;
    };
    std::vector<Symbol> sym;
    for (size_t i = 0; i < word.size();) {
        const size_t len = std::min(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i);
        const int idx = static_cast<int>(sym.size());
        sym.push_back({i, len, idx - 1, i + len < word.size() ? idx + 1 : -1});
        i += len;
    }
    struct Pair {
        int rank, left, right;
        size_t len; // bytes of left + right when queued
        bool operator>(const Pair& o) const {
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> queue;
    auto text = [&](int i) { return std::string_view(word).substr(sym[i].begin, sym[i].len); };
    auto offer = [&](int l, int r) {
        if (l < 0 || r < 0)
            return;
        const int rank = merge_rank(text(l), text(r));
        if (rank >= 0)
            queue.push({rank, l, r, sym[l].len + sym[r].len});
    };
    for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i)
        offer(i, i + 1);
    while (!queue.empty()) {
        const Pair p = queue.top();
        queue.pop();
        Symbol& l = sym[p.left];
        if (l.len == 0 || l.next != p.right || sym[p.right].len == 0 ||
            l.len + sym[p.right].len != p.len)
            continue; // stale
        Symbol& r = sym[p.right];
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0)
            sym[r.next].prev = p.left;
        offer(l.prev, p.left);
        offer(p.left, l.next);
    }
    for (int i = 0; i >= 0 && !sym.empty(); i = sym[i].next) {
        const std::string_view s = text(i);
        if (const int32_t id = find(s); id >= 0) {
            out.push_back(id);
        } else { // as llama.cpp: each byte of the piece that is a token of its own
            for (char c : s)
                if (const int32_t b = find(std::string_view(&c, 1)); b >= 0)
                    out.push_back(b);
        }
    }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
    if (!is_valid_utf8(text))
        throw std::invalid_argument("text is not valid UTF-8");
    // Special pieces first (split_at_specials), then the text fragments.
    const auto frags = split_at_specials(text, special_, parse_special);
    std::vector<int32_t> out;
    std::vector<std::string_view> words;
    for (const auto& f : frags) {
        if (f.id >= 0) {
            out.push_back(f.id);
            continue;
        }
        pre_tokenize(text.substr(f.begin, f.len), words);
        for (std::string_view w : words)
            encode_word(w, out);
    }
    return out;
}

} // namespace spanscope
