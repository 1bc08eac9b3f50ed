// The integer matrix product: activation quantisation, unpacking of each weight type to int8
// blocks, packing of strips for the level, and the split over threads. Kernels: qgemm_*.cpp.
#include "engine/kernels/qgemm.h"

#include "engine/kernels/fp16.h"
#include "engine/kernels/qgemm_impl.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/quant_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace spanscope {
namespace {

using qgemm_detail::Level;
using qgemm_detail::Shape;
using namespace quant_detail;

const Level& level_now() {
    static const Level scalar = qgemm_detail::scalar_level();
    static const Level avx2 = qgemm_detail::avx2_level();
    static const Level avxvnni = qgemm_detail::avxvnni_level();
    static const Level avx512 = qgemm_detail::avx512_level();
    static const Level amx = qgemm_detail::amx_level();
    switch (kernel_level()) {
    case KernelLevel::Amx:
        return amx;
    case KernelLevel::Avx2:
        return avx2;
    case KernelLevel::AvxVnni:
        return avxvnni;
    case KernelLevel::Avx512:
        return avx512;
    default:
        return scalar;
    }
}

/// Block length and minimums of a supported type.
bool type_shape(TensorType t, int& block, bool& has_min) {
    switch (t) {
    case TensorType::Q4_0:
    case TensorType::Q5_0:
    case TensorType::Q8_0:
        block = 32;
        has_min = false;
        return true;
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
        block = 32;
        has_min = true;
        return true;
    case TensorType::Q6_K:
        block = 16;
        has_min = false;
        return true;
    default:
        return false;
    }
}

// ---- Unpacking: one weight row -> int8 q[cols], dw[cols / L], mw[cols / 32].
// The values are those of dequantize_row: element = dw · q (+ mw). The symmetric 32-element
// types (Q8_0, Q5_0, Q4_0) are packed from their blocks directly (pack_strip_sym).

template <class Block>
void unpack_q32_min(const Block* x, int64_t nb, bool five, int8_t* q, float* dw, float* mw) {
    for (int64_t i = 0; i < nb; ++i, q += 32) {
        uint32_t qh = 0;
        if constexpr (requires { x[i].qh; })
            std::memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; ++j) {
            int lo = x[i].qs[j] & 0xF, hi = x[i].qs[j] >> 4;
            if (five) {
                lo |= static_cast<int>((qh >> j) & 1u) << 4;
                hi |= static_cast<int>((qh >> (j + 16)) & 1u) << 4;
            }
            q[j] = static_cast<int8_t>(lo);
            q[j + 16] = static_cast<int8_t>(hi);
        }
        dw[i] = fp16_to_fp32(x[i].d);
        if (mw)
            mw[i] = fp16_to_fp32(x[i].m);
    }
}

void unpack_row(TensorType t, const uint8_t* src, int64_t cols, int8_t* q, float* dw, float* mw) {
    switch (t) {
    case TensorType::Q4_1:
        unpack_q32_min(reinterpret_cast<const BlockQ4_1*>(src), cols / 32, false, q, dw, mw);
        return;
    case TensorType::Q5_1:
        unpack_q32_min(reinterpret_cast<const BlockQ5_1*>(src), cols / 32, true, q, dw, mw);
        return;
    case TensorType::Q4_K:
    case TensorType::Q5_K: {
        const bool five = t == TensorType::Q5_K;
        const size_t bytes = five ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
        for (int64_t i = 0; i < cols / kQK_K; ++i, src += bytes) {
            // Q4_K and Q5_K share d, dmin, scales and qs; Q5_K adds qh before qs.
            const auto* b4 = reinterpret_cast<const BlockQ4_K*>(src);
            const auto* b5 = reinterpret_cast<const BlockQ5_K*>(src);
            const uint8_t* qs = five ? b5->qs : b4->qs;
            const float d = fp16_to_fp32(b4->d), dmin = fp16_to_fp32(b4->dmin);
            for (int j = 0; j < 8; ++j) {
                uint8_t sc, m;
                get_scale_min_k4(j, b4->scales, &sc, &m);
                dw[8 * i + j] = d * static_cast<float>(sc);
                mw[8 * i + j] = -(dmin * static_cast<float>(m));
                const uint8_t* ql = qs + 32 * (j / 2);
                const int shift = (j % 2) * 4;
                for (int l = 0; l < 32; ++l) {
                    int v = (ql[l] >> shift) & 0xF;
                    if (five)
                        v |= ((b5->qh[l] >> j) & 1) << 4;
                    q[256 * i + 32 * j + l] = static_cast<int8_t>(v);
                }
            }
        }
        return;
    }
    case TensorType::Q6_K: {
        const auto* x = reinterpret_cast<const BlockQ6_K*>(src);
        for (int64_t i = 0; i < cols / kQK_K; ++i) {
            const float d = fp16_to_fp32(x[i].d);
            int8_t* y = q + 256 * i;
            const uint8_t* ql = x[i].ql;
            const uint8_t* qh = x[i].qh;
            for (int nn = 0; nn < 256; nn += 128, y += 128, ql += 64, qh += 32) {
                for (int l = 0; l < 32; ++l) {
                    y[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                    y[l + 32] =
                        static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                    y[l + 64] =
                        static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                    y[l + 96] =
                        static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                }
            }
            for (int j = 0; j < 16; ++j)
                dw[16 * i + j] = d * static_cast<float>(x[i].scales[j]);
        }
        return;
    }
    default:
        throw std::invalid_argument("qgemm: unsupported weight type");
    }
}

// ---- Packing nr unpacked rows into the level's strip layout (qgemm_impl.h).

struct Scratch {
    std::vector<int8_t> q;
    std::vector<float> dw, mw;
    std::vector<uint8_t> strip;
    std::vector<float> tile;
};

Scratch& scratch() {
    thread_local Scratch s;
    return s;
}

/// Block b of a row of a symmetric 32-element type as int8 values; returns its scale.
float decode_block_sym(TensorType t, const uint8_t* row, int64_t b, int8_t* q) {
    switch (t) {
    case TensorType::Q8_0: {
        const auto& x = reinterpret_cast<const BlockQ8_0*>(row)[b];
        std::memcpy(q, x.qs, 32);
        return fp16_to_fp32(x.d);
    }
    case TensorType::Q5_0: {
        const auto& x = reinterpret_cast<const BlockQ5_0*>(row)[b];
        uint32_t qh;
        std::memcpy(&qh, x.qh, 4);
        for (int j = 0; j < 16; ++j) {
            q[j] = static_cast<int8_t>(((x.qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4)) -
                                       16);
            q[j + 16] = static_cast<int8_t>(
                ((x.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - 16);
        }
        return fp16_to_fp32(x.d);
    }
    default: { // Q4_0
        const auto& x = reinterpret_cast<const BlockQ4_0*>(row)[b];
        for (int j = 0; j < 16; ++j) {
            q[j] = static_cast<int8_t>((x.qs[j] & 0xF) - 8);
            q[j + 16] = static_cast<int8_t>((x.qs[j] >> 4) - 8);
        }
        return fp16_to_fp32(x.d);
    }
    }
}

/// Q8_0, Q5_0 and Q4_0 straight from the blocks into the strip, one block of the strip's rows at
/// a time (no unpacked copy of the rows). The reference for the levels' SIMD packers (PackSymFn).
void pack_strip_sym(const WeightMatrix& w, int64_t row0, int nr_valid, const Shape& s,
                    Scratch& sc) {
    const int64_t nbw = s.n_blocks();
    const int nr = s.nr;
    constexpr int kMaxRows = 64;
    if (nr > kMaxRows)
        throw std::logic_error("qgemm: strips of more than 64 rows");
    sc.strip.resize(s.block_bytes * static_cast<size_t>(nbw));
    uint8_t* p = sc.strip.data();
    int8_t vals[kMaxRows][32];
    for (int r = nr_valid; r < nr; ++r)
        std::memset(vals[r], 0, 32);
    for (int64_t b = 0; b < nbw; ++b) {
        auto* f = reinterpret_cast<float*>(p);
        for (int r = 0; r < nr; ++r)
            f[r] = r < nr_valid ? decode_block_sym(w.type, w.row(row0 + r), b, vals[r]) : 0.0f;
        p += 4 * nr;
        if (s.group == 4) {
            for (int k0 = 0; k0 < 32; k0 += 4)
                for (int r = 0; r < nr; ++r, p += 4)
                    std::memcpy(p, vals[r] + k0, 4);
        } else {
            for (int k0 = 0; k0 < 32; k0 += 2)
                for (int r = 0; r < nr; ++r, p += 4) {
                    const int16_t pair[2] = {vals[r][k0], vals[r][k0 + 1]};
                    std::memcpy(p, pair, 4);
                }
        }
    }
}

void pack_strip(const WeightMatrix& w, int64_t row0, int nr_valid, const Shape& s, const Level& lv,
                Scratch& sc) {
    if (w.type == TensorType::Q8_0 || w.type == TensorType::Q5_0 || w.type == TensorType::Q4_0) {
        if (lv.pack_sym) {
            sc.strip.resize(s.block_bytes * static_cast<size_t>(s.n_blocks()));
            lv.pack_sym(w, row0, nr_valid, s, sc.strip.data());
        } else {
            pack_strip_sym(w, row0, nr_valid, s, sc);
        }
        return;
    }
    const int64_t K = s.cols, nbw = s.n_blocks(), L = s.block;
    sc.q.resize(static_cast<size_t>(s.nr * K));
    sc.dw.resize(static_cast<size_t>(s.nr * nbw));
    sc.mw.resize(static_cast<size_t>(s.nr * (K / 32)));
    // Rows past the matrix's end: zero quants, scales and minimums.
    std::fill(sc.q.begin() + nr_valid * K, sc.q.end(), int8_t{0});
    std::fill(sc.dw.begin() + nr_valid * nbw, sc.dw.end(), 0.0f);
    std::fill(sc.mw.begin() + nr_valid * (K / 32), sc.mw.end(), 0.0f);
    for (int r = 0; r < nr_valid; ++r)
        unpack_row(w.type, w.row(row0 + r), K, sc.q.data() + r * K, sc.dw.data() + r * nbw,
                   s.has_min ? sc.mw.data() + r * (K / 32) : nullptr);
    sc.strip.resize(s.block_bytes * static_cast<size_t>(nbw));
    uint8_t* p = sc.strip.data();
    const int nr = s.nr;
    for (int64_t b = 0; b < nbw; ++b) {
        auto* f = reinterpret_cast<float*>(p);
        for (int r = 0; r < nr; ++r)
            f[r] = sc.dw[static_cast<size_t>(r * nbw + b)];
        p += 4 * nr;
        if (s.has_min) {
            f = reinterpret_cast<float*>(p);
            for (int r = 0; r < nr; ++r)
                f[r] = sc.mw[static_cast<size_t>(r * (K / 32) + b)];
            p += 4 * nr;
        }
        if (s.group == 2) {
            auto* q16 = reinterpret_cast<int16_t*>(p);
            for (int64_t k0 = 0; k0 < L; k0 += 2)
                for (int r = 0; r < nr; ++r)
                    for (int e = 0; e < 2; ++e)
                        *q16++ = sc.q[static_cast<size_t>(r * K + b * L + k0 + e)];
            p += 2 * L * nr;
        } else {
            for (int64_t k0 = 0; k0 < L; k0 += 4)
                for (int r = 0; r < nr; ++r, p += 4)
                    std::memcpy(p, sc.q.data() + r * K + b * L + k0, 4);
        }
    }
}

Shape make_shape(const WeightMatrix& w, const Level& lv) {
    Shape s;
    if (!type_shape(w.type, s.block, s.has_min))
        throw std::invalid_argument("qgemm: weight type " + std::string(traits(w.type).name) +
                                    " has no integer kernel");
    s.cols = w.cols;
    s.nr = lv.nr;
    s.group = lv.group;
    s.block_bytes =
        static_cast<size_t>(s.nr) *
        (4 + (s.has_min ? 4 : 0) + static_cast<size_t>(s.block) * (lv.group == 2 ? 2 : 1));
    return s;
}

void check_args(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                const QgemmActivations& xq, const Level& lv) {
    if (!qgemm_supports(w.type))
        throw std::invalid_argument("qgemm: weight type " + std::string(traits(w.type).name) +
                                    " has no integer kernel");
    if (w.cols != xq.cols || w.cols % traits(w.type).block_size != 0)
        throw std::invalid_argument("qgemm: " + std::to_string(xq.cols) +
                                    " activation columns for a matrix of " +
                                    std::to_string(w.cols) + " columns");
    if (row_begin < 0 || row_end > w.rows || row_begin > row_end)
        throw std::invalid_argument("qgemm: row range outside the matrix");
    // Activations quantised at another level (or by hand) may lack what this level reads.
    const size_t n = static_cast<size_t>(xq.n), cols = static_cast<size_t>(xq.cols);
    const size_t tiled = (n + 15) / 16 * 16 * cols;
    if (xq.n < 0 || xq.q.size() != n * cols || xq.d.size() != n * cols / 32 ||
        xq.ds.size() != n * cols / 32 ||
        (lv.needs_split && (xq.hi.size() != tiled || xq.lo.size() != tiled)))
        throw std::invalid_argument("qgemm: activations not quantised by qgemm_quantize at the "
                                    "current kernel level");
}

} // namespace

bool qgemm_supports(TensorType t) {
    int block = 0;
    bool has_min = false;
    return type_shape(t, block, has_min);
}

int qgemm_strip_rows() {
    return level_now().nr;
}

void qgemm_quantize(const float* x, int64_t n, int64_t cols, QgemmActivations& out,
                    ThreadPool* pool) {
    if (n < 0)
        throw std::invalid_argument("qgemm_quantize: " + std::to_string(n) + " tokens");
    if (cols < 0 || cols % 32 != 0)
        throw std::invalid_argument("qgemm_quantize: " + std::to_string(cols) +
                                    " columns is not a multiple of 32");
    const int64_t nb = cols / 32;
    out.n = n;
    out.cols = cols;
    out.q.resize(static_cast<size_t>(n * cols));
    out.d.resize(static_cast<size_t>(n * nb));
    out.ds.resize(static_cast<size_t>(n * nb));
    const Level& lv = level_now();
    // The AMX level's bytes in tiles: per 16 tokens and 32 columns, 16 rows of 32 bytes.
    const size_t tiled = static_cast<size_t>((n + 15) / 16 * 16 * cols);
    out.hi.resize(lv.needs_split ? tiled : 0);
    out.lo.resize(lv.needs_split ? tiled : 0);
    if (lv.needs_split && n % 16 != 0) { // the last tile's rows past the last token: zero
        const int64_t t0 = n / 16 * 16;
        for (int64_t a = 0; a < nb; ++a) {
            const size_t at = static_cast<size_t>(((t0 / 16) * nb + a) * 512 + (n - t0) * 32);
            const size_t len = static_cast<size_t>((16 - (n - t0)) * 32);
            std::memset(out.hi.data() + at, 0, len);
            std::memset(out.lo.data() + at, 0, len);
        }
    }
    auto rows = [&](int64_t b, int64_t e, int) {
        lv.quantize(x + b * cols, (e - b) * nb, out.q.data() + b * cols, out.d.data() + b * nb,
                    out.ds.data() + b * nb);
        if (lv.needs_split)
            for (int64_t t = b; t < e; ++t)
                for (int64_t a = 0; a < nb; ++a) {
                    const int16_t* v = out.q.data() + t * cols + 32 * a;
                    const size_t at =
                        static_cast<size_t>(((t / 16) * nb + a) * 512 + (t % 16) * 32);
                    int8_t* h = out.hi.data() + at;
                    uint8_t* l = out.lo.data() + at;
                    for (int k = 0; k < 32; ++k) {
                        h[k] = static_cast<int8_t>(v[k] >> 8); // arithmetic shift
                        l[k] = static_cast<uint8_t>(v[k] & 0xFF);
                    }
                }
    };
    if (pool && n > 1)
        pool->parallel_for(n, rows);
    else
        rows(0, n, 0);
}

void qgemm(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const QgemmActivations& xq,
           float* y, int64_t ldy, ThreadPool& pool) {
    const Level& lv = level_now();
    check_args(w, row_begin, row_end, xq, lv);
    const Shape s = make_shape(w, lv);
    const int64_t n_rows = row_end - row_begin;
    const int64_t n_strips = (n_rows + lv.nr - 1) / lv.nr;
    pool.parallel_for(n_strips, [&](int64_t b, int64_t e, int) {
        Scratch& sc = scratch();
        for (int64_t i = b; i < e; ++i) {
            const int64_t r0 = row_begin + i * lv.nr;
            const int nv = static_cast<int>(std::min<int64_t>(lv.nr, row_end - r0));
            pack_strip(w, r0, nv, s, lv, sc);
            lv.kernel(sc.strip.data(), s, xq, y + (r0 - row_begin), ldy, nv);
        }
    });
}

void qgemm_tiles(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                 const QgemmActivations& xq, int64_t tile_rows, const QgemmTileFn& fn,
                 ThreadPool& pool) {
    const Level& lv = level_now();
    check_args(w, row_begin, row_end, xq, lv);
    const Shape s = make_shape(w, lv);
    const int64_t tr = std::max<int64_t>(1, (tile_rows + lv.nr - 1) / lv.nr) * lv.nr;
    const int64_t n_rows = row_end - row_begin;
    const int64_t n_tiles = (n_rows + tr - 1) / tr;
    pool.parallel_for(n_tiles, [&](int64_t b, int64_t e, int thread) {
        Scratch& sc = scratch();
        for (int64_t ti = b; ti < e; ++ti) {
            const int64_t t0 = row_begin + ti * tr;
            const int64_t rows = std::min(tr, row_end - t0);
            sc.tile.resize(static_cast<size_t>(xq.n * rows));
            for (int64_t r = 0; r < rows; r += lv.nr) {
                const int nv = static_cast<int>(std::min<int64_t>(lv.nr, rows - r));
                pack_strip(w, t0 + r, nv, s, lv, sc);
                lv.kernel(sc.strip.data(), s, xq, sc.tile.data() + r, rows, nv);
            }
            fn(ti, t0, rows, sc.tile.data(), thread);
        }
    });
}

} // namespace spanscope
