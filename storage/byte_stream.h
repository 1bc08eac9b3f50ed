// Little-endian byte streams for the project's binary blobs (sekv_state.h, zoom_trace_blob.h):
// a writer that appends plain values and arrays, and a reader that checks every size against
// what is left before it reads (a short or damaged blob throws, it never reads past the end).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace spanscope {

/// Thrown by ByteReader for a blob that ends early or holds an impossible count.
class BlobError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class ByteWriter {
public:
    template <class T> void put(T x) {
        static_assert(std::is_trivially_copyable_v<T>);
        const auto* p = reinterpret_cast<const uint8_t*>(&x);
        bytes_.insert(bytes_.end(), p, p + sizeof(T));
    }
    template <class T> void put_array(const T* x, size_t n) {
        static_assert(std::is_trivially_copyable_v<T>);
        const auto* p = reinterpret_cast<const uint8_t*>(x);
        bytes_.insert(bytes_.end(), p, p + n * sizeof(T));
    }
    void put_string(const std::string& s) {
        put<uint32_t>(static_cast<uint32_t>(s.size()));
        put_array(s.data(), s.size());
    }
    std::vector<uint8_t>& bytes() { return bytes_; }

private:
    std::vector<uint8_t> bytes_;
};

class ByteReader {
public:
    /// what: the blob's name in error messages.
    ByteReader(const uint8_t* data, size_t size, std::string what)
        : p_(data), left_(size), what_(std::move(what)) {}
    template <class T> T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        need(sizeof(T));
        T x;
        std::memcpy(&x, p_, sizeof(T));
        p_ += sizeof(T);
        left_ -= sizeof(T);
        return x;
    }
    /// n elements; n is checked against the bytes left before anything is allocated.
    template <class T> std::vector<T> get_array(uint64_t n) {
        static_assert(std::is_trivially_copyable_v<T>);
        if (n > left_ / sizeof(T))
            fail("holds a count of " + std::to_string(n) + " that exceeds its size");
        std::vector<T> x(static_cast<size_t>(n));
        if (n == 0)
            return x; // (memcpy must not see the null data() of an empty vector)
        std::memcpy(x.data(), p_, static_cast<size_t>(n) * sizeof(T));
        p_ += n * sizeof(T);
        left_ -= n * sizeof(T);
        return x;
    }
    std::string get_string() {
        const auto n = get<uint32_t>();
        const auto bytes = get_array<char>(n);
        return std::string(bytes.begin(), bytes.end());
    }
    size_t left() const { return left_; }
    [[noreturn]] void fail(const std::string& why) const { throw BlobError(what_ + " " + why); }

private:
    void need(size_t n) const {
        if (n > left_)
            fail("ends early");
    }
    const uint8_t* p_;
    size_t left_;
    std::string what_;
};

} // namespace spanscope
