// The chunk state blob (storage/chunk_state.h): round trip, the committed golden file of format
// version 1 (KNOWN-FAILURES 7), and every way a blob can be unusable — each flipped byte and
// each truncation is detected, and so is another model, another chunk or another shape.
#include "chunk_state.h"
#include "fp16.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

using namespace spanscope;
using namespace spanscope::test;

namespace {

// A state whose every value follows from its index, so the golden file can be checked value by
// value.
ChunkState pattern_state() {
    ChunkState s;
    s.kind = StateKind::AttentionRows;
    for (int i = 0; i < 16; ++i)
        s.fingerprint[i] = static_cast<uint8_t>(0xA0 + i);
    s.token_hash = token_ids_hash({2, 17, 42, 7, 99});
    s.pos_begin = 11;
    s.n_rows = 5;
    s.n_kv_head = 2;
    s.head_dim = 4;
    for (const int layer : {1, 3, 5}) {
        LayerRows r;
        r.layer = layer;
        r.pos_begin = s.pos_begin;
        r.n_rows = s.n_rows;
        for (int i = 0; i < 5 * 2 * 4; ++i) {
            r.k.push_back(fp32_to_fp16(std::sin(0.1f * i + layer)));
            r.v.push_back(fp32_to_fp16(std::cos(0.2f * i - layer)));
        }
        s.layers.push_back(r);
    }
    s.surprisal = {NAN, 1.5f, 0.25f, 7.0f, 3.125f};
    return s;
}

StateExpectation expectation_of(const ChunkState& s) {
    StateExpectation e;
    e.kind = s.kind;
    e.fingerprint = s.fingerprint;
    e.token_hash = s.token_hash;
    e.pos_begin = s.pos_begin;
    e.n_rows = s.n_rows;
    for (const auto& l : s.layers)
        e.layers.push_back(l.layer);
    e.n_kv_head = s.n_kv_head;
    e.head_dim = s.head_dim;
    return e;
}

void expect_same(const ChunkState& a, const ChunkState& b) {
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) {
        EXPECT_EQ(a.layers[i].layer, b.layers[i].layer);
        EXPECT_EQ(a.layers[i].k, b.layers[i].k);
        EXPECT_EQ(a.layers[i].v, b.layers[i].v);
    }
    ASSERT_EQ(a.surprisal.size(), b.surprisal.size());
    for (size_t i = 0; i < a.surprisal.size(); ++i)
        EXPECT_TRUE(a.surprisal[i] == b.surprisal[i] ||
                    (std::isnan(a.surprisal[i]) && std::isnan(b.surprisal[i])));
    EXPECT_EQ(a.pos_begin, b.pos_begin);
    EXPECT_EQ(a.n_rows, b.n_rows);
}

std::string golden_path() {
    return data_dir() + "/fixtures/chunk_state_v1.bin";
}

} // namespace

TEST(ChunkState, RoundTripsAndSizeIsLayersTimesRowsTimesHeadsTimesDim) {
    const auto s = pattern_state();
    const auto blob = encode_chunk_state(s);
    // KNOWN-FAILURES 6: size = layers x tokens x kv heads x head dim x element size (K and V),
    // plus the surprisal, the layer index and the header.
    EXPECT_EQ(blob.size(), kChunkStateHeaderBytes + 16 + 3 * 2 * (5 * 2 * 4 * 2) + 5 * 4);
    const auto back = decode_chunk_state(blob.data(), blob.size(), expectation_of(s));
    expect_same(s, back);
    EXPECT_EQ(encode_chunk_state(back), blob) << "save -> load -> save is byte-identical";
}

TEST(ChunkState, GoldenFileOfVersion1StillReads) {
    const auto s = pattern_state();
    if (std::getenv("SPANSCOPE_WRITE_GOLDEN")) {
        const auto blob = encode_chunk_state(s);
        std::ofstream(golden_path(), std::ios::binary)
            .write(reinterpret_cast<const char*>(blob.data()),
                   static_cast<std::streamsize>(blob.size()));
    }
    std::ifstream in(golden_path(), std::ios::binary);
    ASSERT_TRUE(in) << golden_path();
    const std::vector<uint8_t> golden((std::istreambuf_iterator<char>(in)), {});
    const auto back = decode_chunk_state(golden.data(), golden.size(), expectation_of(s));
    expect_same(s, back);
    EXPECT_EQ(encode_chunk_state(s), golden) << "the writer still writes format version 1";
}

TEST(ChunkState, EveryFlippedByteIsDetected) {
    const auto s = pattern_state();
    const auto blob = encode_chunk_state(s);
    for (size_t i = 0; i < blob.size(); ++i) {
        auto bad = blob;
        bad[i] ^= 0x10;
        EXPECT_THROW(decode_chunk_state(bad.data(), bad.size(), expectation_of(s)), StateError)
            << "byte " << i;
    }
}

TEST(ChunkState, EveryTruncationAndExtensionIsDetected) {
    const auto s = pattern_state();
    auto blob = encode_chunk_state(s);
    for (size_t n = 0; n < blob.size(); ++n)
        EXPECT_THROW(decode_chunk_state(blob.data(), n, expectation_of(s)), StateError) << n;
    blob.push_back(0);
    EXPECT_THROW(decode_chunk_state(blob.data(), blob.size(), expectation_of(s)), StateError);
}

TEST(ChunkState, MismatchesAreRefusedWithAReason) {
    const auto s = pattern_state();
    const auto blob = encode_chunk_state(s);
    auto refuse = [&](StateExpectation e, const std::string& phrase) {
        try {
            decode_chunk_state(blob.data(), blob.size(), e);
            ADD_FAILURE() << "accepted; expected: " << phrase;
        } catch (const StateError& err) {
            EXPECT_NE(std::string(err.what()).find(phrase), std::string::npos) << err.what();
        }
    };
    auto e = expectation_of(s);
    e.fingerprint[3] ^= 1;
    refuse(e, "another model");
    e = expectation_of(s);
    e.token_hash = token_ids_hash({2, 17, 42, 7, 98});
    refuse(e, "other token ids");
    e = expectation_of(s);
    e.pos_begin = 12;
    refuse(e, "does not match");
    e = expectation_of(s);
    e.layers = {1, 3};
    refuse(e, "does not match");
    e = expectation_of(s);
    e.layers = {1, 3, 4};
    refuse(e, "layer");
    e = expectation_of(s);
    e.kind = StateKind::SlidingTail;
    refuse(e, "kind");
    // A future format version and a big-endian writer are refused before anything else.
    auto v2 = blob;
    v2[8] = 2;
    EXPECT_THROW(decode_chunk_state(v2.data(), v2.size(), expectation_of(s)), StateError);
    auto be = blob;
    std::swap(be[12], be[15]);
    std::swap(be[13], be[14]);
    try {
        decode_chunk_state(be.data(), be.size(), expectation_of(s));
        ADD_FAILURE();
    } catch (const StateError& err) {
        EXPECT_NE(std::string(err.what()).find("byte order"), std::string::npos);
    }
}
