// The key/value rows a global-attention memory holds at full resolution, in position order:
// shared by `full`, `sekv` (the rows not held as spans) and the eviction baselines (the rows
// they keep). Values are kept at f16 precision (memory.h).
#pragma once

#include <cstdint>
#include <vector>

namespace spanscope {

class RowStore {
public:
    RowStore() = default;
    /// width: floats per row (n_kv_head * head_dim).
    explicit RowStore(int64_t width) : width_(width) {}

    /// Append n rows: k, v: [n][width], rounded through f16; pos: [n], increasing and each
    /// greater than the last row held and than `after`. Throws std::invalid_argument otherwise.
    void append(const float* k, const float* v, const int32_t* pos, int64_t n,
                int32_t after = INT32_MIN);
    /// Copy the rows whose positions lie in [pos_begin, pos_end): k, v: [rows][width], pos:
    /// [rows]. Returns the number of rows.
    int64_t read(int32_t pos_begin, int32_t pos_end, std::vector<float>& k, std::vector<float>& v,
                 std::vector<int32_t>& pos) const;
    /// Index of the first row at a position >= p (size() when none).
    int64_t lower_bound(int32_t p) const;
    /// Keep the rows whose keep[i] is non-zero ([size()]), in order; frees the rest.
    void compact(const std::vector<char>& keep);
    void clear();

    int64_t size() const { return static_cast<int64_t>(pos_.size()); }
    int64_t width() const { return width_; }
    const float* k() const { return k_.data(); }
    const float* v() const { return v_.data(); }
    const std::vector<int32_t>& positions() const { return pos_; }
    /// Bytes of the rows as held: keys and values in fp32 and a position each.
    int64_t bytes() const { return size() * row_bytes(); }
    int64_t row_bytes() const {
        return 2 * width_ * static_cast<int64_t>(sizeof(float)) +
               static_cast<int64_t>(sizeof(int32_t));
    }

private:
    int64_t width_ = 0;
    std::vector<float> k_, v_; ///< [rows][width]
    std::vector<int32_t> pos_;
};

} // namespace spanscope
