// What the CUDA tests share: the normalised error they compare by, random inputs, and the
// fixture that skips (or, under SPANSCOPE_REQUIRE_GPU, fails) where no GPU can run them.
#pragma once

#include "engine/model/backend.h"
#include "random_fill.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#ifdef SPANSCOPE_HAVE_CUDA
#include "engine/cuda/cuda_buffer.h"
#include "engine/cuda/cuda_context.h"
#endif

namespace spanscope::test {

/// NMSE = Σ(got − want)² / Σ want² (Σ(got − want)² when want is all zeros).
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        den += double(want[i]) * want[i];
    }
    return den > 0 ? num / den : num;
}

#ifdef SPANSCOPE_HAVE_CUDA

class CudaParity : public ::testing::Test {
protected:
    void SetUp() override {
        const auto st = backend_status(Backend::Cuda);
        // On the GPU machine (scripts/gpu-check.sh) a skip would hide a broken set-up.
        if (!st.usable && std::getenv("SPANSCOPE_REQUIRE_GPU"))
            FAIL() << "SPANSCOPE_REQUIRE_GPU is set but the cuda backend cannot run: " << st.detail;
        if (!st.usable)
            GTEST_SKIP() << "no GPU to compare with: " << st.detail;
        ctx_ = std::make_shared<cuda::Context>();
    }
    cudaStream_t stream() const { return ctx_->stream(); }

    template <typename T> cuda::DeviceBuffer<T> up(const std::vector<T>& h) {
        cuda::DeviceBuffer<T> d(h.size());
        d.upload(h.data(), h.size());
        return d;
    }
    template <typename T> std::vector<T> down(const cuda::DeviceBuffer<T>& d, size_t n) {
        ctx_->sync();
        std::vector<T> h(n);
        cuda::cuda_check(cudaMemcpy(h.data(), d.data(), n * sizeof(T), cudaMemcpyDeviceToHost),
                         "download");
        return h;
    }

    std::shared_ptr<cuda::Context> ctx_;
};

#endif

} // namespace spanscope::test
