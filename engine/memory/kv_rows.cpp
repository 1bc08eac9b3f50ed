#include "engine/memory/kv_rows.h"

#include "engine/kernels/fp16.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/rope.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope {

std::vector<LayerRows> export_rows(const ModelMemory& memory, const std::vector<int>& layers,
                                   int32_t pos_begin, int32_t pos_end) {
    std::vector<LayerRows> out;
    std::vector<float> k, v;
    std::vector<int32_t> pos;
    for (const int il : layers) {
        const auto n = memory.layer(il).read_rows(pos_begin, pos_end, k, v, pos);
        if (n != pos_end - pos_begin)
            throw std::logic_error("layer " + std::to_string(il) + " holds " + std::to_string(n) +
                                   " of the " + std::to_string(pos_end - pos_begin) +
                                   " rows of positions [" + std::to_string(pos_begin) + ", " +
                                   std::to_string(pos_end) + ")");
        LayerRows r;
        r.layer = il;
        r.pos_begin = pos_begin;
        r.n_rows = n;
        r.k.resize(k.size());
        r.v.resize(v.size());
        for (size_t i = 0; i < k.size(); ++i) {
            r.k[i] = fp32_to_fp16(k[i]);
            r.v[i] = fp32_to_fp16(v[i]);
        }
        out.push_back(std::move(r));
    }
    return out;
}

void import_rows(ModelMemory& memory, const ModelInfo& info, const LayerRows& rows, int32_t delta,
                 int64_t max_piece) {
    if (rows.layer < 0 || rows.layer >= memory.n_layers() ||
        rows.layer >= static_cast<int>(info.layers.size()))
        throw std::invalid_argument("rows for layer " + std::to_string(rows.layer) +
                                    " of a model with " + std::to_string(info.n_layer));
    const auto& li = info.layers[static_cast<size_t>(rows.layer)];
    if (li.recurrent())
        throw std::invalid_argument("rows for layer " + std::to_string(rows.layer) +
                                    ", a recurrent layer (it keeps a state, not rows)");
    const int64_t width = static_cast<int64_t>(li.attn.n_kv_head) * li.attn.head_dim;
    if (static_cast<int64_t>(rows.k.size()) != rows.n_rows * width ||
        static_cast<int64_t>(rows.v.size()) != rows.n_rows * width)
        throw std::invalid_argument("rows of layer " + std::to_string(rows.layer) +
                                    " do not have the layer's shape");
    if (max_piece < 1)
        throw std::invalid_argument("max_piece must be at least 1");
    auto& mem = memory.layer(rows.layer);
    std::vector<float> k, v;
    std::vector<int32_t> pos;
    for (int64_t r0 = 0; r0 < rows.n_rows; r0 += max_piece) {
        const int64_t n = std::min(max_piece, rows.n_rows - r0);
        k.resize(static_cast<size_t>(n * width));
        v.resize(k.size());
        pos.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n * width; ++i) {
            k[i] = fp16_to_fp32(rows.k[r0 * width + i]);
            v[i] = fp16_to_fp32(rows.v[r0 * width + i]);
        }
        for (int64_t i = 0; i < n; ++i)
            pos[i] = rows.pos_begin + static_cast<int32_t>(r0 + i) + delta;
        // Full-head RoPE (Gemma 3), partial NeoX RoPE (Qwen3-Next: the first rope_dims of each
        // head) or none (Granite 4.0-H's NoPE layers: nothing to move).
        if (li.full_rope())
            rope_shift_neox(k.data(), n, li.attn.n_kv_head, li.attn.head_dim, delta, li.rope);
        else
            rope_shift_neox_partial(k.data(), n, li.attn.n_kv_head, li.attn.head_dim, li.rope_dims,
                                    delta, li.rope);
        mem.store(k.data(), v.data(), pos.data(), n);
    }
}

std::vector<int> global_layers(const ModelInfo& info) {
    std::vector<int> out;
    for (size_t i = 0; i < info.layers.size(); ++i)
        if (info.layers[i].global())
            out.push_back(static_cast<int>(i));
    return out;
}

std::vector<int> sliding_layers(const ModelInfo& info) {
    std::vector<int> out;
    for (size_t i = 0; i < info.layers.size(); ++i)
        if (info.layers[i].sliding())
            out.push_back(static_cast<int>(i));
    return out;
}

void trim_sliding_layers(ModelMemory& memory, const ModelInfo& info, int64_t n_past,
                         int64_t max_piece) {
    for (const int il : sliding_layers(info)) {
        const int64_t w = info.layers[static_cast<size_t>(il)].attn.window;
        const auto b = static_cast<int32_t>(std::max<int64_t>(0, n_past - (w - 1)));
        const auto rows = export_rows(memory, {il}, b, static_cast<int32_t>(n_past));
        memory.layer(il).clear();
        import_rows(memory, info, rows.front(), 0, max_piece);
    }
}

} // namespace spanscope
