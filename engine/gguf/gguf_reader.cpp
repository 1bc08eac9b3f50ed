// GGUF v3 reader. Every count, length and offset read from the file is checked against the
// bytes that remain before anything is allocated from it, so a hostile file fails with a
// GgufError instead of a bad_alloc, an overflow or an out-of-bounds read.
// Source: ggml/docs/gguf.md; the tensor-info checks follow ggml's gguf.cpp (gguf_init_from_file).
#include "engine/gguf/gguf_reader.h"

#include "engine/gguf/gguf_values.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <type_traits>
#include <unistd.h>

namespace spanscope {
namespace {

using namespace gguf_detail;

constexpr uint32_t kMagic = 0x46554747; // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr size_t kMaxTensorName = 64; // GGML_MAX_NAME; the spec limits names to 64 bytes

// Smallest encodings, used to bound counts before anything is reserved:
// a key/value is key length (8) + value type (4) + the smallest value (1 byte);
// a tensor info is name length (8) + 1 name byte + n_dims (4) + one dim (8) + type (4) + offset
// (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

/// Bounds-checked little-endian reader over [base, base + size).
class Cursor {
public:
    Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}

    size_t pos() const { return pos_; }
    size_t left() const { return size_ - pos_; }

    /// Throws "truncated" unless n more bytes are available; `what` names the field.
    void need(uint64_t n, const char* what, const std::string& where) const {
        if (n > left()) {
            throw GgufError("GGUF: truncated: " + std::string(what) + where + " at byte offset " +
                            std::to_string(pos_) + " needs " + std::to_string(n) + " bytes, only " +
                            std::to_string(left()) + " left");
        }
    }

    template <typename T> T read(const char* what, const std::string& where = {}) {
        static_assert(std::is_trivially_copyable_v<T>);
        need(sizeof(T), what, where);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T)); // GGUF is little-endian, as are our hosts
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(const char* what, const std::string& where = {}) {
        const size_t at = pos_;
        const auto len = read<uint64_t>(what, where);
        if (len > left()) {
            throw GgufError("GGUF: truncated: " + std::string(what) + where + " at byte offset " +
                            std::to_string(at) + " has length " + std::to_string(len) +
                            " but only " + std::to_string(left()) + " bytes are left");
        }
        std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return s;
    }

private:
    const uint8_t* base_;
    size_t size_;
    size_t pos_ = 0;
};

/// Reads one scalar of type t (not String/Array) widened to its variant alternative.
template <typename Out> Out read_scalar_as(Cursor& c, GgufValueType t, const std::string& where) {
    switch (t) {
    case GgufValueType::UInt8:
        return static_cast<Out>(c.read<uint8_t>("value", where));
    case GgufValueType::Int8:
        return static_cast<Out>(c.read<int8_t>("value", where));
    case GgufValueType::UInt16:
        return static_cast<Out>(c.read<uint16_t>("value", where));
    case GgufValueType::Int16:
        return static_cast<Out>(c.read<int16_t>("value", where));
    case GgufValueType::UInt32:
        return static_cast<Out>(c.read<uint32_t>("value", where));
    case GgufValueType::Int32:
        return static_cast<Out>(c.read<int32_t>("value", where));
    case GgufValueType::UInt64:
        return static_cast<Out>(c.read<uint64_t>("value", where));
    case GgufValueType::Int64:
        return static_cast<Out>(c.read<int64_t>("value", where));
    case GgufValueType::Float32:
        return static_cast<Out>(c.read<float>("value", where));
    case GgufValueType::Float64:
        return static_cast<Out>(c.read<double>("value", where));
    default:
        break;
    }
    throw GgufError("GGUF: internal: not a numeric type " + type_name(t) + where);
}

bool read_bool(Cursor& c, const std::string& where) {
    const size_t at = c.pos();
    const auto b = c.read<uint8_t>("bool value", where);
    if (b > 1) {
        throw GgufError("GGUF: invalid bool value " + std::to_string(b) + where +
                        " at byte offset " + std::to_string(at));
    }
    return b != 0;
}

GgufValue read_value(Cursor& c, uint32_t raw_type, size_t type_at, const std::string& where) {
    if (!known_value_type(raw_type)) {
        throw GgufError("GGUF: unknown value type " + std::to_string(raw_type) + where +
                        " at byte offset " + std::to_string(type_at));
    }
    GgufValue v;
    v.type = static_cast<GgufValueType>(raw_type);
    switch (v.type) {
    case GgufValueType::String:
        v.data = c.read_string("string value", where);
        return v;
    case GgufValueType::Bool:
        v.data = read_bool(c, where);
        return v;
    case GgufValueType::Array:
        break;
    default:
        if (is_unsigned(v.type))
            v.data = read_scalar_as<uint64_t>(c, v.type, where);
        else if (is_signed(v.type))
            v.data = read_scalar_as<int64_t>(c, v.type, where);
        else
            v.data = read_scalar_as<double>(c, v.type, where);
        return v;
    }

    const size_t elem_type_at = c.pos();
    const auto raw_elem = c.read<uint32_t>("array element type", where);
    if (!known_value_type(raw_elem)) {
        throw GgufError("GGUF: unknown array element type " + std::to_string(raw_elem) + where +
                        " at byte offset " + std::to_string(elem_type_at));
    }
    const auto elem = static_cast<GgufValueType>(raw_elem);
    if (elem == GgufValueType::Array) {
        throw GgufError("GGUF: nested arrays are not supported" + where + " at byte offset " +
                        std::to_string(elem_type_at));
    }
    v.array_type = elem;
    const size_t count_at = c.pos();
    const auto count = c.read<uint64_t>("array length", where);
    // Strings take at least their 8-byte length; bound the count before reserving.
    const uint64_t min_elem = elem == GgufValueType::String ? 8 : scalar_size(elem);
    if (count > c.left() / min_elem) {
        throw GgufError("GGUF: truncated: array length " + std::to_string(count) + where +
                        " at byte offset " + std::to_string(count_at) + " needs at least " +
                        std::to_string(min_elem) + " bytes per element, only " +
                        std::to_string(c.left()) + " bytes left");
    }
    const auto n = static_cast<size_t>(count);
    if (elem == GgufValueType::String) {
        std::vector<std::string> out;
        out.reserve(n);
        for (size_t i = 0; i < n; ++i)
            out.push_back(c.read_string("array string", where));
        v.data = std::move(out);
    } else if (elem == GgufValueType::Bool) {
        std::vector<bool> out(n);
        for (size_t i = 0; i < n; ++i)
            out[i] = read_bool(c, where);
        v.data = std::move(out);
    } else if (is_unsigned(elem)) {
        std::vector<uint64_t> out(n);
        for (size_t i = 0; i < n; ++i)
            out[i] = read_scalar_as<uint64_t>(c, elem, where);
        v.data = std::move(out);
    } else if (is_signed(elem)) {
        std::vector<int64_t> out(n);
        for (size_t i = 0; i < n; ++i)
            out[i] = read_scalar_as<int64_t>(c, elem, where);
        v.data = std::move(out);
    } else {
        std::vector<double> out(n);
        for (size_t i = 0; i < n; ++i)
            out[i] = read_scalar_as<double>(c, elem, where);
        v.data = std::move(out);
    }
    return v;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t limit) {
    return a != 0 && b > limit / a;
}

} // namespace

int64_t GgufTensorInfo::n_elements() const {
    int64_t n = 1;
    for (auto d : ne)
        n *= d; // the reader has checked that the product fits
    return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "cannot open GGUF file " + path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw std::system_error(err, std::generic_category(), "cannot stat GGUF file " + path);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw std::system_error(EINVAL, std::generic_category(),
                                "GGUF path is not a regular file: " + path);
    }
    const auto size = static_cast<size_t>(st.st_size);
    if (size == 0) {
        ::close(fd);
        throw GgufError("GGUF: truncated: file " + path + " is empty");
    }
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_err = errno;
    ::close(fd); // the mapping keeps the file referenced
    if (p == MAP_FAILED)
        throw std::system_error(map_err, std::generic_category(), "cannot mmap GGUF file " + path);

    std::unique_ptr<GgufFile> f(new GgufFile());
    f->base_ = static_cast<const uint8_t*>(p);
    f->size_ = size;
    f->mapped_ = true; // from here the destructor unmaps, also if parse() throws
    try {
        f->parse();
    } catch (const GgufError& e) {
        throw GgufError(std::string(e.what()) + " (file " + path + ")");
    }
    return f;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(const uint8_t* data, size_t size) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->base_ = data;
    f->size_ = data ? size : 0;
    f->parse();
    return f;
}

GgufFile::~GgufFile() {
    if (mapped_)
        ::munmap(const_cast<uint8_t*>(base_), size_);
}

void GgufFile::parse() {
    Cursor c(base_, size_);

    const auto magic = c.read<uint32_t>("magic");
    if (magic != kMagic)
        throw GgufError("GGUF: bad magic at byte offset 0 (not a GGUF file)");
    version_ = c.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3) {
        std::string hint;
        if (version_ == 1)
            hint = " (GGUF v1 uses 32-bit counts and is not supported)";
        else if ((version_ & 0xffff) == 0 && version_ != 0)
            hint = " (a big-endian file?)";
        throw GgufError("GGUF: unsupported version " + std::to_string(version_) +
                        " at byte offset 4; this reader accepts versions 2 and 3" + hint);
    }
    const auto tensor_count = c.read<uint64_t>("tensor count");
    const auto kv_count = c.read<uint64_t>("metadata key/value count");
    if (kv_count > c.left() / kMinKvBytes) {
        throw GgufError("GGUF: truncated: metadata key/value count " + std::to_string(kv_count) +
                        " at byte offset 16 cannot fit in the " + std::to_string(c.left()) +
                        " bytes left");
    }
    if (tensor_count > c.left() / kMinTensorInfoBytes) {
        throw GgufError("GGUF: truncated: tensor count " + std::to_string(tensor_count) +
                        " at byte offset 8 cannot fit in the " + std::to_string(c.left()) +
                        " bytes left");
    }

    for (uint64_t i = 0; i < kv_count; ++i) {
        const size_t key_at = c.pos();
        const std::string idx = " of key/value #" + std::to_string(i);
        std::string key = c.read_string("key", idx);
        if (key.empty())
            throw GgufError("GGUF: empty key" + idx + " at byte offset " + std::to_string(key_at));
        const std::string where = " of key '" + key + "'";
        const size_t type_at = c.pos();
        const auto raw_type = c.read<uint32_t>("value type", where);
        GgufValue v = read_value(c, raw_type, type_at, where);
        if (kv_.count(key)) {
            throw GgufError("GGUF: duplicate key '" + key + "' at byte offset " +
                            std::to_string(key_at));
        }
        kv_.emplace(std::move(key), std::move(v));
    }

    alignment_ = kDefaultAlignment;
    if (auto it = kv_.find("general.alignment"); it != kv_.end()) {
        const auto a = as_uint(it->second);
        if (!a || it->second.type == GgufValueType::Bool) {
            throw GgufError("GGUF: key 'general.alignment' must be an unsigned integer, not " +
                            type_name(it->second.type));
        }
        if (*a == 0 || (*a & (*a - 1)) != 0) {
            throw GgufError("GGUF: key 'general.alignment' = " + std::to_string(*a) +
                            " is not a nonzero power of two");
        }
        alignment_ = *a;
    }

    tensors_.reserve(static_cast<size_t>(tensor_count));
    for (uint64_t i = 0; i < tensor_count; ++i) {
        const size_t info_at = c.pos();
        const std::string idx = " of tensor #" + std::to_string(i);
        GgufTensorInfo t;
        t.name = c.read_string("tensor name", idx);
        const std::string where =
            " of tensor '" + t.name + "' (info at byte offset " + std::to_string(info_at) + ")";
        if (t.name.empty() || t.name.size() > kMaxTensorName) {
            throw GgufError("GGUF: tensor name of length " + std::to_string(t.name.size()) + idx +
                            " at byte offset " + std::to_string(info_at) + " must be 1.." +
                            std::to_string(kMaxTensorName) + " bytes");
        }
        if (tensor_index_.count(t.name))
            throw GgufError("GGUF: duplicate tensor name" + where);

        const auto n_dims = c.read<uint32_t>("n_dims", where);
        if (n_dims < 1 || n_dims > kMaxDims) {
            throw GgufError("GGUF: n_dims " + std::to_string(n_dims) + where + " must be 1.." +
                            std::to_string(kMaxDims));
        }
        uint64_t n_elements = 1;
        bool has_zero = false;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const auto dim = c.read<uint64_t>("dimension", where);
            if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                throw GgufError("GGUF: dimension " + std::to_string(d) + " = " +
                                std::to_string(dim) + where + " is negative as int64");
            }
            if (dim == 0)
                has_zero = true;
            else if (mul_overflows(n_elements, dim, std::numeric_limits<int64_t>::max()))
                throw GgufError("GGUF: element count overflows int64" + where);
            else
                n_elements *= dim;
            t.ne.push_back(static_cast<int64_t>(dim));
        }
        if (has_zero)
            n_elements = 0;

        const auto raw_type = c.read<uint32_t>("tensor type", where);
        const auto tr = tensor_type_traits(raw_type);
        if (!tr)
            throw GgufError("GGUF: unknown tensor type " + std::to_string(raw_type) + where);
        t.type = static_cast<TensorType>(raw_type);
        if (t.ne[0] % tr->block_size != 0) {
            throw GgufError("GGUF: row length " + std::to_string(t.ne[0]) + where +
                            " is not a multiple of the block size " +
                            std::to_string(tr->block_size) + " of type " + std::string(tr->name));
        }
        // Bytes = rows * (ne[0] / block_size) * block_bytes; each factor checked for overflow.
        const uint64_t rows = t.ne[0] == 0 ? 0 : n_elements / static_cast<uint64_t>(t.ne[0]);
        const uint64_t row_blocks = static_cast<uint64_t>(t.ne[0] / tr->block_size);
        const uint64_t size_max = std::numeric_limits<size_t>::max();
        if (mul_overflows(row_blocks, tr->block_bytes, size_max) ||
            mul_overflows(row_blocks * tr->block_bytes, rows, size_max)) {
            throw GgufError("GGUF: byte size overflows" + where);
        }
        t.nbytes = static_cast<size_t>(row_blocks * tr->block_bytes * rows);

        t.offset = c.read<uint64_t>("tensor data offset", where);
        if (t.offset % alignment_ != 0) {
            throw GgufError("GGUF: data offset " + std::to_string(t.offset) + where +
                            " is not a multiple of the alignment " + std::to_string(alignment_));
        }
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment.
    const uint64_t pos = c.pos();
    const uint64_t pad = (alignment_ - pos % alignment_) % alignment_;
    if (tensors_.empty())
        return; // a metadata-only file may end without the padding
    if (pad > c.left()) {
        throw GgufError("GGUF: truncated: data section would start at byte offset " +
                        std::to_string(pos + pad) + " beyond the end of the file (" +
                        std::to_string(size_) + " bytes)");
    }
    const uint64_t data_start = pos + pad;
    const uint64_t data_size = size_ - data_start;
    for (auto& t : tensors_) {
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            throw GgufError("GGUF: truncated: data of tensor '" + t.name + "' (offset " +
                            std::to_string(t.offset) + ", " + std::to_string(t.nbytes) +
                            " bytes) extends beyond the data section of " +
                            std::to_string(data_size) + " bytes starting at byte offset " +
                            std::to_string(data_start));
        }
        t.data = base_ + data_start + t.offset;
    }

    // No two tensors may share bytes (empty tensors occupy none).
    std::vector<const GgufTensorInfo*> order;
    order.reserve(tensors_.size());
    for (const auto& t : tensors_)
        if (t.nbytes > 0)
            order.push_back(&t);
    std::sort(order.begin(), order.end(),
              [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const auto* prev = order[i - 1];
        if (prev->offset + prev->nbytes > order[i]->offset) {
            throw GgufError("GGUF: data of tensor '" + order[i]->name + "' (offset " +
                            std::to_string(order[i]->offset) + ") overlaps tensor '" + prev->name +
                            "' (offset " + std::to_string(prev->offset) + ", " +
                            std::to_string(prev->nbytes) + " bytes)");
        }
    }
}

namespace {
const GgufValue& lookup(const std::map<std::string, GgufValue>& kv, const std::string& key) {
    auto it = kv.find(key);
    if (it == kv.end())
        throw GgufError("GGUF: missing key '" + key + "'");
    return it->second;
}

[[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, const char* wanted) {
    std::string have = type_name(v.type);
    if (v.type == GgufValueType::Array)
        have += " of " + type_name(v.array_type);
    throw GgufError("GGUF: key '" + key + "' is " + have + ", expected " + wanted);
}
} // namespace

uint64_t GgufFile::get_uint(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (!is_unsigned(v.type) && !is_signed(v.type))
        wrong_type(key, v, "an integer");
    const auto u = as_uint(v);
    if (!u) {
        throw GgufError("GGUF: key '" + key + "' = " + std::to_string(std::get<int64_t>(v.data)) +
                        " is negative, expected an unsigned value");
    }
    return *u;
}

int64_t GgufFile::get_int(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (is_signed(v.type))
        return std::get<int64_t>(v.data);
    if (!is_unsigned(v.type))
        wrong_type(key, v, "an integer");
    const auto u = std::get<uint64_t>(v.data);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw GgufError("GGUF: key '" + key + "' = " + std::to_string(u) + " does not fit int64");
    return static_cast<int64_t>(u);
}

double GgufFile::get_float(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (is_float(v.type))
        return std::get<double>(v.data);
    if (is_signed(v.type))
        return static_cast<double>(std::get<int64_t>(v.data));
    if (is_unsigned(v.type))
        return static_cast<double>(std::get<uint64_t>(v.data));
    wrong_type(key, v, "a number");
}

bool GgufFile::get_bool(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (v.type != GgufValueType::Bool)
        wrong_type(key, v, "bool");
    return std::get<bool>(v.data);
}

const std::string& GgufFile::get_string(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (v.type != GgufValueType::String)
        wrong_type(key, v, "string");
    return std::get<std::string>(v.data);
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (v.type != GgufValueType::Array || v.array_type != GgufValueType::String)
        wrong_type(key, v, "array of string");
    return std::get<std::vector<std::string>>(v.data);
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (v.type != GgufValueType::Array)
        wrong_type(key, v, "array of numbers");
    if (is_float(v.array_type))
        return std::get<std::vector<double>>(v.data);
    if (is_signed(v.array_type)) {
        const auto& in = std::get<std::vector<int64_t>>(v.data);
        return std::vector<double>(in.begin(), in.end());
    }
    if (is_unsigned(v.array_type)) {
        const auto& in = std::get<std::vector<uint64_t>>(v.data);
        return std::vector<double>(in.begin(), in.end());
    }
    wrong_type(key, v, "array of numbers");
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
    const auto& v = lookup(kv_, key);
    if (v.type != GgufValueType::Array)
        wrong_type(key, v, "array of integers");
    if (is_signed(v.array_type))
        return std::get<std::vector<int64_t>>(v.data);
    if (!is_unsigned(v.array_type))
        wrong_type(key, v, "array of integers");
    const auto& in = std::get<std::vector<uint64_t>>(v.data);
    std::vector<int64_t> out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            throw GgufError("GGUF: key '" + key + "' element " + std::to_string(i) + " = " +
                            std::to_string(in[i]) + " does not fit int64");
        }
        out.push_back(static_cast<int64_t>(in[i]));
    }
    return out;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

} // namespace spanscope
