#include "engine/sekv/span_factor_pack.h"

#include <algorithm>
#include <stdexcept>

namespace spanscope {

int64_t packed_factor_floats(const SekvSpan& span) {
    int64_t n = 0;
    for (const auto* fs : {&span.k, &span.v})
        for (const auto& f : *fs)
            n += static_cast<int64_t>(f.left.size()) + f.rank * f.dim;
    return n;
}

std::vector<PackedHeadFactors> pack_span_factors(const SekvSpan& span, float* out) {
    if (span.k.size() != span.v.size())
        throw std::invalid_argument("pack_span_factors: key and value factors differ in heads");
    std::vector<PackedHeadFactors> heads(span.k.size());
    int64_t at = 0;
    const auto put = [&](const std::vector<float>& wide) {
        const int64_t o = at;
        std::copy(wide.begin(), wide.end(), out + at);
        at += static_cast<int64_t>(wide.size());
        return o;
    };
    const int64_t dim = span.k.empty() ? 0 : span.k[0].dim;
    for (size_t g = 0; g < heads.size(); ++g) {
        const auto& fk = span.k[g];
        const auto& fv = span.v[g];
        for (const auto* f : {&fk, &fv})
            if (!factors_fit(*f, span.size, dim))
                throw std::invalid_argument("pack_span_factors: factors of head " +
                                            std::to_string(g) +
                                            " do not match the span's rows and dimension");
        auto& h = heads[g];
        h.rank_k = fk.rank;
        h.rank_v = fv.rank;
        h.left_k = put(fk.left_f32());
        h.right_k = put(fk.right_f32());
        h.left_v = put(fv.left_f32());
        h.right_v = put(fv.right_f32());
    }
    return heads;
}

void unpack_span_rows(const float* block, const PackedHeadFactors& h, int64_t size, int64_t dim,
                      float* k, float* v) {
    const auto product = [&](const float* left, const float* right, int rank, float* rows) {
        for (int64_t i = 0; i < size; ++i)
            for (int64_t j = 0; j < dim; ++j) {
                float a = 0.0f;
                for (int r = 0; r < rank; ++r)
                    a += left[i * rank + r] * right[r * dim + j];
                rows[i * dim + j] = a;
            }
    };
    product(block + h.left_k, block + h.right_k, h.rank_k, k);
    product(block + h.left_v, block + h.right_v, h.rank_v, v);
}

} // namespace spanscope
