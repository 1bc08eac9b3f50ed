#include "storage/model_fingerprint.h"

#include <xxhash.h>

#include <cstdio>
#include <type_traits>

namespace spanscope {

namespace {

// Version of what a chunk state's numbers mean: bump when the engine computes K/V
// differently (precision, RoPE layout, forward-pass numerics that change stored rows).
// 2: prefill matrix products by the integer kernels (qgemm.h, int16 activations) instead of
// float sgemm. (PrefillProducts::Float, matmul.h, is a reference for tests and benchmarks, not a
// setting the programs that store states offer.)
// 3: RMSNorm's mean square summed in eight partial sums (ops.h) instead of one running sum, and
// the avx2 level's decode products of Q8_0 and Q5_0 rows by a row kernel (another summation order).
constexpr const char* kNumerics =
    "spanscope-kv-numerics-3:f16-rows:rope-neox:int16-products:rmsnorm-8-sums";

void update(XXH3_state_t* st, const void* p, size_t n) {
    XXH3_128bits_update(st, p, n);
}
void update_str(XXH3_state_t* st, const std::string& s) {
    const uint64_t n = s.size();
    update(st, &n, sizeof n);
    update(st, s.data(), s.size());
}
template <class T> void update_pod(XXH3_state_t* st, const T& v) {
    update(st, &v, sizeof v);
}

void update_value(XXH3_state_t* st, const GgufValue& v) {
    update_pod(st, static_cast<uint32_t>(v.type));
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
                update_str(st, x);
            } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                update_pod(st, static_cast<uint64_t>(x.size()));
                for (const auto& s : x)
                    update_str(st, s);
            } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
                update_pod(st, static_cast<uint64_t>(x.size()));
                for (const bool b : x)
                    update_pod(st, static_cast<uint8_t>(b));
            } else if constexpr (std::is_same_v<T, bool>) {
                update_pod(st, static_cast<uint8_t>(x));
            } else if constexpr (std::is_arithmetic_v<T>) {
                update_pod(st, x);
            } else {
                update_pod(st, static_cast<uint64_t>(x.size()));
                update(st, x.data(), x.size() * sizeof(x[0]));
            }
        },
        v.data);
}

// The unit header's format in the chunking key: Gemma's turns and plain text keep the names
// they were first stored under, so that projects made before the other formats stay valid.
std::string chunking_style(ChatFormat f) {
    switch (f) {
    case ChatFormat::Completion:
        return "text";
    case ChatFormat::Gemma:
        return "turns";
    default:
        return chat_format_name(f);
    }
}

std::string hex(const uint8_t* p, size_t n) {
    std::string s;
    char buf[3];
    for (size_t i = 0; i < n; ++i) {
        std::snprintf(buf, sizeof buf, "%02x", p[i]);
        s += buf;
    }
    return s;
}

// The 128-bit hash of the model file's contents (model_fingerprint's, less what `prefix` adds
// first).
Fingerprint file_hash(const Model& model, const std::string& prefix) {
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    if (!prefix.empty())
        update_str(st, prefix);
    const auto& g = model.gguf();
    update_pod(st, static_cast<uint64_t>(g.file_size()));
    for (const auto& [key, value] : g.metadata()) {
        update_str(st, key);
        update_value(st, value);
    }
    constexpr size_t kSample = 4096;
    for (const auto& t : g.tensors()) {
        update_str(st, t.name);
        update_pod(st, static_cast<uint32_t>(t.type));
        for (const auto d : t.ne)
            update_pod(st, d);
        update_pod(st, t.offset);
        const size_t n = std::min(kSample, t.nbytes);
        update(st, t.data, n);
        update(st, t.data + (t.nbytes - n) / 2, n);
        update(st, t.data + t.nbytes - n, n);
    }
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    Fingerprint f;
    std::copy(std::begin(c.digest), std::end(c.digest), f.begin());
    return f;
}

} // namespace

Fingerprint model_fingerprint(const Model& model) {
    return file_hash(model, kNumerics);
}

std::string model_identity_hex(const Model& model) {
    const Fingerprint f = file_hash(model, "");
    return hex(f.data(), f.size());
}

std::string fingerprint_hex(const Fingerprint& f) {
    return hex(f.data(), f.size());
}

std::string tokenizer_hash(const Model& model) {
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    for (const auto& [key, value] : model.gguf().metadata())
        if (key.rfind("tokenizer.", 0) == 0) {
            update_str(st, key);
            update_value(st, value);
        }
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, h.low64);
    return hex(c.digest, sizeof c.digest);
}

std::string chunking_key(const Model& model, const ChunkingOptions& o) {
    return "tok=" + tokenizer_hash(model) + ";chunk=" + std::to_string(o.target_tokens) +
           ";unit=" + std::to_string(o.max_unit_tokens) + ";style=" + chunking_style(o.chat_format);
}

} // namespace spanscope
