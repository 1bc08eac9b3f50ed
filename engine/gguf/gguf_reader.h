// Memory-mapped, fully validating reader of GGUF v3 files.
// Source: GGUF specification, ggml/docs/gguf.md (header, key/value section, tensor infos,
// alignment `general.alignment`, default 32).
#pragma once

#include "engine/kernels/tensor_type.h"

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace spanscope {

/// Raised for any file that is not a valid GGUF v3 file; the message names what is wrong
/// and where (byte offset or key/tensor name).
class GgufError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// GGUF metadata value types (explicit on-disk values).
enum class GgufValueType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

/// One metadata value. Arrays hold their element type and the elements as a vector of the
/// matching C++ type (strings as std::string). Nested arrays are rejected by the reader.
struct GgufValue {
    GgufValueType type = GgufValueType::UInt8;
    GgufValueType array_type = GgufValueType::UInt8; ///< element type when type == Array
    std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<uint64_t>,
                 std::vector<int64_t>, std::vector<double>, std::vector<bool>,
                 std::vector<std::string>>
        data;
};

struct GgufTensorInfo {
    std::string name;
    TensorType type = TensorType::F32;
    std::vector<int64_t> ne;       ///< dims, ne[0] = innermost (row length), as ggml orders them
    uint64_t offset = 0;           ///< from the start of the data section
    size_t nbytes = 0;             ///< validated: rows * row_bytes(type, ne[0])
    const uint8_t* data = nullptr; ///< inside the mapping, valid while the GgufFile lives
    int64_t n_elements() const;
};

class GgufFile {
public:
    /// Map and validate `path`. Throws GgufError (invalid/truncated file) or
    /// std::system_error (cannot open/map).
    static std::unique_ptr<GgufFile> open(const std::string& path);
    /// Validate an in-memory buffer (used by the fuzz target); the buffer must outlive the
    /// returned object. Throws GgufError.
    static std::unique_ptr<GgufFile> from_memory(const uint8_t* data, size_t size);
    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    uint32_t version() const { return version_; }
    size_t file_size() const { return size_; }
    uint64_t alignment() const { return alignment_; }

    const std::map<std::string, GgufValue>& metadata() const { return kv_; }
    bool has(const std::string& key) const { return kv_.count(key) != 0; }
    /// Typed getters: throw GgufError naming the key if missing or of an incompatible type.
    /// Integer getters accept any integer type whose value fits.
    uint64_t get_uint(const std::string& key) const;
    int64_t get_int(const std::string& key) const;
    double get_float(const std::string& key) const; ///< accepts Float32/Float64 (and integers)
    bool get_bool(const std::string& key) const;
    const std::string& get_string(const std::string& key) const;
    const std::vector<std::string>& get_string_array(const std::string& key) const;
    std::vector<double> get_float_array(const std::string& key) const;
    std::vector<int64_t> get_int_array(const std::string& key) const;

    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    /// nullptr when absent.
    const GgufTensorInfo* find_tensor(const std::string& name) const;

private:
    GgufFile() = default;
    void parse();
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    std::map<std::string, GgufValue> kv_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

} // namespace spanscope
