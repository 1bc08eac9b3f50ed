// GGUF reader and writer: round trips of every value type, tensors of several types and shapes,
// atomic writes, and the writer's input checks.
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
#include <random>
#include <sys/stat.h>
#include <system_error>

using namespace spanscope;
using spanscope::test::parse;
using spanscope::test::pattern;

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(GgufRoundTrip, AllValueTypes) {
    GgufWriter w;
    w.set_value("t.u8", {GgufValueType::UInt8, GgufValueType::UInt8, uint64_t{255}});
    w.set_value("t.i8", {GgufValueType::Int8, GgufValueType::UInt8, int64_t{-128}});
    w.set_value("t.u16", {GgufValueType::UInt16, GgufValueType::UInt8, uint64_t{65535}});
    w.set_value("t.i16", {GgufValueType::Int16, GgufValueType::UInt8, int64_t{-32768}});
    w.set_uint32("t.u32", 4000000000u);
    w.set_int32("t.i32", -2000000000);
    w.set_float32("t.f32", 1.5e-6f);
    w.set_bool("t.bool", true);
    w.set_string("t.str", std::string("h\xc3\xa9llo\0x", 8));
    w.set_uint64("t.u64", UINT64_MAX);
    w.set_value("t.i64", {GgufValueType::Int64, GgufValueType::UInt8, int64_t{INT64_MIN}});
    w.set_value("t.f64", {GgufValueType::Float64, GgufValueType::UInt8, 3.141592653589793});
    w.set_string_array("a.str", {"", "x", "yz"});
    w.set_float32_array("a.f32", {0.5f, -2.0f});
    w.set_int32_array("a.i32", {1, -1, INT32_MAX});
    w.set_int32_array("a.empty", {});
    w.set_value("a.u64", {GgufValueType::Array, GgufValueType::UInt64,
                          std::vector<uint64_t>{0, UINT64_MAX}});
    w.set_value("a.u8", {GgufValueType::Array, GgufValueType::UInt8, std::vector<uint64_t>{1, 2}});
    w.set_value("a.bool",
                {GgufValueType::Array, GgufValueType::Bool, std::vector<bool>{true, false, true}});
    w.set_value("a.f64",
                {GgufValueType::Array, GgufValueType::Float64, std::vector<double>{1e300, -0.0}});
    w.set_value("a.i16", {GgufValueType::Array, GgufValueType::Int16, std::vector<int64_t>{-5, 5}});
    w.set_uint32("t.replaced", 1);
    w.set_uint32("t.replaced", 2);

    const auto bytes = w.to_bytes();
    auto f = parse(bytes);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_EQ(f->metadata().size(), 22u);

    EXPECT_EQ(f->get_uint("t.u8"), 255u);
    EXPECT_EQ(f->metadata().at("t.u8").type, GgufValueType::UInt8);
    EXPECT_EQ(f->get_int("t.i8"), -128);
    EXPECT_EQ(f->get_uint("t.u16"), 65535u);
    EXPECT_EQ(f->get_int("t.i16"), -32768);
    EXPECT_EQ(f->get_uint("t.u32"), 4000000000u);
    EXPECT_EQ(f->get_int("t.u32"), 4000000000);
    EXPECT_EQ(f->get_int("t.i32"), -2000000000);
    EXPECT_EQ(f->get_float("t.f32"), static_cast<double>(1.5e-6f));
    EXPECT_TRUE(f->get_bool("t.bool"));
    EXPECT_EQ(f->get_string("t.str"), std::string("h\xc3\xa9llo\0x", 8));
    EXPECT_EQ(f->get_uint("t.u64"), UINT64_MAX);
    EXPECT_EQ(f->get_int("t.i64"), INT64_MIN);
    EXPECT_EQ(f->get_float("t.f64"), 3.141592653589793);
    EXPECT_EQ(f->get_float("t.u32"), 4e9);
    EXPECT_EQ(f->get_uint("t.replaced"), 2u);

    EXPECT_EQ(f->get_string_array("a.str"), (std::vector<std::string>{"", "x", "yz"}));
    EXPECT_EQ(f->get_float_array("a.f32"), (std::vector<double>{0.5, -2.0}));
    EXPECT_EQ(f->get_int_array("a.i32"), (std::vector<int64_t>{1, -1, INT32_MAX}));
    EXPECT_EQ(f->get_float_array("a.i32"), (std::vector<double>{1, -1, INT32_MAX}));
    EXPECT_TRUE(f->get_int_array("a.empty").empty());
    EXPECT_EQ(f->metadata().at("a.empty").array_type, GgufValueType::Int32);
    EXPECT_EQ(std::get<std::vector<uint64_t>>(f->metadata().at("a.u64").data),
              (std::vector<uint64_t>{0, UINT64_MAX}));
    EXPECT_EQ(f->metadata().at("a.u64").array_type, GgufValueType::UInt64);
    EXPECT_EQ(f->get_int_array("a.u8"), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(std::get<std::vector<bool>>(f->metadata().at("a.bool").data),
              (std::vector<bool>{true, false, true}));
    EXPECT_EQ(f->get_float_array("a.f64"), (std::vector<double>{1e300, -0.0}));
    EXPECT_TRUE(std::signbit(f->get_float_array("a.f64")[1]));
    EXPECT_EQ(f->get_int_array("a.i16"), (std::vector<int64_t>{-5, 5}));

    // Writing back what was read reproduces every value exactly.
    GgufWriter w2;
    for (const auto& [key, v] : f->metadata())
        w2.set_value(key, v);
    auto f2 = parse(w2.to_bytes());
    ASSERT_EQ(f2->metadata().size(), f->metadata().size());
    for (const auto& [key, v] : f->metadata()) {
        const auto& v2 = f2->metadata().at(key);
        EXPECT_EQ(v2.type, v.type) << key;
        EXPECT_EQ(v2.data, v.data) << key;
        if (v.type == GgufValueType::Array) {
            EXPECT_EQ(v2.array_type, v.array_type) << key;
        }
    }
}

TEST(GgufRoundTrip, TypedGettersNameTheKey) {
    GgufWriter w;
    w.set_int32("neg", -1);
    w.set_string("s", "x");
    w.set_uint64("big", UINT64_MAX);
    w.set_value("a.big",
                {GgufValueType::Array, GgufValueType::UInt64, std::vector<uint64_t>{UINT64_MAX}});
    auto f = parse(w.to_bytes());
    auto throws_with = [](const std::function<void()>& fn, const std::string& needle) {
        try {
            fn();
            ADD_FAILURE() << "no error for " << needle;
        } catch (const GgufError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    throws_with([&] { f->get_uint("missing.key"); }, "missing.key");
    throws_with([&] { f->get_uint("neg"); }, "'neg'");
    throws_with([&] { f->get_int("big"); }, "'big'");
    throws_with([&] { f->get_int("s"); }, "'s'");
    throws_with([&] { f->get_bool("s"); }, "'s'");
    throws_with([&] { f->get_float("s"); }, "'s'");
    throws_with([&] { f->get_string("neg"); }, "'neg'");
    throws_with([&] { f->get_string_array("s"); }, "'s'");
    throws_with([&] { f->get_float_array("s"); }, "'s'");
    throws_with([&] { f->get_int_array("a.big"); }, "'a.big'");
    EXPECT_EQ(f->find_tensor("nope"), nullptr);
    EXPECT_FALSE(f->has("missing.key"));
    EXPECT_TRUE(f->has("s"));
}

TEST(GgufRoundTrip, TensorsOfSeveralTypesAndShapes) {
    struct Case {
        std::string name;
        TensorType type;
        std::vector<int64_t> ne;
    };
    const std::vector<Case> cases = {
        {"f32.1d", TensorType::F32, {5}},
        {"f16.2d", TensorType::F16, {3, 7}},
        {"bf16.3d", TensorType::BF16, {2, 3, 4}},
        {"q8_0.2d", TensorType::Q8_0, {64, 3}},
        {"q4_0.4d", TensorType::Q4_0, {32, 2, 1, 2}},
        {"q5_0.1d", TensorType::Q5_0, {96}},
        {"q4_K.2d", TensorType::Q4_K, {256, 2}},
        {"q6_K.1d", TensorType::Q6_K, {512}},
        {"empty", TensorType::F32, {0, 4}},
    };
    for (uint64_t alignment : {32u, 1u, 64u, 4096u}) {
        SCOPED_TRACE("alignment " + std::to_string(alignment));
        GgufWriter w(alignment);
        w.set_string("general.architecture", "test");
        std::vector<std::vector<uint8_t>> payloads;
        for (size_t i = 0; i < cases.size(); ++i) {
            const auto& c = cases[i];
            size_t rows = 1;
            for (size_t d = 1; d < c.ne.size(); ++d)
                rows *= static_cast<size_t>(c.ne[d]);
            payloads.push_back(pattern(rows * row_bytes(c.type, c.ne[0]), uint8_t(i)));
            w.add_tensor(c.name, c.type, c.ne, payloads.back());
        }
        const auto bytes = w.to_bytes();
        auto f = parse(bytes);
        EXPECT_EQ(f->alignment(), alignment);
        EXPECT_EQ(f->has("general.alignment"), alignment != 32);
        ASSERT_EQ(f->tensors().size(), cases.size());
        const uint8_t* data0 = f->tensors()[0].data;
        EXPECT_EQ(static_cast<size_t>(data0 - bytes.data()) % alignment, 0u);
        for (size_t i = 0; i < cases.size(); ++i) {
            const auto& t = f->tensors()[i];
            EXPECT_EQ(t.name, cases[i].name);
            EXPECT_EQ(t.type, cases[i].type);
            EXPECT_EQ(t.ne, cases[i].ne);
            EXPECT_EQ(t.offset % alignment, 0u);
            EXPECT_EQ(t.data, data0 + t.offset);
            ASSERT_EQ(t.nbytes, payloads[i].size());
            EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), payloads[i]) << t.name;
            EXPECT_EQ(f->find_tensor(t.name), &t);
        }
        EXPECT_EQ(f->find_tensor("empty")->n_elements(), 0);
        EXPECT_EQ(f->find_tensor("bf16.3d")->n_elements(), 24);
    }
}

TEST(GgufRoundTrip, AtomicWriteAndOpen) {
    const auto dir = test::temp_dir();
    const auto path = dir + "/model.gguf";
    GgufWriter w;
    w.set_string("general.architecture", "test");
    w.add_tensor_f32("w", TensorType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
    w.write(path);
    // Overwriting replaces the file whole; no temporary is left behind.
    w.set_uint32("v", 2);
    w.write(path);
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
        ++entries;
    EXPECT_EQ(entries, 1u);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    const mode_t mask = ::umask(0);
    ::umask(mask);
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);

    auto f = GgufFile::open(path);
    EXPECT_EQ(f->file_size(), w.to_bytes().size());
    EXPECT_EQ(f->get_uint("v"), 2u);
    const auto* t = f->find_tensor("w");
    ASSERT_NE(t, nullptr);
    std::vector<float> got(6);
    std::memcpy(got.data(), t->data, 24);
    EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    f.reset();
    std::filesystem::remove_all(dir);
}

TEST(GgufRoundTrip, WriterRejectsBadInput) {
    GgufWriter w;
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {4}, std::vector<uint8_t>(15)),
                 std::invalid_argument);
    EXPECT_THROW(w.add_tensor("x", TensorType::Q8_0, {33}, std::vector<uint8_t>(34)),
                 std::invalid_argument);
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)),
                 std::invalid_argument);
    EXPECT_THROW(w.add_tensor(std::string(65, 'n'), TensorType::F32, {1}, std::vector<uint8_t>(4)),
                 std::invalid_argument);
    w.add_tensor("x", TensorType::F32, {1}, std::vector<uint8_t>(4));
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {1}, std::vector<uint8_t>(4)),
                 std::invalid_argument);
    EXPECT_THROW(w.add_tensor_f32("y", TensorType::F32, {2}, {1.0f}), std::invalid_argument);
    EXPECT_THROW(w.set_value("k", {GgufValueType::UInt8, GgufValueType::UInt8, uint64_t{256}}),
                 std::invalid_argument);
    EXPECT_THROW(w.set_value("k", {GgufValueType::Int8, GgufValueType::UInt8, uint64_t{1}}),
                 std::invalid_argument);
    EXPECT_THROW(
        w.set_value("k", {GgufValueType::Array, GgufValueType::Array, std::vector<uint64_t>{}}),
        std::invalid_argument);
    EXPECT_THROW(GgufWriter(3).to_bytes(), std::invalid_argument);
    EXPECT_THROW(GgufWriter(0).to_bytes(), std::invalid_argument);
    const auto dir = test::temp_dir();
    EXPECT_THROW(w.write(dir + "/no/such/dir/x.gguf"), std::system_error);
    std::filesystem::remove_all(dir);
}

TEST(GgufRoundTrip, QuantisedTensorFromFloats) {
    // add_tensor_f32 quantises row by row with quantize_row; reading back and dequantising
    // gives the values within the format's resolution.
    std::vector<float> values(256 * 2);
    for (size_t i = 0; i < values.size(); ++i)
        values[i] = std::sin(0.1f * static_cast<float>(i));
    for (auto type : {TensorType::F16, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}) {
        SCOPED_TRACE(std::string(traits(type).name));
        GgufWriter w;
        w.add_tensor_f32("w", type, {256, 2}, values);
        const auto bytes = w.to_bytes();
        auto f = parse(bytes);
        const auto* t = f->find_tensor("w");
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(t->nbytes, 2 * row_bytes(type, 256));
        std::vector<float> back(values.size());
        for (int r = 0; r < 2; ++r)
            dequantize_row(type, t->data + r * row_bytes(type, 256), back.data() + r * 256, 256);
        const float tol = type == TensorType::Q4_K ? 0.1f : 0.02f;
        for (size_t i = 0; i < values.size(); ++i)
            ASSERT_NEAR(back[i], values[i], tol) << i;
    }
}
