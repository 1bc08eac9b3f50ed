// The value types of GGUF metadata (gguf_values.h).
#include "engine/gguf/gguf_values.h"

namespace spanscope::gguf_detail {

std::string type_name(GgufValueType t) {
    switch (t) {
    case GgufValueType::UInt8:
        return "uint8";
    case GgufValueType::Int8:
        return "int8";
    case GgufValueType::UInt16:
        return "uint16";
    case GgufValueType::Int16:
        return "int16";
    case GgufValueType::UInt32:
        return "uint32";
    case GgufValueType::Int32:
        return "int32";
    case GgufValueType::Float32:
        return "float32";
    case GgufValueType::Bool:
        return "bool";
    case GgufValueType::String:
        return "string";
    case GgufValueType::Array:
        return "array";
    case GgufValueType::UInt64:
        return "uint64";
    case GgufValueType::Int64:
        return "int64";
    case GgufValueType::Float64:
        return "float64";
    }
    return "type " + std::to_string(static_cast<uint32_t>(t));
}

bool known_value_type(uint32_t t) {
    return t <= static_cast<uint32_t>(GgufValueType::Float64);
}

uint64_t scalar_size(GgufValueType t) {
    switch (t) {
    case GgufValueType::UInt8:
    case GgufValueType::Int8:
    case GgufValueType::Bool:
        return 1;
    case GgufValueType::UInt16:
    case GgufValueType::Int16:
        return 2;
    case GgufValueType::UInt32:
    case GgufValueType::Int32:
    case GgufValueType::Float32:
        return 4;
    case GgufValueType::UInt64:
    case GgufValueType::Int64:
    case GgufValueType::Float64:
        return 8;
    case GgufValueType::String:
    case GgufValueType::Array:
        return 0;
    }
    return 0;
}

bool is_unsigned(GgufValueType t) {
    return t == GgufValueType::UInt8 || t == GgufValueType::UInt16 || t == GgufValueType::UInt32 ||
           t == GgufValueType::UInt64;
}
bool is_signed(GgufValueType t) {
    return t == GgufValueType::Int8 || t == GgufValueType::Int16 || t == GgufValueType::Int32 ||
           t == GgufValueType::Int64;
}
bool is_float(GgufValueType t) {
    return t == GgufValueType::Float32 || t == GgufValueType::Float64;
}

std::optional<uint64_t> as_uint(const GgufValue& v) {
    if (is_unsigned(v.type))
        return std::get<uint64_t>(v.data);
    if (is_signed(v.type)) {
        const auto i = std::get<int64_t>(v.data);
        if (i >= 0)
            return static_cast<uint64_t>(i);
    }
    return std::nullopt;
}

} // namespace spanscope::gguf_detail
