// GGUF reader: a corruption corpus generated from small valid files, the committed seed corpus,
// and files written by gguf-py. Every case must end in GgufError, never a crash or another
// exception.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kernels/quant.h"
#include "gguf_test_util.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <system_error>

using namespace spanscope;
using spanscope::test::parse;
using spanscope::test::pattern;

namespace {

// ---------------------------------------------------------------------------------------------
// Raw byte builder: writes any bytes, valid or not, so each corruption is a precise edit.

struct Raw {
    std::vector<uint8_t> b;
    Raw& u8(uint8_t v) {
        b.push_back(v);
        return *this;
    }
    Raw& u32(uint32_t v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + 4);
        return *this;
    }
    Raw& u64(uint64_t v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + 8);
        return *this;
    }
    Raw& str(const std::string& s) {
        u64(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& bytes(const std::vector<uint8_t>& v) {
        b.insert(b.end(), v.begin(), v.end());
        return *this;
    }
    Raw& pad(size_t alignment) {
        b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
};

/// Encoded key/value: key, value type, payload.
std::vector<uint8_t> kv(const std::string& key, uint32_t type,
                        const std::vector<uint8_t>& payload) {
    Raw r;
    r.str(key).u32(type).bytes(payload);
    return r.b;
}
std::vector<uint8_t> kv_u32(const std::string& key, uint32_t v) {
    return kv(key, 4, Raw().u32(v).b);
}
std::vector<uint8_t> kv_str(const std::string& key, const std::string& v) {
    return kv(key, 8, Raw().str(v).b);
}

struct RawTensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    uint64_t offset = 0;
    std::optional<uint32_t> n_dims; ///< overrides ne.size()
};

struct RawFile {
    uint32_t version = 3;
    std::optional<uint64_t> tensor_count; ///< overrides tensors.size()
    std::optional<uint64_t> kv_count;     ///< overrides kvs.size()
    std::vector<std::vector<uint8_t>> kvs;
    std::vector<RawTensor> tensors;
    size_t alignment = 32;
    size_t data_bytes = 0; ///< zero-filled data section size (after the padding)

    std::vector<uint8_t> build() const {
        Raw r;
        r.b = {'G', 'G', 'U', 'F'};
        r.u32(version)
            .u64(tensor_count.value_or(tensors.size()))
            .u64(kv_count.value_or(kvs.size()));
        for (const auto& k : kvs)
            r.bytes(k);
        for (const auto& t : tensors) {
            r.str(t.name).u32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
            for (auto d : t.ne)
                r.u64(d);
            r.u32(t.type).u64(t.offset);
        }
        r.pad(alignment);
        r.b.resize(r.b.size() + data_bytes, 0);
        return r.b;
    }
};

/// A valid file with two f32 tensors: a [8] at 0 and b [4, 2] at 32; 64 data bytes.
RawFile small_valid() {
    RawFile f;
    f.kvs = {kv_str("general.architecture", "tiny"), kv_u32("tiny.block_count", 2)};
    f.tensors = {{"a", {8}, 0, 0, {}}, {"b", {4, 2}, 0, 32, {}}};
    f.data_bytes = 64;
    return f;
}

/// Parses and expects a GgufError whose message contains `needle`.
void expect_gguf_error(const std::vector<uint8_t>& b, const std::string& needle) {
    try {
        parse(b);
        ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const GgufError& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
            << "message: " << e.what() << "\nexpected to contain: " << needle;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception type: " << e.what();
    }
}

/// Parses a possibly-corrupt buffer: success or GgufError are fine, anything else fails.
/// On success touches every value and every tensor byte as the fuzz target does.
bool parse_or_gguf_error(const std::vector<uint8_t>& b, const std::string& what) {
    try {
        auto f = parse(b);
        size_t sum = 0;
        for (const auto& [k, v] : f->metadata())
            sum += k.size() + static_cast<size_t>(v.type);
        for (const auto& t : f->tensors()) {
            for (size_t i = 0; i < t.nbytes; ++i)
                sum += t.data[i];
            EXPECT_GE(t.data, b.data()) << what;
            EXPECT_LE(t.data + t.nbytes, b.data() + b.size()) << what;
        }
        (void)sum;
        return true;
    } catch (const GgufError&) {
        return false;
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": wrong exception type: " << e.what();
        return false;
    }
}
} // namespace

// ---------------------------------------------------------------------------------------------
// Corruption corpus: every case must end in GgufError (never a crash or another exception)

TEST(GgufCorrupt, SmallValidFileParses) {
    const auto b = small_valid().build();
    auto f = parse(b);
    ASSERT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->find_tensor("b")->nbytes, 32u);
    // The last tensor ends exactly at the end of the file, so every truncation is invalid.
    EXPECT_EQ(f->find_tensor("b")->data + 32, b.data() + b.size());
}

TEST(GgufCorrupt, EveryTruncationFails) {
    const auto b = small_valid().build();
    for (size_t n = 0; n < b.size(); ++n) {
        const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            parse(cut);
            ADD_FAILURE() << "truncation to " << n << " bytes parsed";
        } catch (const GgufError& e) {
            EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos)
                << n << ": " << e.what();
        }
    }
    // Also with a null pointer.
    EXPECT_THROW(GgufFile::from_memory(nullptr, 0), GgufError);
}

TEST(GgufCorrupt, BitFlipsInHeaderKvAndTensorInfo) {
    // Files written by the writer (with arrays of several types) and the raw small file.
    GgufWriter w(64);
    w.set_string("general.architecture", "tiny");
    w.set_string_array("tok", {"a", "bc"});
    w.set_float32_array("sc", {1, 2});
    w.set_bool("flag", true);
    w.add_tensor("q", TensorType::Q8_0, {32, 2}, pattern(68, 3));
    w.add_tensor("f", TensorType::F32, {16}, pattern(64, 9));
    for (const auto& base : {small_valid().build(), w.to_bytes()}) {
        const size_t header_end = static_cast<size_t>(parse(base)->tensors()[0].data - base.data());
        size_t ok = 0, rejected = 0;
        for (size_t i = 0; i < header_end; ++i) {
            for (int bit = 0; bit < 8; ++bit) {
                auto m = base;
                m[i] ^= static_cast<uint8_t>(1u << bit);
                (parse_or_gguf_error(m, "flip byte " + std::to_string(i) + " bit " +
                                            std::to_string(bit))
                     ? ok
                     : rejected)++;
            }
        }
        EXPECT_GT(rejected, header_end); // most flips in structure are caught
        (void)ok;
    }
}

TEST(GgufCorrupt, RandomOverwrites) {
    const auto base = small_valid().build();
    std::mt19937_64 rng(12345);
    const uint8_t specials[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0x20};
    for (int iter = 0; iter < 20000; ++iter) {
        auto m = base;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            const size_t at = rng() % 200 % m.size();
            const size_t len = 1 + rng() % 8;
            for (size_t k = 0; k < len && at + k < m.size(); ++k)
                m[at + k] =
                    rng() % 2 ? specials[rng() % sizeof(specials)] : static_cast<uint8_t>(rng());
        }
        if (rng() % 4 == 0)
            m.resize(rng() % m.size());
        parse_or_gguf_error(m, "iteration " + std::to_string(iter));
    }
}

TEST(GgufCorrupt, BadMagicAndVersions) {
    auto b = small_valid().build();
    b[0] = 'X';
    expect_gguf_error(b, "magic");
    for (uint32_t v : {0u, 1u, 4u, 0x03000000u, 0xffffffffu}) {
        auto f = small_valid();
        f.version = v;
        expect_gguf_error(f.build(), "unsupported version " + std::to_string(v));
    }
    auto big_endian = small_valid();
    big_endian.version = 0x03000000u;
    expect_gguf_error(big_endian.build(), "big-endian");
    auto v2 = small_valid();
    v2.version = 2;
    EXPECT_EQ(parse(v2.build())->version(), 2u);
}

TEST(GgufCorrupt, HugeCountsFailFast) {
    for (uint64_t n : {uint64_t{1} << 60, UINT64_MAX, uint64_t{1000}}) {
        auto f = small_valid();
        f.kv_count = n;
        expect_gguf_error(f.build(), "key/value count " + std::to_string(n));
        auto g = small_valid();
        g.tensor_count = n;
        expect_gguf_error(g.build(), "tensor count " + std::to_string(n));
    }
    // A count that fits the bound but not the actual entries still ends in "truncated".
    auto f = small_valid();
    f.kv_count = 3;
    expect_gguf_error(f.build(), "GGUF:");
}

TEST(GgufCorrupt, HugeStringAndArrayLengths) {
    {
        Raw key;
        key.u64(uint64_t{1} << 62).bytes({'a', 'b'});
        auto f = small_valid();
        f.kvs.insert(f.kvs.begin(), key.b);
        expect_gguf_error(f.build(), "truncated: key");
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv("s", 8, Raw().u64(UINT64_MAX).b));
        expect_gguf_error(f.build(), "string value of key 's'");
    }
    for (uint32_t elem : {0u, 6u, 8u, 10u}) {
        auto f = small_valid();
        f.kvs.push_back(kv("arr", 9, Raw().u32(elem).u64(uint64_t{1} << 61).b));
        expect_gguf_error(f.build(), "array length 2305843009213693952 of key 'arr'");
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv("arr", 9, Raw().u32(8).u64(2).str("ok").u64(1000).b));
        expect_gguf_error(f.build(), "truncated: array string of key 'arr'");
    }
    {
        auto f = small_valid();
        f.tensors[0].name = "";
        auto b = f.build();
        expect_gguf_error(b, "tensor name of length 0");
        auto g = small_valid();
        g.tensors[1].name = std::string(65, 't');
        expect_gguf_error(g.build(), "tensor name of length 65");
    }
}

TEST(GgufCorrupt, UnknownTypesAndNestedArrays) {
    {
        auto f = small_valid();
        f.kvs.push_back(kv("bad.type", 13, Raw().u32(0).b));
        expect_gguf_error(f.build(), "unknown value type 13 of key 'bad.type'");
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv("bad.elem", 9, Raw().u32(77).u64(0).b));
        expect_gguf_error(f.build(), "unknown array element type 77 of key 'bad.elem'");
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv("nested", 9, Raw().u32(9).u64(1).u32(4).u64(1).u32(5).b));
        expect_gguf_error(f.build(), "nested arrays are not supported of key 'nested'");
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv("b", 7, Raw().u8(2).b));
        expect_gguf_error(f.build(), "invalid bool value 2 of key 'b'");
    }
    for (uint32_t t : {4u, 5u, 16u, 29u, 31u, 1000u}) {
        auto f = small_valid();
        f.tensors[1].type = t;
        expect_gguf_error(f.build(), "unknown tensor type " + std::to_string(t) + " of tensor 'b'");
    }
}

TEST(GgufCorrupt, DuplicatesAndEmptyKeys) {
    {
        auto f = small_valid();
        f.kvs.push_back(kv_u32("tiny.block_count", 3));
        expect_gguf_error(f.build(), "duplicate key 'tiny.block_count'");
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv_u32("", 3));
        expect_gguf_error(f.build(), "empty key");
    }
    {
        auto f = small_valid();
        f.tensors[1].name = "a";
        expect_gguf_error(f.build(), "duplicate tensor name of tensor 'a'");
    }
}

TEST(GgufCorrupt, Alignment) {
    for (uint32_t a : {0u, 3u, 48u}) {
        auto f = small_valid();
        f.kvs.push_back(kv_u32("general.alignment", a));
        expect_gguf_error(f.build(), "'general.alignment' = " + std::to_string(a));
    }
    {
        auto f = small_valid();
        f.kvs.push_back(kv_str("general.alignment", "32"));
        expect_gguf_error(f.build(), "'general.alignment' must be an unsigned integer");
    }
    {
        // Alignment 64 moves the data start; tensor b at 32 is then misaligned.
        auto f = small_valid();
        f.kvs.push_back(kv_u32("general.alignment", 64));
        f.alignment = 64;
        expect_gguf_error(f.build(), "offset 32 of tensor 'b'");
    }
    {
        auto f = small_valid();
        f.tensors[1].offset = 36;
        expect_gguf_error(f.build(), "offset 36 of tensor 'b'");
    }
}

TEST(GgufCorrupt, DimsAndShapes) {
    for (uint32_t n : {0u, 5u, 0xffffffffu}) {
        auto f = small_valid();
        f.tensors[1].n_dims = n;
        expect_gguf_error(f.build(), "n_dims " + std::to_string(n) + " of tensor 'b'");
    }
    {
        auto f = small_valid();
        f.tensors[1].ne = {4, uint64_t{1} << 63};
        expect_gguf_error(f.build(), "negative");
    }
    {
        auto f = small_valid();
        f.tensors[1].ne = {uint64_t{1} << 32, uint64_t{1} << 32};
        expect_gguf_error(f.build(), "element count overflows int64 of tensor 'b'");
    }
    {
        auto f = small_valid();
        f.tensors[1].ne = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
        expect_gguf_error(f.build(), "element count overflows");
    }
    {
        // 2^62 f32 elements fit int64 but not size_t bytes.
        auto f = small_valid();
        f.tensors[1].ne = {uint64_t{1} << 62};
        expect_gguf_error(f.build(), "byte size overflows of tensor 'b'");
    }
    {
        auto f = small_valid();
        f.tensors[1].type = static_cast<uint32_t>(TensorType::Q8_0);
        f.tensors[1].ne = {33};
        expect_gguf_error(f.build(), "row length 33 of tensor 'b'");
    }
    {
        // Zero-size tensors are allowed, as in ggml.
        auto f = small_valid();
        f.tensors.push_back({"z", {0, 3}, 0, 64, {}});
        auto file = parse(f.build());
        EXPECT_EQ(file->find_tensor("z")->nbytes, 0u);
    }
}

TEST(GgufCorrupt, OffsetsOutOfRangeAndOverlapping) {
    {
        auto f = small_valid();
        f.tensors[1].offset = 64;
        expect_gguf_error(f.build(), "truncated: data of tensor 'b'");
    }
    {
        auto f = small_valid();
        f.tensors[1].offset = UINT64_MAX - 31; // aligned; offset + nbytes would wrap
        expect_gguf_error(f.build(), "truncated: data of tensor 'b'");
    }
    {
        auto f = small_valid();
        f.data_bytes = 63;
        expect_gguf_error(f.build(), "truncated");
    }
    {
        auto f = small_valid();
        f.tensors[1].offset = 0;
        expect_gguf_error(f.build(), "overlaps tensor");
    }
    {
        auto f = small_valid();
        f.tensors[0].ne = {9};
        expect_gguf_error(f.build(), "overlaps tensor 'a'");
    }
    {
        // Tensor infos present but the file ends before the data section.
        auto f = small_valid();
        f.data_bytes = 0;
        auto b = f.build();
        while (b.size() % 32 == 0)
            b.pop_back();
        expect_gguf_error(b, "truncated");
    }
}

TEST(GgufCorrupt, OpenErrorsNameThePath) {
    const auto dir = test::temp_dir();
    const auto missing = dir + "/missing.gguf";
    try {
        GgufFile::open(missing);
        ADD_FAILURE() << "opened a missing file";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
    EXPECT_THROW(GgufFile::open(dir), std::system_error);
    const auto empty = dir + "/empty.gguf";
    std::ofstream(empty).close();
    EXPECT_THROW(GgufFile::open(empty), GgufError);
    const auto bad = dir + "/bad.gguf";
    {
        auto b = small_valid().build();
        // Drop the last byte; pop_back, as resize(size - 1) trips a GCC 12 -Wstringop-overflow
        // false positive in this translation unit.
        b.pop_back();
        std::ofstream(bad, std::ios::binary)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    try {
        GgufFile::open(bad);
        ADD_FAILURE() << "opened a truncated file";
    } catch (const GgufError& e) {
        EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

TEST(GgufCorrupt, SeedCorpusFilesAreHandled) {
    // The fuzz seeds (tests/fuzz/corpus/gguf, written by gguf-py) are valid and must parse; the
    // committed corrupted files (bad-*.bin: truncations, bad version, magic and counts) must
    // fail with GgufError; any other file (a saved fuzz finding) must parse or fail cleanly.
    const auto dir = test::data_dir() + "/fuzz/corpus/gguf";
    ASSERT_TRUE(std::filesystem::exists(dir)) << "the committed corpus is missing: " << dir;
    size_t n = 0, bad = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::ifstream in(e.path(), std::ios::binary);
        std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), {});
        const bool ok = parse_or_gguf_error(b, e.path().string());
        if (e.path().extension() == ".gguf") {
            EXPECT_TRUE(ok) << e.path();
        }
        if (e.path().filename().string().rfind("bad-", 0) == 0) {
            EXPECT_FALSE(ok) << e.path() << " must be rejected";
            ++bad;
        }
        ++n;
    }
    EXPECT_GE(n, 12u);
    EXPECT_GE(bad, 8u);
}

TEST(GgufCorrupt, ReadsFilesWrittenByGgufPy) {
    // all_types.gguf comes from gguf-py's GGUFWriter (tests/fuzz/make_corpus.py): an
    // independent writer for every value type and four tensor types.
    const auto path = test::data_dir() + "/fuzz/corpus/gguf/all_types.gguf";
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->get_string("general.architecture"), "tiny");
    EXPECT_EQ(f->get_uint("t.u8"), 7u);
    EXPECT_EQ(f->get_int("t.i8"), -7);
    EXPECT_EQ(f->get_uint("t.u16"), 700u);
    EXPECT_EQ(f->get_int("t.i16"), -700);
    EXPECT_EQ(f->get_uint("t.u32"), 70000u);
    EXPECT_EQ(f->get_int("t.i32"), -70000);
    EXPECT_EQ(f->get_float("t.f32"), 0.5);
    EXPECT_TRUE(f->get_bool("t.bool"));
    EXPECT_EQ(f->get_string("t.str"), "hello");
    EXPECT_EQ(f->get_uint("t.u64"), uint64_t{1} << 40);
    EXPECT_EQ(f->get_int("t.i64"), -(int64_t{1} << 40));
    EXPECT_EQ(f->get_float("t.f64"), 0.25);
    EXPECT_EQ(f->get_string_array("a.str"), (std::vector<std::string>{"<pad>", "<eos>", "x"}));
    EXPECT_EQ(f->get_float_array("a.f32"), (std::vector<double>{0.0, -1.0, 2.5}));
    EXPECT_EQ(f->get_int_array("a.i32"), (std::vector<int64_t>{1, -2, 3}));
    EXPECT_EQ(std::get<std::vector<bool>>(f->metadata().at("a.bool").data),
              (std::vector<bool>{true, false}));
    ASSERT_EQ(f->tensors().size(), 4u);
    EXPECT_EQ(f->find_tensor("f16")->type, TensorType::F16);
    EXPECT_EQ(f->find_tensor("q8_0")->ne, (std::vector<int64_t>{32, 2}));
    EXPECT_EQ(f->find_tensor("q8_0")->nbytes, 68u);
    EXPECT_EQ(f->find_tensor("q4_K")->nbytes, 144u);
    EXPECT_EQ(f->find_tensor("q5_0.3d")->ne, (std::vector<int64_t>{32, 1, 2}));
    EXPECT_EQ(f->find_tensor("q5_0.3d")->nbytes, 44u);
    const uint16_t one_f16 = 0x3c00;
    for (int i = 0; i < 4; ++i)
        EXPECT_EQ(std::memcmp(f->find_tensor("f16")->data + 2 * i, &one_f16, 2), 0);
}
