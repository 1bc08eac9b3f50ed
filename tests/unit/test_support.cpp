#include "test_support.h"

#include "engine/model/model_locator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace spanscope::test {

std::string data_dir() {
    return SPANSCOPE_TEST_DATA;
}

std::optional<std::string> real_model_path() {
    auto found = locate_model("");
    if (found.path.empty())
        return std::nullopt;
    return found.path;
}

std::optional<std::string> smollm2_model_path() {
    if (const char* env = std::getenv("SPANSCOPE_SMOLLM2_MODEL"); env && *env)
        return std::filesystem::is_regular_file(env) ? std::optional<std::string>(env)
                                                     : std::nullopt;
    for (const auto& dir : xdg_data_dirs()) {
        const std::string p = dir + "/spanscope/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        std::error_code ec;
        if (std::filesystem::is_regular_file(p, ec))
            return p;
    }
    return std::nullopt;
}

std::string temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "spanscope-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
        throw std::runtime_error("mkdtemp failed");
    return tmpl;
}

std::string sample_prose(uint32_t seed, size_t min_bytes) {
    static const char* const kWords[] = {
        "river",  "stone",   "lantern", "harbour",   "winter",  "signal",  "garden",  "copper",
        "silent", "morning", "bridge",  "letter",    "orchard", "engine",  "window",  "marble",
        "quiet",  "field",   "north",   "ledger",    "candle",  "meadow",  "thunder", "paper",
        "cat",    "the",     "at",      "a",         "of",      "and",     "under",   "beside",
        "keeps",  "holds",   "carries", "remembers", "opens",   "follows", "counts",  "turns"};
    constexpr size_t kN = sizeof kWords / sizeof kWords[0];
    std::mt19937 rng(seed);
    auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
    std::string text;
    while (text.size() < min_bytes) {
        const size_t sentences = 1 + pick(3);
        for (size_t s = 0; s < sentences; ++s) {
            const size_t words = 4 + pick(8);
            for (size_t w = 0; w < words; ++w) {
                std::string word = kWords[pick(kN)];
                if (w == 0)
                    word[0] = static_cast<char>(word[0] - 'a' + 'A');
                text += word;
                text += w + 1 < words ? " " : (pick(5) == 0 ? "?" : ".");
            }
            text += s + 1 < sentences ? " " : "\n\n";
        }
    }
    return text;
}

LoadedDocument text_document(const std::string& text) {
    LoadedDocument d;
    d.text = text;
    d.source_encoding = "UTF-8";
    d.offset_map = {{0, 0, 0, 1}};
    return d;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<int32_t> random_tokens(int n, int vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> d(6, vocab - 1);
    std::vector<int32_t> t{2};
    while (static_cast<int>(t.size()) < n)
        t.push_back(d(rng));
    return t;
}

float max_abs(const std::vector<float>& v) {
    float m = 0;
    for (const float x : v)
        m = std::max(m, std::abs(x));
    return m;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || a.empty())
        return std::numeric_limits<float>::infinity(); // never "equal" by accident
    float m = 0;
    for (size_t i = 0; i < a.size(); ++i)
        m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

std::string text_from_hex(const std::string& h) {
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
        s.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return s;
}

std::string ids_text(const std::vector<int32_t>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i)
            s += ' ';
        s += std::to_string(ids[i]);
    }
    return s + "]";
}

std::vector<uint8_t> base64_decode(const std::string& s) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z')
            return c - 'A';
        if (c >= 'a' && c <= 'z')
            return c - 'a' + 26;
        if (c >= '0' && c <= '9')
            return c - '0' + 52;
        if (c == '+')
            return 62;
        if (c == '/')
            return 63;
        return -1;
    };
    std::vector<uint8_t> out;
    uint32_t acc = 0;
    int bits = 0;
    for (const char c : s) {
        const int v = val(c);
        if (v < 0)
            continue; // '=' padding
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
        }
    }
    return out;
}

std::vector<float> prefill_logits(const Model& m, const std::vector<int32_t>& tokens,
                                  int64_t ubatch, ThreadPool& pool, ModelMemory* memory) {
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t V = m.info().n_vocab;
    ModelMemory mem = m.new_memory(n, std::min(ubatch, n));
    std::vector<float> out(static_cast<size_t>(n * V));
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    for (int64_t b = 0; b < n; b += ubatch) {
        const int64_t e = std::min(n, b + ubatch);
        std::vector<int64_t> rows;
        for (int64_t i = 0; i < e - b; ++i)
            rows.push_back(i);
        m.forward(tokens.data() + b, pos.data() + b, e - b, mem, rows, out.data() + b * V, pool);
    }
    if (memory)
        *memory = std::move(mem);
    return out;
}

LogitsAgreement compare_logits(const std::vector<float>& ours, const std::vector<float>& ref,
                               int64_t n_positions, int64_t n_vocab) {
    if (n_positions < 0 || n_vocab < 1 || static_cast<int64_t>(ref.size()) != n_positions * n_vocab)
        throw std::invalid_argument("compare_logits: the reference holds " +
                                    std::to_string(ref.size()) + " logits, not " +
                                    std::to_string(n_positions) + " × " + std::to_string(n_vocab));
    LogitsAgreement a;
    float ref_max = 0.0f;
    for (const float x : ref)
        ref_max = std::max(ref_max, std::abs(x));
    a.max_rel_gap = max_abs_diff(ours, ref) / ref_max;
    if (ours.size() != ref.size())
        return a; // the gap is infinite; no position compares
    for (int64_t t = 0; t < n_positions; ++t) {
        const float* o = ours.data() + t * n_vocab;
        const float* r = ref.data() + t * n_vocab;
        a.argmax_same +=
            std::max_element(o, o + n_vocab) - o == std::max_element(r, r + n_vocab) - r;
    }
    return a;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

bool write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out.good();
}

std::string document_error(const std::string& path, const LoadOptions& options) {
    try {
        load_document(path, options);
    } catch (const DocumentError& e) {
        return e.what();
    }
    return "";
}

void expect_document_refused(const std::string& path, const std::string& what,
                             const LoadOptions& options) {
    const std::string msg = document_error(path, options);
    ASSERT_FALSE(msg.empty()) << path << " was loaded";
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected: " << what;
}

std::optional<std::string> run_command(const std::string& command) {
    FILE* p = popen(command.c_str(), "r");
    if (!p)
        return std::nullopt;
    std::string out;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    if (pclose(p) != 0)
        return std::nullopt;
    return out;
}

bool have_program(const std::string& name) {
    return run_command("command -v " + name + " >/dev/null 2>&1").has_value();
}

std::vector<std::string> letter_words(const std::string& s) {
    std::vector<std::string> out;
    std::string w;
    const auto end_word = [&] {
        if (!w.empty())
            out.push_back(w);
        w.clear();
    };
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
                w += static_cast<char>(c);
            else if (c >= 'A' && c <= 'Z')
                w += static_cast<char>(c - 'A' + 'a');
            else
                end_word();
            ++i;
            continue;
        }
        const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        uint32_t cp = c & (len == 4 ? 0x07 : len == 3 ? 0x0f : 0x1f);
        for (size_t k = 1; k < len && i + k < s.size(); ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
        const bool symbol = (cp >= 0x2000 && cp <= 0x2bff) || (cp >= 0x3000 && cp <= 0x303f) ||
                            (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xa0;
        if (symbol)
            end_word();
        else
            w.append(s, i, len);
        i += len;
    }
    end_word();
    return out;
}

size_t lcs_length(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
    for (size_t i = 1; i <= a.size(); ++i) {
        for (size_t j = 1; j <= b.size(); ++j)
            cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

} // namespace spanscope::test
