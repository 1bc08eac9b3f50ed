// The value types of GGUF metadata (internal to engine/gguf): their names for messages, their
// encoded sizes and classes, and an integer value as uint64. Source: ggml/docs/gguf.md.
#pragma once

#include "engine/gguf/gguf_reader.h"

#include <cstdint>
#include <optional>
#include <string>

namespace spanscope::gguf_detail {

/// "uint8", …, "float64"; "type N" for a value the format does not define.
std::string type_name(GgufValueType t);
/// Whether the raw type number is one the format defines.
bool known_value_type(uint32_t t);
/// Encoded size of one scalar element in bytes; 0 for String and Array (variable).
uint64_t scalar_size(GgufValueType t);
bool is_unsigned(GgufValueType t);
bool is_signed(GgufValueType t);
bool is_float(GgufValueType t);
/// The value's unsigned integer, or nullopt if it is not an integer that fits in uint64.
std::optional<uint64_t> as_uint(const GgufValue& v);

} // namespace spanscope::gguf_detail
