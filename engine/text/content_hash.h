// A content key for files and parameters: FNV-1a, 64 bits (Fowler, Noll, Vo; the IETF draft
// draft-eastlake-fnv), over the bytes given in order. Not a security measure: it tells contents
// apart, it does not resist an adversary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace spanscope {

struct ContentHash {
    uint64_t h = 14695981039346656037ull; ///< the FNV-1a 64-bit offset basis

    void bytes(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i) {
            h ^= b[i];
            h *= 1099511628211ull; // the FNV 64-bit prime
        }
    }
    void i64(int64_t v) { bytes(&v, sizeof v); }
    void f64(double v) { bytes(&v, sizeof v); }
    /// The length first, so that ("ab", "c") and ("a", "bc") differ.
    void str(const std::string& s) {
        i64(static_cast<int64_t>(s.size()));
        bytes(s.data(), s.size());
    }
    template <class T> void values(const std::vector<T>& v) {
        static_assert(std::is_trivially_copyable_v<T>, "hashed by its bytes");
        i64(static_cast<int64_t>(v.size()));
        bytes(v.data(), v.size() * sizeof(T));
    }
    void floats(const std::vector<float>& v) { values(v); }
    /// 16 lower-case hex digits.
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
        return buf;
    }
};

} // namespace spanscope
