// GGUF reader: a comparison of the real model against gguf-py's view of it
// (tests/reference/fixtures/gguf_real_model.json, made by tests/reference/make_gguf_fixture.py).
#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/quant.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

using namespace spanscope;

// ---------------------------------------------------------------------------------------------
// The real model against gguf-py's reading of it

TEST(GgufRealModel, MatchesGgufPyFixture) {
    const auto path = test::real_model_path();
    if (!path)
        GTEST_SKIP() << "real model not installed (see model_locator.h for the search path)";
    std::ifstream in(test::data_dir() + "/reference/fixtures/gguf_real_model.json");
    ASSERT_TRUE(in) << "missing tests/reference/fixtures/gguf_real_model.json";
    const auto fx = nlohmann::json::parse(in);
    auto f = GgufFile::open(*path);
    if (f->file_size() != fx["file_size"].get<size_t>())
        GTEST_SKIP() << "installed model " << *path << " is not the file the fixture describes";

    EXPECT_EQ(f->version(), fx["version"].get<uint32_t>());
    EXPECT_EQ(f->alignment(), fx["alignment"].get<uint64_t>());
    EXPECT_EQ(f->get_string("general.architecture"), "gemma3");

    const auto& meta = fx["metadata"];
    EXPECT_EQ(f->metadata().size(), meta.size());
    static const std::map<std::string, GgufValueType> kTypes = {
        {"uint8", GgufValueType::UInt8},     {"int8", GgufValueType::Int8},
        {"uint16", GgufValueType::UInt16},   {"int16", GgufValueType::Int16},
        {"uint32", GgufValueType::UInt32},   {"int32", GgufValueType::Int32},
        {"float32", GgufValueType::Float32}, {"bool", GgufValueType::Bool},
        {"string", GgufValueType::String},   {"array", GgufValueType::Array},
        {"uint64", GgufValueType::UInt64},   {"int64", GgufValueType::Int64},
        {"float64", GgufValueType::Float64},
    };
    auto element_json = [](const GgufValue& v, size_t i) -> nlohmann::json {
        return std::visit(
            [&](const auto& d) -> nlohmann::json {
                using D = std::decay_t<decltype(d)>;
                if constexpr (std::is_same_v<D, std::string>)
                    return d;
                else if constexpr (requires { d.size(); })
                    return static_cast<typename D::value_type>(d[i]);
                else
                    return d;
            },
            v.data);
    };
    for (const auto& [key, e] : meta.items()) {
        SCOPED_TRACE(key);
        ASSERT_TRUE(f->has(key));
        const auto& v = f->metadata().at(key);
        EXPECT_EQ(v.type, kTypes.at(e["type"].get<std::string>()));
        if (v.type != GgufValueType::Array) {
            EXPECT_EQ(element_json(v, 0), e["value"]);
            continue;
        }
        EXPECT_EQ(v.array_type, kTypes.at(e["elem_type"].get<std::string>()));
        const auto len = e["length"].get<size_t>();
        std::visit(
            [&](const auto& d) {
                if constexpr (!std::is_same_v<std::decay_t<decltype(d)>, std::string> &&
                              requires { d.size(); }) {
                    EXPECT_EQ(d.size(), len);
                }
            },
            v.data);
        if (e.contains("values")) {
            for (size_t i = 0; i < len; ++i)
                EXPECT_EQ(element_json(v, i), e["values"][i]);
        } else {
            const auto& head = e["head"];
            const auto& tail = e["tail"];
            for (size_t i = 0; i < head.size(); ++i)
                EXPECT_EQ(element_json(v, i), head[i]);
            for (size_t i = 0; i < tail.size(); ++i)
                EXPECT_EQ(element_json(v, len - tail.size() + i), tail[i]);
        }
    }

    const auto& tensors = fx["tensors"];
    ASSERT_EQ(f->tensors().size(), tensors.size());
    EXPECT_EQ(f->tensors().size(), 236u);
    std::map<TensorType, int> counts;
    const uint8_t* data0 = f->tensors()[0].data - f->tensors()[0].offset;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = f->tensors()[i];
        const auto& e = tensors[i];
        SCOPED_TRACE(t.name);
        EXPECT_EQ(t.name, e["name"].get<std::string>());
        EXPECT_EQ(static_cast<uint32_t>(t.type), e["type"].get<uint32_t>());
        EXPECT_EQ(t.ne, e["ne"].get<std::vector<int64_t>>());
        EXPECT_EQ(t.offset, e["offset"].get<uint64_t>());
        EXPECT_EQ(t.nbytes, e["nbytes"].get<size_t>());
        EXPECT_EQ(t.data, data0 + t.offset);
        ++counts[t.type];
    }
    EXPECT_EQ(counts[TensorType::F32], 109);
    EXPECT_EQ(counts[TensorType::Q5_0], 81);
    EXPECT_EQ(counts[TensorType::Q4_K], 27);
    EXPECT_EQ(counts[TensorType::Q8_0], 10);
    EXPECT_EQ(counts[TensorType::Q6_K], 9);
}
