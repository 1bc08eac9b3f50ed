// Writer of GGUF v3 files (tests write tiny models with it).
// Source: GGUF specification, ggml/docs/gguf.md.
#pragma once

#include "engine/gguf/gguf_reader.h"

#include <string>
#include <vector>

namespace spanscope {

class GgufWriter {
public:
    /// `alignment`: data alignment in bytes, a power of two below 2^32 (checked by to_bytes());
    /// a value other than 32 is recorded as the uint32 key `general.alignment`.
    explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}
    /// Typed setters. Keys are written in the order first set; setting a key again replaces
    /// its value in place. An empty key throws std::invalid_argument.
    void set_uint32(const std::string& key, uint32_t v);
    void set_int32(const std::string& key, int32_t v);
    void set_uint64(const std::string& key, uint64_t v);
    void set_float32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_string(const std::string& key, const std::string& v);
    void set_string_array(const std::string& key, const std::vector<std::string>& v);
    void set_float32_array(const std::string& key, const std::vector<float>& v);
    void set_int32_array(const std::string& key, const std::vector<int32_t>& v);
    /// Set a value of any GGUF type (e.g. uint8, float64, arrays of uint64). The variant
    /// alternative must match `v.type` (unsigned -> uint64_t, signed -> int64_t, floats ->
    /// double, arrays -> the matching vector) and numbers must fit the declared width;
    /// nested arrays are refused. Throws std::invalid_argument otherwise.
    void set_value(const std::string& key, const GgufValue& v);
    /// Add a tensor from raw bytes already in `type`'s layout (ne[0] innermost).
    /// Throws std::invalid_argument if bytes.size() does not match the shape.
    void add_tensor(const std::string& name, TensorType type, const std::vector<int64_t>& ne,
                    std::vector<uint8_t> bytes);
    /// Add a tensor from floats [ne[n-1]]...[ne[0]] row-major, quantised to `type` row by row
    /// with quantize_row (F32 is copied). Throws std::invalid_argument if values.size() is not
    /// the product of ne, or on a bad shape. Tensor names must be unique and 1..64 bytes.
    void add_tensor_f32(const std::string& name, TensorType type, const std::vector<int64_t>& ne,
                        const std::vector<float>& values);
    /// Serialise the whole file: header, key/values, tensor infos, padding, then each tensor's
    /// data padded to the alignment. Throws std::invalid_argument for a bad alignment.
    std::vector<uint8_t> to_bytes() const;
    /// Write to `path` atomically: a temporary file in the same directory, fsync, rename, then
    /// fsync of the directory. Throws std::system_error (message names `path`).
    void write(const std::string& path) const;

private:
    struct Kv {
        std::string key;
        GgufValue value;
    };
    struct Tensor {
        std::string name;
        TensorType type;
        std::vector<int64_t> ne;
        std::vector<uint8_t> bytes;
    };
    void set(const std::string& key, GgufValue v);
    uint64_t alignment_;
    std::vector<Kv> kv_;
    std::vector<Tensor> tensors_;
};

} // namespace spanscope
