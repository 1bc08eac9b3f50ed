// The committed golden files of the SEKV state (format version 2; version 1 is refused by its
// version) and of the zoom trace (versions 1 and 2) still read, value by value (tests/README.md,
// failure mode 7); save -> load -> save of a SEKV state is byte-identical. Regenerate only for a
// new format version: SPANSCOPE_WRITE_GOLDEN=1 (it writes the current versions' files).
#include "storage/sekv_state.h"
#include "storage/zoom_trace_blob.h"
#include "test_support.h"
#include "tests/state_patterns.h"

#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace spanscope;
using namespace spanscope::test;

namespace {

Fingerprint pattern_fingerprint() {
    Fingerprint f{};
    for (int i = 0; i < 16; ++i)
        f[static_cast<size_t>(i)] = static_cast<uint8_t>(0xB0 + i);
    return f;
}

// Factors of fixed values (no decomposition: their bytes depend on the encoder alone), the right
// factor held as `right_type`.
SpanFactors pattern_factors_as(int64_t rows, int64_t dim, int rank, float phase,
                               TensorType right_type) {
    SpanFactors f;
    f.rows = rows;
    f.dim = dim;
    f.rank = rank;
    std::vector<float> left, right;
    for (int64_t i = 0; i < rows * rank; ++i)
        left.push_back(std::sin(0.3f * static_cast<float>(i) + phase));
    for (int64_t i = 0; i < rank * dim; ++i)
        right.push_back(std::cos(0.7f * static_cast<float>(i) - phase));
    f.left = to_f16(left.data(), rows * rank, "test");
    f.right_type = right_type;
    set_right_factor(f, right);
    return f;
}

SpanFactors pattern_factors(int64_t rows, int64_t dim, int rank, float phase) {
    // Head dimension 4: Q8_0's blocks of 32 do not fit.
    return pattern_factors_as(rows, dim, rank, phase, TensorType::F16);
}

// 12 tokens: anchors 0, 5, 11; spans [1, 5) and [6, 11); 2 KV heads of dim 4; layers 1 and 3.
SekvUnitState pattern_state() {
    return patterns::sekv_pattern_state(patterns::kSekvPatternKey, {1, 3}, 2, 4, pattern_factors);
}

SekvExpectation expectation() {
    return patterns::sekv_pattern_expectation(pattern_fingerprint());
}

StoredZoomTrace pattern_trace(bool with_mass = false) {
    return patterns::zoom_trace_pattern(with_mass);
}

std::vector<uint8_t> golden(const std::string& name, const std::vector<uint8_t>& fresh) {
    const std::string path = data_dir() + "/fixtures/" + name;
    if (std::getenv("SPANSCOPE_WRITE_GOLDEN"))
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(fresh.data()),
                   static_cast<std::streamsize>(fresh.size()));
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

} // namespace

TEST(SekvBlobs, AStateOfVersion1IsRefusedByItsVersion) {
    // Version 1 held fp32 summaries and factors; the project rebuilds such a state from the
    // chunk states (StateCache::sekv_state) after this refusal.
    std::ifstream in(data_dir() + "/fixtures/sekv_state_v1.bin", std::ios::binary);
    ASSERT_TRUE(in);
    const std::vector<uint8_t> v1((std::istreambuf_iterator<char>(in)), {});
    try {
        decode_sekv_state(v1.data(), v1.size(), expectation());
        ADD_FAILURE() << "a version 1 state was read";
    } catch (const StateError& e) {
        EXPECT_NE(std::string(e.what()).find("format version 1, expected 2"), std::string::npos)
            << e.what();
    }
}

TEST(SekvBlobs, GoldenSekvStateOfVersion2StillReads) {
    const auto s = pattern_state();
    const auto fresh = encode_sekv_state(s, pattern_fingerprint());
    const auto g = golden("sekv_state_v2.bin", fresh);
    const auto back = decode_sekv_state(g.data(), g.size(), expectation());
    EXPECT_EQ(back.alpha, 1.25);
    EXPECT_EQ(back.segmentation.threshold, 4.5);
    EXPECT_EQ(back.segmentation.anchors, s.segmentation.anchors);
    EXPECT_EQ(back.segmentation.full_resolution, s.segmentation.full_resolution);
    EXPECT_EQ(back.span_chars, s.span_chars);
    EXPECT_EQ(back.anchor_chars, s.anchor_chars);
    EXPECT_TRUE(std::isnan(back.token_surprisal[0]));
    EXPECT_EQ(back.token_surprisal[11], 5.5f);
    ASSERT_EQ(back.layers.size(), 2u);
    for (size_t l = 0; l < 2; ++l)
        for (size_t i = 0; i < 2; ++i) {
            const auto &a = back.layers[l].spans[i], &b = s.layers[l].spans[i];
            EXPECT_EQ(a.begin, b.begin);
            EXPECT_EQ(a.summary_k, b.summary_k);
            EXPECT_EQ(a.summary_v, b.summary_v);
            for (size_t g2 = 0; g2 < 2; ++g2) {
                EXPECT_EQ(a.k[g2].left, b.k[g2].left);
                EXPECT_EQ(a.v[g2].right, b.v[g2].right);
                EXPECT_EQ(a.v[g2].rank, 1);
            }
        }
    EXPECT_EQ(fresh, g) << "the writer still writes format version 2";
    EXPECT_EQ(encode_sekv_state(back, pattern_fingerprint()), g) << "save -> load -> save";
}

namespace {
void expect_same_trace(const StoredZoomTrace& back, const StoredZoomTrace& t) {
    EXPECT_EQ(back.trace.n_spans, 7);
    ASSERT_EQ(back.sources.size(), 2u);
    EXPECT_EQ(back.sources[1].document_id, 9);
    EXPECT_EQ(back.sources[1].offset, 12);
    EXPECT_EQ(back.tokens, t.tokens);
    EXPECT_EQ(back.token_texts, t.token_texts);
    ASSERT_EQ(back.trace.steps.size(), 3u);
    for (size_t s = 0; s < 3; ++s) {
        EXPECT_EQ(back.trace.steps[s].fast_tier_bytes, t.trace.steps[s].fast_tier_bytes);
        EXPECT_EQ(back.trace.steps[s].host_tier_bytes, t.trace.steps[s].host_tier_bytes);
        for (size_t l = 0; l < 2; ++l) {
            EXPECT_EQ(back.trace.steps[s].layers[l].layer, t.trace.steps[s].layers[l].layer);
            for (size_t h = 0; h < 2; ++h) {
                const auto &a = back.trace.steps[s].layers[l].heads[h],
                           &b = t.trace.steps[s].layers[l].heads[h];
                EXPECT_EQ(a.spans, b.spans);
                EXPECT_EQ(a.relevance, b.relevance);
                EXPECT_EQ(a.mass, b.mass);
            }
        }
    }
}
} // namespace

TEST(SekvBlobs, GoldenZoomTraceOfVersion1StillReadsWithoutMasses) {
    std::ifstream in(data_dir() + "/fixtures/zoom_trace_v1.bin", std::ios::binary);
    ASSERT_TRUE(in);
    const std::vector<uint8_t> g((std::istreambuf_iterator<char>(in)), {});
    expect_same_trace(decode_zoom_trace(g), pattern_trace(false));
}

TEST(SekvBlobs, GoldenZoomTraceOfVersion2StillReads) {
    const auto t = pattern_trace(true);
    // Compressed bytes may differ between zlib versions; what is read must not.
    const auto g = golden("zoom_trace_v2.bin", encode_zoom_trace(t));
    expect_same_trace(decode_zoom_trace(g), t);
    // A head with masses of another count than its spans is not written.
    auto bad = t;
    bad.trace.steps[0].layers[1].heads[0].mass.pop_back();
    EXPECT_THROW(encode_zoom_trace(bad), std::invalid_argument);
    // Nor a share outside [0, 1] (the reader refuses it too).
    for (const float m : {1.5f, -0.25f, NAN}) {
        auto odd = t;
        odd.trace.steps[0].layers[1].heads[0].mass[0] = m;
        EXPECT_THROW(encode_zoom_trace(odd), std::invalid_argument) << m;
        // Cleared, the head reads as not measured and the rest is saved as it was.
        EXPECT_EQ(clear_invalid_masses(odd.trace), 1) << m;
        EXPECT_TRUE(odd.trace.steps[0].layers[1].heads[0].mass.empty());
        auto expected = t;
        expected.trace.steps[0].layers[1].heads[0].mass.clear();
        expect_same_trace(decode_zoom_trace(encode_zoom_trace(odd)), expected);
    }
    EXPECT_EQ(clear_invalid_masses(bad.trace), 1);
    auto valid = t;
    EXPECT_EQ(clear_invalid_masses(valid.trace), 0);
    // A head's span ids are ascending and unique (ZoomHead): a trace that repeats one is refused.
    auto twice = t;
    auto& spans = twice.trace.steps[1].layers[0].heads[0].spans;
    spans[1] = spans[0];
    EXPECT_THROW(
        {
            try {
                decode_zoom_trace(encode_zoom_trace(twice));
            } catch (const std::runtime_error& e) {
                EXPECT_NE(std::string(e.what()).find("out of order or twice"), std::string::npos)
                    << e.what();
                throw;
            }
        },
        std::runtime_error);
}

TEST(SekvBlobs, EveryFlippedByteAndCutOfASekvStateIsRefused) {
    const auto blob = encode_sekv_state(pattern_state(), pattern_fingerprint());
    for (size_t i = 0; i < blob.size(); ++i) {
        auto bad = blob;
        bad[i] ^= 0x08;
        EXPECT_THROW(decode_sekv_state(bad.data(), bad.size(), expectation()), StateError)
            << "byte " << i;
    }
    for (size_t n = 0; n < blob.size(); n += 7)
        EXPECT_THROW(decode_sekv_state(blob.data(), n, expectation()), StateError) << n;
}

namespace {
// `blob` with `n` bytes at `offset` replaced by `bytes` and its checksum (the last 8 bytes)
// computed anew: a field only a faulty writer would write, which the reader must refuse itself.
std::vector<uint8_t> patched(const std::vector<uint8_t>& blob, size_t offset, const void* bytes,
                             size_t n) {
    auto bad = blob;
    std::memcpy(bad.data() + offset, bytes, n);
    const uint64_t h = XXH3_64bits(bad.data(), bad.size() - 8);
    std::memcpy(bad.data() + bad.size() - 8, &h, 8);
    return bad;
}

// That decoding `bad` throws a StateError whose message holds `what`.
void expect_refused_as(const std::vector<uint8_t>& bad, const SekvExpectation& e,
                       const std::string& what) {
    try {
        decode_sekv_state(bad.data(), bad.size(), e);
        ADD_FAILURE() << what << ": accepted";
    } catch (const StateError& err) {
        EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
    }
}
} // namespace

// Fields that are wrong although the checksum is right (written so by a faulty writer): the
// reader's own checks refuse them.
TEST(SekvBlobs, ImpossibleFieldsWithAValidChecksumAreRefused) {
    const auto fp = pattern_fingerprint();
    auto expect_refused = [&](const SekvUnitState& s, const char* what) {
        const auto blob = encode_sekv_state(s, fp);
        try {
            decode_sekv_state(blob.data(), blob.size(), expectation());
            ADD_FAILURE() << what << " was accepted";
        } catch (const StateError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    auto s = pattern_state();
    s.segmentation.anchors.back() = 12; // past the last token
    expect_refused(s, "anchor");
    s = pattern_state();
    std::swap(s.segmentation.spans[0], s.segmentation.spans[1]);
    for (auto& l : s.layers)
        std::swap(l.spans[0], l.spans[1]);
    expect_refused(s, "out of order");
    s = pattern_state();
    s.options_key = "other";
    expect_refused(s, "other options");
    // A right factor's type that is not F16 or Q8_0, or Q8_0 for a head dimension of 4 (its
    // blocks hold 32): the encoder writes neither, so the field is patched and re-hashed.
    auto blob = encode_sekv_state(pattern_state(), fp);
    const auto first = pattern_state().layers[0].spans[0].k[0];
    std::vector<uint8_t> record(8 + 2);
    const uint32_t rank = static_cast<uint32_t>(first.rank), f16 = 1;
    std::memcpy(record.data(), &rank, 4);
    std::memcpy(record.data() + 4, &f16, 4);
    std::memcpy(record.data() + 8, first.left.data(), 2);
    const auto at = std::search(blob.begin(), blob.end(), record.begin(), record.end());
    ASSERT_NE(at, blob.end()) << "the first factor record";
    const size_t record_at = static_cast<size_t>(at - blob.begin());
    // A rank above the span's rows (the encoder refuses to write it: patched).
    const uint32_t five = 5;
    expect_refused_as(patched(blob, record_at, &five, 4), expectation(), "rank");
    for (const uint32_t type : {8u, 2u})
        expect_refused_as(patched(blob, record_at + 4, &type, 4), expectation(),
                          "right factor of type");
    // A factor that is not finite (an f16 NaN, exponent bits all set) would poison every
    // softmax its span enters.
    const uint16_t nan = 0x7E00;
    expect_refused_as(patched(blob, record_at + 8, &nan, 2), expectation(), "not finite");
    // The encoder refuses factors whose bytes do not match their type, or a rank the reader
    // refuses for the span (so that no state is written only to be refused).
    auto wrong = pattern_state();
    wrong.layers[0].spans[0].k[0].right.pop_back();
    EXPECT_THROW(encode_sekv_state(wrong, fp), std::invalid_argument);
    auto high_rank = pattern_state();
    high_rank.layers[0].spans[0].k[0] = pattern_factors(4, 4, 5, 0.0f);
    EXPECT_THROW(encode_sekv_state(high_rank, fp), std::invalid_argument);
    auto other_rows = pattern_state();
    other_rows.layers[0].spans[0].k[0] = pattern_factors(5, 4, 1, 0.0f); // the span has 4 rows
    EXPECT_THROW(encode_sekv_state(other_rows, fp), std::invalid_argument);
}

namespace {
// An f16 value decoded by hand from its bits (IEEE 754 binary16), apart from the engine's
// conversion, for the Q8_0 layout check below.
double f16_by_hand(uint16_t h) {
    const int sign = h >> 15, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    const double m = exponent == 0 ? mantissa / 1024.0 : 1.0 + mantissa / 1024.0;
    const double v = std::ldexp(m, exponent == 0 ? -14 : exponent - 15);
    return sign ? -v : v;
}
} // namespace

// The default right factors, Q8_0, need a head dimension of a multiple of 32: a state of one
// KV head of 32 dimensions reads back value for value and writes the same bytes again. Its
// factors are fixed values, not a decomposition: LAPACK's last bits differ between CPUs and
// OpenBLAS's thread counts, and the committed bytes below are the encoder's alone.
TEST(SekvBlobs, AStateWithQ8RightFactorsRoundTrips) {
    std::vector<float> rows(static_cast<size_t>(6 * 32));
    for (size_t i = 0; i < rows.size(); ++i)
        rows[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
    ASSERT_EQ(low_rank_factors(rows.data(), 4, 32, 3, TensorType::Q8_0).right_type,
              TensorType::Q8_0);
    SekvUnitState s = pattern_state();
    for (auto& l : s.layers)
        for (size_t i = 0; i < l.spans.size(); ++i) {
            auto& sp = l.spans[i];
            const float phase = 0.5f * static_cast<float>(i);
            sp.summary_k.assign(32, 0.25f);
            sp.summary_v.assign(32, -0.5f);
            sp.k = {pattern_factors_as(sp.size, 32, 3, phase, TensorType::Q8_0)};
            sp.v = {pattern_factors_as(sp.size, 32, 2, phase + 1.0f, TensorType::Q8_0)};
        }
    auto e = expectation();
    e.n_kv_head = 1;
    e.head_dim = 32;
    const auto blob = encode_sekv_state(s, pattern_fingerprint());
    const auto back = decode_sekv_state(blob.data(), blob.size(), e);
    for (size_t l = 0; l < 2; ++l)
        for (size_t i = 0; i < 2; ++i) {
            const auto &a = back.layers[l].spans[i], &b = s.layers[l].spans[i];
            EXPECT_EQ(a.k[0].right_type, TensorType::Q8_0);
            EXPECT_EQ(a.k[0].right, b.k[0].right);
            EXPECT_EQ(a.v[0].left, b.v[0].left);
            EXPECT_EQ(a.k[0].right_f32(), b.k[0].right_f32());
        }
    EXPECT_EQ(encode_sekv_state(back, pattern_fingerprint()), blob);
    // The committed file of this state: the Q8_0 layout of format 2 does not change unnoticed.
    const auto g = golden("sekv_state_v2_q8.bin", blob);
    EXPECT_EQ(g, blob) << "the writer still writes Q8_0 factors of format version 2 so";
    // Its first right factor read by hand from the bytes, as ggml lays out Q8_0: per row of 32
    // values one block of an f16 scale d then 32 int8 q, value d · q.
    const auto& f = s.layers[0].spans[0].k[0];
    std::vector<uint8_t> record(8);
    const uint32_t rank = static_cast<uint32_t>(f.rank), q8 = 8;
    std::memcpy(record.data(), &rank, 4);
    std::memcpy(record.data() + 4, &q8, 4);
    record.insert(record.end(), reinterpret_cast<const uint8_t*>(f.left.data()),
                  reinterpret_cast<const uint8_t*>(f.left.data() + f.left.size()));
    const auto at = std::search(g.begin(), g.end(), record.begin(), record.end());
    ASSERT_NE(at, g.end()) << "the first factor record";
    const uint8_t* block = g.data() + (at - g.begin()) + record.size();
    const auto expected = f.right_f32();
    for (int r = 0; r < f.rank; ++r, block += 34) {
        uint16_t d = 0;
        std::memcpy(&d, block, 2);
        for (int j = 0; j < 32; ++j) {
            const auto q = static_cast<int8_t>(block[2 + j]);
            EXPECT_EQ(f16_by_hand(d) * q, expected[static_cast<size_t>(r * 32 + j)])
                << "row " << r << " value " << j;
        }
    }
    // A block scale that is not finite is refused like any other bad factor.
    const uint16_t inf = 0x7C00;
    const auto bad = patched(g, static_cast<size_t>(at - g.begin()) + record.size(), &inf, 2);
    EXPECT_THROW(decode_sekv_state(bad.data(), bad.size(), e), StateError);
}

// Every flipped byte (the size prefix, outside the checksum, included) is refused without a
// huge allocation — or, where deflate ignores the bit (padding, unused code lengths), decodes to
// the very same trace: a damaged trace is never read as another one.
TEST(SekvBlobs, ADamagedZoomTraceIsRefusedOrReadsTheSame) {
    const auto t = pattern_trace();
    const auto blob = encode_zoom_trace(t);
    int refused = 0;
    for (size_t i = 0; i < blob.size(); ++i) {
        auto bad = blob;
        bad[i] ^= 0x40;
        try {
            const auto back = decode_zoom_trace(bad);
            EXPECT_EQ(back.tokens, t.tokens) << "byte " << i;
            EXPECT_EQ(back.token_texts, t.token_texts) << "byte " << i;
            ASSERT_EQ(back.trace.steps.size(), t.trace.steps.size()) << "byte " << i;
            for (size_t s = 0; s < t.trace.steps.size(); ++s)
                EXPECT_EQ(back.trace.steps[s].layers[1].heads[1].spans,
                          t.trace.steps[s].layers[1].heads[1].spans);
        } catch (const std::runtime_error&) {
            ++refused;
        }
    }
    EXPECT_GT(refused, static_cast<int>(blob.size()) * 9 / 10);
}
