#include "lab/evaluation/eval_corpus.h"

#include "engine/text/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace spanscope::eval {

// Counts of one tokenizer, by block text.
struct TokenCache {
    std::mutex mutex;
    std::unordered_map<std::string, int64_t> counts;
};

namespace {

// A tokenizer's identity: its vocabulary size, special ids and how it encodes a probe text
// (addresses are reused between tokenizers, so they cannot tell two apart).
uint64_t fingerprint(const Tokenizer& tok) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) {
        h ^= v;
        h *= 1099511628211ull;
    };
    mix(static_cast<uint64_t>(tok.n_vocab()));
    mix(static_cast<uint64_t>(tok.bos()));
    mix(static_cast<uint64_t>(tok.eos()));
    for (const int32_t id : tok.encode("The secret code for the copper tower is 40917.\n\n"
                                       "VAR QWXYZ = VAR ABCDE.\n  (c) 2007 Licensee's"))
        mix(static_cast<uint64_t>(id));
    return h;
}

bool blank_line(const std::string& text, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\f' &&
            text[i] != '\v')
            return false;
    return true;
}

} // namespace

struct TokenCaches {
    std::mutex mutex;
    std::map<uint64_t, std::shared_ptr<TokenCache>> by_tokenizer;
};

Corpus::Corpus() : token_caches(std::make_shared<TokenCaches>()) {}

Corpus::Corpus(std::vector<Paragraph> p, std::string q)
    : prose(std::move(p)), qa_set(std::move(q)), token_caches(std::make_shared<TokenCaches>()) {}

const std::vector<std::string>& licence_files() {
    // The ten of `spanscope-lab niah`, then the other distinct texts (GPL, LGPL and GFDL are
    // links to GPL-3, LGPL-3 and GFDL-1.3): about 240 KB, 55 000 Gemma tokens; longer contexts
    // wrap around and repeat paragraphs.
    static const std::vector<std::string> kFiles = {
        "/usr/share/common-licenses/GPL-3",    "/usr/share/common-licenses/GPL-2",
        "/usr/share/common-licenses/LGPL-2.1", "/usr/share/common-licenses/Apache-2.0",
        "/usr/share/common-licenses/MPL-2.0",  "/usr/share/common-licenses/GFDL-1.3",
        "/usr/share/common-licenses/Artistic", "/usr/share/common-licenses/LGPL-3",
        "/usr/share/common-licenses/CC0-1.0",  "/usr/share/common-licenses/GFDL-1.2",
        "/usr/share/common-licenses/GPL-1",    "/usr/share/common-licenses/LGPL-2",
        "/usr/share/common-licenses/MPL-1.1",  "/usr/share/common-licenses/BSD",
    };
    return kFiles;
}

std::vector<std::string> split_paragraphs(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    size_t b = 0;
    while (b < text.size()) {
        size_t e = text.find('\n', b);
        if (e == std::string::npos)
            e = text.size();
        if (blank_line(text, b, e)) {
            if (!cur.empty())
                out.push_back(cur);
            cur.clear();
        } else {
            if (!cur.empty())
                cur += '\n';
            cur.append(text, b, e - b);
            while (!cur.empty() && (cur.back() == ' ' || cur.back() == '\t' || cur.back() == '\r'))
                cur.pop_back();
        }
        b = e + 1;
    }
    if (!cur.empty())
        out.push_back(cur);
    return out;
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error(path + ": cannot be read");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Corpus load_corpus(const std::string& qa_set) {
    std::vector<Paragraph> prose;
    for (const auto& path : licence_files()) {
        std::ifstream probe(path);
        if (!probe)
            continue;
        // Canonical sources, so that qa's padding can leave out a document however it is named.
        const std::string source = std::filesystem::weakly_canonical(path).string();
        for (auto& p : split_paragraphs(read_text_file(path)))
            prose.push_back({std::move(p), source});
    }
    if (prose.size() < 50)
        throw std::runtime_error("the licence texts in /usr/share/common-licenses are missing "
                                 "(package base-files): " +
                                 std::to_string(prose.size()) + " paragraphs, 50 needed");
    return Corpus(std::move(prose), qa_set);
}

const std::string& noise_sentence() {
    static const std::string kNoise =
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
    return kNoise;
}

const std::string& haystack_separator(const std::string& haystack) {
    static const std::string kProse = "\n\n", kNoise = "\n";
    if (haystack == "prose")
        return kProse;
    if (haystack == "noise")
        return kNoise;
    throw std::invalid_argument("unknown haystack '" + haystack + "' (prose, noise)");
}

TokenCounter::TokenCounter(const Tokenizer& tok, const Corpus& corpus) : tok_(&tok) {
    const uint64_t key = fingerprint(tok);
    std::lock_guard lock(corpus.token_caches->mutex);
    auto& slot = corpus.token_caches->by_tokenizer[key];
    if (!slot)
        slot = std::make_shared<TokenCache>();
    cache_ = slot;
}

int64_t TokenCounter::cached(const std::string& block) const {
    TokenCache* cache = cache_.get();
    {
        std::lock_guard lock(cache->mutex);
        const auto it = cache->counts.find(block);
        if (it != cache->counts.end())
            return it->second;
    }
    const int64_t n = count(block); // outside the lock: other threads count other blocks
    std::lock_guard lock(cache->mutex);
    cache->counts.emplace(block, n);
    return n;
}

int64_t TokenCounter::count(const std::string& text) const {
    return static_cast<int64_t>(tok_->encode(text, false, TextStart::Continues).size());
}

} // namespace spanscope::eval
