// The chunk state blob (storage/chunk_state.h): round trip, the committed golden file of format
// version 1 (tests/README.md, failure mode 7), and every way a blob can be unusable — each flipped
// byte and each truncation is detected, and so is another model, another chunk or another shape.
#include "engine/kernels/fp16.h"
#include "storage/chunk_state.h"
#include "test_support.h"
#include "tests/state_patterns.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
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
    // failure mode 6 (tests/README.md): size = layers x tokens x kv heads x head dim x element size
    // (K and V), plus the surprisal, the layer index and the header.
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
    // A future format version (its header checksum made right, so the version is what is
    // refused) and a big-endian writer are refused before anything else.
    auto v2 = blob;
    v2[8] = 2;
    const uint64_t header_sum = XXH3_64bits(v2.data(), 88);
    std::memcpy(v2.data() + 88, &header_sum, sizeof header_sum);
    try {
        decode_chunk_state(v2.data(), v2.size(), expectation_of(s));
        ADD_FAILURE() << "format version 2 was read";
    } catch (const StateError& err) {
        EXPECT_NE(std::string(err.what()).find("format version 2"), std::string::npos)
            << err.what();
    }
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

// Kind 3 (recurrent states of a hybrid model's unit): a Mamba-2 layer, a Gated DeltaNet layer
// with its transition and one without, every value following from its index.
namespace {

ModelInfo hybrid_info() {
    ModelInfo info;
    info.n_layer = 4;
    info.layers.resize(4);
    auto& m = info.layers[0];
    m.kind = LayerKind::Mamba2;
    m.mamba2.d_model = 8;
    m.mamba2.n_heads = 2;
    m.mamba2.head_dim = 3;
    m.mamba2.d_inner = 6;
    m.mamba2.d_state = 4;
    m.mamba2.n_groups = 1;
    m.mamba2.d_conv = 4;
    for (const int il : {2, 3}) {
        auto& g = info.layers[static_cast<size_t>(il)];
        g.kind = LayerKind::GatedDeltaNet;
        g.gated_deltanet.d_model = 8;
        g.gated_deltanet.n_k_heads = 1;
        g.gated_deltanet.n_v_heads = 2;
        g.gated_deltanet.d_k = 3;
        g.gated_deltanet.d_v = 2;
        g.gated_deltanet.d_conv = 3;
    }
    return info; // layer 1 is attention
}

ChunkState recurrent_state() {
    ChunkState s;
    s.kind = StateKind::RecurrentStates;
    for (int i = 0; i < 16; ++i)
        s.fingerprint[i] = static_cast<uint8_t>(0xC0 + i);
    s.token_hash = token_ids_hash({2, 9, 8});
    s.n_rows = 40;
    s.recurrent = patterns::recurrent_layers(recurrent_layer_shapes(hybrid_info()), true);
    return s;
}

StateExpectation recurrent_expectation(const ChunkState& s) {
    StateExpectation e;
    e.kind = StateKind::RecurrentStates;
    e.fingerprint = s.fingerprint;
    e.token_hash = s.token_hash;
    e.n_rows = s.n_rows;
    e.recurrent = recurrent_layer_shapes(hybrid_info());
    return e;
}

void expect_same_recurrent(const ChunkState& a, const ChunkState& b) {
    ASSERT_EQ(a.recurrent.size(), b.recurrent.size());
    for (size_t i = 0; i < a.recurrent.size(); ++i) {
        const auto &x = a.recurrent[i], &y = b.recurrent[i];
        EXPECT_EQ(x.layer, y.layer);
        ASSERT_EQ(x.mamba2.has_value(), y.mamba2.has_value());
        if (x.mamba2) {
            EXPECT_EQ(x.mamba2->ssm, y.mamba2->ssm);
            EXPECT_EQ(x.mamba2->conv, y.mamba2->conv);
            EXPECT_EQ(x.mamba2->log_decay, y.mamba2->log_decay);
        } else {
            EXPECT_EQ(x.gated_deltanet->s, y.gated_deltanet->s);
            EXPECT_EQ(x.gated_deltanet->conv, y.gated_deltanet->conv);
            EXPECT_EQ(x.gated_deltanet->transition, y.gated_deltanet->transition);
        }
    }
    EXPECT_EQ(a.n_rows, b.n_rows);
}

} // namespace

TEST(ChunkState, RecurrentStatesRoundTripWithTheDocumentedSize) {
    const auto s = recurrent_state();
    const auto blob = encode_chunk_state(s);
    // Header, 3 layer indices padded to 16 bytes, 3 records of 24 bytes, then the floats:
    // Mamba-2 2·3·4 + 3·(6 + 2·4) + 2; Gated DeltaNet 2·2·3 + 2·(2·3 + 4) (+ 2·3·3).
    const size_t floats = (24 + 42 + 2) + (12 + 20 + 18) + (12 + 20);
    EXPECT_EQ(blob.size(), kChunkStateHeaderBytes + 16 + 3 * 24 + floats * 4);
    const auto back = decode_chunk_state(blob.data(), blob.size(), recurrent_expectation(s));
    expect_same_recurrent(s, back);
    EXPECT_TRUE(back.recurrent[1].gated_deltanet->tracks_transition());
    EXPECT_FALSE(back.recurrent[2].gated_deltanet->tracks_transition());
    EXPECT_EQ(encode_chunk_state(back), blob) << "save -> load -> save is byte-identical";
}

TEST(ChunkState, GoldenRecurrentFileOfVersion1StillReads) {
    const auto s = recurrent_state();
    const std::string path = data_dir() + "/fixtures/chunk_state_recurrent_v1.bin";
    if (std::getenv("SPANSCOPE_WRITE_GOLDEN")) {
        const auto blob = encode_chunk_state(s);
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(blob.data()),
                   static_cast<std::streamsize>(blob.size()));
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path;
    const std::vector<uint8_t> golden((std::istreambuf_iterator<char>(in)), {});
    expect_same_recurrent(
        s, decode_chunk_state(golden.data(), golden.size(), recurrent_expectation(s)));
    EXPECT_EQ(encode_chunk_state(s), golden) << "the writer still writes format version 1";
}

TEST(ChunkState, EveryDamageToARecurrentStateIsDetected) {
    const auto s = recurrent_state();
    const auto e = recurrent_expectation(s);
    auto blob = encode_chunk_state(s);
    for (size_t i = 0; i < blob.size(); ++i) {
        auto bad = blob;
        bad[i] ^= 0x10;
        EXPECT_THROW(decode_chunk_state(bad.data(), bad.size(), e), StateError) << "byte " << i;
    }
    for (size_t n = 0; n < blob.size(); ++n)
        EXPECT_THROW(decode_chunk_state(blob.data(), n, e), StateError) << n;
    auto longer = blob;
    longer.push_back(0);
    EXPECT_THROW(decode_chunk_state(longer.data(), longer.size(), e), StateError);
    // Other token ids and another model: refused with a reason.
    auto refuse = [&](const StateExpectation& x, const std::string& phrase) {
        try {
            decode_chunk_state(blob.data(), blob.size(), x);
            ADD_FAILURE() << "accepted; expected: " << phrase;
        } catch (const StateError& err) {
            EXPECT_NE(std::string(err.what()).find(phrase), std::string::npos) << err.what();
        }
    };
    auto other = e;
    other.token_hash = token_ids_hash({2, 9, 7});
    refuse(other, "other token ids");
    other = e;
    other.fingerprint[0] ^= 1;
    refuse(other, "another model");
    // Another model's shapes, another token count, another kind: refused.
    other = e;
    other.recurrent[0].state += 1;
    EXPECT_THROW(decode_chunk_state(blob.data(), blob.size(), other), StateError);
    other = e;
    other.recurrent[1].mamba2 = true;
    EXPECT_THROW(decode_chunk_state(blob.data(), blob.size(), other), StateError);
    other = e;
    other.recurrent[1].transition = 5; // a stored transition of another size
    EXPECT_THROW(decode_chunk_state(blob.data(), blob.size(), other), StateError);
    other = e;
    other.n_rows = 41;
    EXPECT_THROW(decode_chunk_state(blob.data(), blob.size(), other), StateError);
    other = e;
    other.recurrent.pop_back();
    EXPECT_THROW(decode_chunk_state(blob.data(), blob.size(), other), StateError);
    other = e;
    other.kind = StateKind::AttentionRows;
    try {
        decode_chunk_state(blob.data(), blob.size(), other);
        ADD_FAILURE() << "a recurrent state read as attention rows";
    } catch (const StateError& err) {
        EXPECT_NE(std::string(err.what()).find("kind 3"), std::string::npos) << err.what();
    }
    // The writer refuses a layer without a state.
    auto empty = s;
    empty.recurrent[0].mamba2.reset();
    EXPECT_THROW(encode_chunk_state(empty), std::invalid_argument);
}
