// GGUF v3 writer: header, key/values in insertion order, tensor infos, then the data section
// with every tensor padded to the alignment (the layout ggml's gguf_write_to_file produces).
// Source: ggml/docs/gguf.md.
#include "engine/gguf/gguf_writer.h"

#include "engine/kernels/quant.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace spanscope {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr size_t kMaxTensorName = 64;
std::atomic<uint64_t> g_tmp_counter{0};

class ByteSink {
public:
    std::vector<uint8_t> bytes;

    template <typename T> void put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v); // little-endian host
        bytes.insert(bytes.end(), p, p + sizeof(T));
    }
    void put_string(const std::string& s) {
        put<uint64_t>(s.size());
        bytes.insert(bytes.end(), s.begin(), s.end());
    }
    void pad_to(uint64_t alignment) {
        bytes.resize(bytes.size() + (alignment - bytes.size() % alignment) % alignment, 0);
    }
};

void put_scalar(ByteSink& out, GgufValueType t, const GgufValue& v, size_t i) {
    // Scalars and array elements share one encoder; i indexes into arrays.
    const bool arr = v.type == GgufValueType::Array;
    auto u = [&] {
        return arr ? std::get<std::vector<uint64_t>>(v.data)[i] : std::get<uint64_t>(v.data);
    };
    auto s = [&] {
        return arr ? std::get<std::vector<int64_t>>(v.data)[i] : std::get<int64_t>(v.data);
    };
    auto f = [&] {
        return arr ? std::get<std::vector<double>>(v.data)[i] : std::get<double>(v.data);
    };
    switch (t) {
    case GgufValueType::UInt8:
        out.put(static_cast<uint8_t>(u()));
        break;
    case GgufValueType::Int8:
        out.put(static_cast<int8_t>(s()));
        break;
    case GgufValueType::UInt16:
        out.put(static_cast<uint16_t>(u()));
        break;
    case GgufValueType::Int16:
        out.put(static_cast<int16_t>(s()));
        break;
    case GgufValueType::UInt32:
        out.put(static_cast<uint32_t>(u()));
        break;
    case GgufValueType::Int32:
        out.put(static_cast<int32_t>(s()));
        break;
    case GgufValueType::UInt64:
        out.put(static_cast<uint64_t>(u()));
        break;
    case GgufValueType::Int64:
        out.put(static_cast<int64_t>(s()));
        break;
    case GgufValueType::Float32:
        out.put(static_cast<float>(f()));
        break;
    case GgufValueType::Float64:
        out.put(static_cast<double>(f()));
        break;
    case GgufValueType::Bool:
        out.put(static_cast<uint8_t>(arr ? std::get<std::vector<bool>>(v.data)[i]
                                         : std::get<bool>(v.data)));
        break;
    case GgufValueType::String:
        out.put_string(arr ? std::get<std::vector<std::string>>(v.data)[i]
                           : std::get<std::string>(v.data));
        break;
    case GgufValueType::Array:
        throw std::invalid_argument("GGUF writer: nested arrays");
    }
}

/// Throws std::invalid_argument unless v's variant alternative matches its declared type and
/// every number fits that type (so that what is written reads back unchanged).
void check_value(const std::string& key, const GgufValue& v) {
    auto bad = [&](const std::string& why) {
        throw std::invalid_argument("GGUF writer: key '" + key + "': " + why);
    };
    auto check_elem = [&](GgufValueType t, const auto& x) {
        using X = std::decay_t<decltype(x)>;
        auto range = [&](auto val, auto lo, auto hi) {
            if (val < lo || val > hi)
                bad("value " + std::to_string(val) + " out of range");
        };
        switch (t) {
        case GgufValueType::UInt8:
        case GgufValueType::UInt16:
        case GgufValueType::UInt32:
        case GgufValueType::UInt64:
            if constexpr (!std::is_same_v<X, uint64_t>)
                bad("unsigned type needs a uint64_t value");
            else if (t == GgufValueType::UInt8)
                range(x, 0u, 0xffu);
            else if (t == GgufValueType::UInt16)
                range(x, 0u, 0xffffu);
            else if (t == GgufValueType::UInt32)
                range(x, 0u, 0xffffffffu);
            break;
        case GgufValueType::Int8:
        case GgufValueType::Int16:
        case GgufValueType::Int32:
        case GgufValueType::Int64:
            if constexpr (!std::is_same_v<X, int64_t>)
                bad("signed type needs an int64_t value");
            else if (t == GgufValueType::Int8)
                range(x, -128, 127);
            else if (t == GgufValueType::Int16)
                range(x, -32768, 32767);
            else if (t == GgufValueType::Int32)
                range(x, int64_t{INT32_MIN}, int64_t{INT32_MAX});
            break;
        case GgufValueType::Float32:
        case GgufValueType::Float64:
            if constexpr (!std::is_same_v<X, double>)
                bad("float type needs a double value");
            break;
        case GgufValueType::Bool:
            if constexpr (!std::is_same_v<X, bool>)
                bad("bool type needs a bool value");
            break;
        case GgufValueType::String:
            if constexpr (!std::is_same_v<X, std::string>)
                bad("string type needs a std::string value");
            break;
        case GgufValueType::Array:
            bad("nested arrays are not supported");
        }
    };
    if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GgufValueType::Float64))
        bad("unknown value type");
    std::visit(
        [&](const auto& d) {
            using D = std::decay_t<decltype(d)>;
            if constexpr (requires { typename D::value_type; } && !std::is_same_v<D, std::string>) {
                if (v.type != GgufValueType::Array)
                    bad("a vector value needs type Array");
                if (static_cast<uint32_t>(v.array_type) >
                    static_cast<uint32_t>(GgufValueType::Float64))
                    bad("unknown array element type");
                for (const auto& x : d)
                    check_elem(v.array_type, static_cast<typename D::value_type>(x));
                if (d.empty())
                    check_elem(v.array_type, typename D::value_type{});
            } else {
                if (v.type == GgufValueType::Array)
                    bad("type Array needs a vector value");
                check_elem(v.type, d);
            }
        },
        v.data);
}

size_t array_size(const GgufValue& v) {
    return std::visit(
        [](const auto& d) -> size_t {
            using D = std::decay_t<decltype(d)>;
            if constexpr (std::is_same_v<D, std::string>)
                return 0;
            else if constexpr (requires { d.size(); })
                return d.size();
            else
                return 0;
        },
        v.data);
}

uint64_t tensor_nbytes(TensorType type, const std::vector<int64_t>& ne) {
    uint64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d)
        rows *= static_cast<uint64_t>(ne[d]);
    return rows * row_bytes(type, ne[0]);
}

void validate_shape(const std::string& name, TensorType type, const std::vector<int64_t>& ne) {
    if (ne.empty() || ne.size() > 4)
        throw std::invalid_argument("GGUF writer: tensor '" + name + "' needs 1..4 dimensions");
    for (auto d : ne)
        if (d < 0)
            throw std::invalid_argument("GGUF writer: tensor '" + name + "' has a negative dim");
    if (ne[0] % traits(type).block_size != 0) {
        throw std::invalid_argument("GGUF writer: tensor '" + name + "' row length " +
                                    std::to_string(ne[0]) + " is not a multiple of " +
                                    std::to_string(traits(type).block_size));
    }
}

} // namespace

void GgufWriter::set(const std::string& key, GgufValue v) {
    if (key.empty())
        throw std::invalid_argument("GGUF writer: empty key");
    for (auto& kv : kv_) {
        if (kv.key == key) {
            kv.value = std::move(v); // replacing keeps the original position
            return;
        }
    }
    kv_.push_back({key, std::move(v)});
}

void GgufWriter::set_uint32(const std::string& key, uint32_t v) {
    set(key, {GgufValueType::UInt32, GgufValueType::UInt8, uint64_t{v}});
}
void GgufWriter::set_int32(const std::string& key, int32_t v) {
    set(key, {GgufValueType::Int32, GgufValueType::UInt8, int64_t{v}});
}
void GgufWriter::set_uint64(const std::string& key, uint64_t v) {
    set(key, {GgufValueType::UInt64, GgufValueType::UInt8, v});
}
void GgufWriter::set_float32(const std::string& key, float v) {
    set(key, {GgufValueType::Float32, GgufValueType::UInt8, double{v}});
}
void GgufWriter::set_bool(const std::string& key, bool v) {
    set(key, {GgufValueType::Bool, GgufValueType::UInt8, v});
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
    set(key, {GgufValueType::String, GgufValueType::UInt8, v});
}
void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
    set(key, {GgufValueType::Array, GgufValueType::String, v});
}
void GgufWriter::set_float32_array(const std::string& key, const std::vector<float>& v) {
    set(key,
        {GgufValueType::Array, GgufValueType::Float32, std::vector<double>(v.begin(), v.end())});
}
void GgufWriter::set_int32_array(const std::string& key, const std::vector<int32_t>& v) {
    set(key,
        {GgufValueType::Array, GgufValueType::Int32, std::vector<int64_t>(v.begin(), v.end())});
}

void GgufWriter::set_value(const std::string& key, const GgufValue& v) {
    check_value(key, v);
    set(key, v);
}

void GgufWriter::add_tensor(const std::string& name, TensorType type,
                            const std::vector<int64_t>& ne, std::vector<uint8_t> bytes) {
    if (name.empty() || name.size() > kMaxTensorName)
        throw std::invalid_argument("GGUF writer: tensor name must be 1..64 bytes: '" + name + "'");
    for (const auto& t : tensors_)
        if (t.name == name)
            throw std::invalid_argument("GGUF writer: duplicate tensor '" + name + "'");
    validate_shape(name, type, ne);
    const uint64_t want = tensor_nbytes(type, ne);
    if (bytes.size() != want) {
        throw std::invalid_argument("GGUF writer: tensor '" + name + "' has " +
                                    std::to_string(bytes.size()) + " bytes, its shape needs " +
                                    std::to_string(want));
    }
    tensors_.push_back({name, type, ne, std::move(bytes)});
}

void GgufWriter::add_tensor_f32(const std::string& name, TensorType type,
                                const std::vector<int64_t>& ne, const std::vector<float>& values) {
    validate_shape(name, type, ne);
    uint64_t n = 1;
    for (auto d : ne)
        n *= static_cast<uint64_t>(d);
    if (values.size() != n) {
        throw std::invalid_argument("GGUF writer: tensor '" + name + "' has " +
                                    std::to_string(values.size()) + " values, its shape needs " +
                                    std::to_string(n));
    }
    std::vector<uint8_t> bytes(tensor_nbytes(type, ne));
    if (type == TensorType::F32) {
        if (!values.empty())
            std::memcpy(bytes.data(), values.data(), values.size() * sizeof(float));
    } else if (ne[0] > 0) {
        const size_t rb = row_bytes(type, ne[0]);
        const size_t rows = n / static_cast<size_t>(ne[0]);
        for (size_t r = 0; r < rows; ++r)
            quantize_row(type, values.data() + r * ne[0], bytes.data() + r * rb, ne[0]);
    }
    add_tensor(name, type, ne, std::move(bytes));
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 || alignment_ > UINT32_MAX)
        throw std::invalid_argument("GGUF writer: alignment must be a power of two < 2^32");

    std::vector<const Kv*> kvs;
    bool has_alignment_key = false;
    for (const auto& kv : kv_) {
        if (kv.key == "general.alignment") {
            has_alignment_key = true;
            if (kv.value.type != GgufValueType::UInt32 ||
                std::get<uint64_t>(kv.value.data) != alignment_) {
                throw std::invalid_argument(
                    "GGUF writer: 'general.alignment' must be the uint32 given to the constructor");
            }
        }
        kvs.push_back(&kv);
    }
    const Kv align_kv{"general.alignment",
                      {GgufValueType::UInt32, GgufValueType::UInt8, uint64_t{alignment_}}};
    if (!has_alignment_key && alignment_ != kDefaultAlignment)
        kvs.push_back(&align_kv);

    size_t total_data = 0;
    for (const auto& t : tensors_)
        total_data += t.bytes.size() + alignment_;

    ByteSink out;
    out.bytes.reserve(total_data + 4096);
    out.bytes.insert(out.bytes.end(), {'G', 'G', 'U', 'F'});
    out.put<uint32_t>(kVersion);
    out.put<uint64_t>(tensors_.size());
    out.put<uint64_t>(kvs.size());
    for (const auto* kv : kvs) {
        out.put_string(kv->key);
        out.put<uint32_t>(static_cast<uint32_t>(kv->value.type));
        if (kv->value.type == GgufValueType::Array) {
            const size_t n = array_size(kv->value);
            out.put<uint32_t>(static_cast<uint32_t>(kv->value.array_type));
            out.put<uint64_t>(n);
            for (size_t i = 0; i < n; ++i)
                put_scalar(out, kv->value.array_type, kv->value, i);
        } else {
            put_scalar(out, kv->value.type, kv->value, 0);
        }
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        out.put_string(t.name);
        out.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (auto d : t.ne)
            out.put<uint64_t>(static_cast<uint64_t>(d));
        out.put<uint32_t>(static_cast<uint32_t>(t.type));
        out.put<uint64_t>(offset);
        offset += t.bytes.size();
        offset += (alignment_ - offset % alignment_) % alignment_;
    }
    if (!tensors_.empty()) {
        out.pad_to(alignment_);
        const size_t data_start = out.bytes.size();
        for (const auto& t : tensors_) {
            out.bytes.insert(out.bytes.end(), t.bytes.begin(), t.bytes.end());
            const size_t rel = out.bytes.size() - data_start;
            out.bytes.resize(out.bytes.size() + (alignment_ - rel % alignment_) % alignment_, 0);
        }
    }
    return std::move(out.bytes);
}

void GgufWriter::write(const std::string& path) const {
    const auto bytes = to_bytes();
    const std::filesystem::path target(path);
    const auto dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    // O_EXCL with a fresh name, mode 0666 so the process umask applies as for any new file.
    std::string tmpl;
    int fd = -1;
    for (unsigned attempt = 0; fd < 0; ++attempt) {
        std::string name = ".";
        name += target.filename().string();
        name +=
            ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_tmp_counter.fetch_add(1));
        tmpl = (dir / name).string();
        fd = ::open(tmpl.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && (errno != EEXIST || attempt > 100)) {
            throw std::system_error(errno, std::generic_category(),
                                    "cannot create temporary file for " + path);
        }
    }
    auto fail = [&](const char* what) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmpl.c_str());
        throw std::system_error(err, std::generic_category(), std::string(what) + " " + path);
    };
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            fail("cannot write");
        }
        done += static_cast<size_t>(w);
    }
    if (::fsync(fd) != 0)
        fail("cannot fsync");
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmpl.c_str());
        throw std::system_error(err, std::generic_category(), "cannot close " + path);
    }
    if (::rename(tmpl.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmpl.c_str());
        throw std::system_error(err, std::generic_category(), "cannot rename into " + path);
    }
    // Make the rename itself durable.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

} // namespace spanscope
