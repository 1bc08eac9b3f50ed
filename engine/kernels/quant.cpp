// Public quantisation API: argument checks and run-time selection of the kernel level.
#include "engine/kernels/quant.h"

#include "engine/kernels/quant_impl.h"

#include <atomic>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace spanscope {
namespace {

using quant_detail::KernelTable;

struct CpuFeatures {
    bool avx2 = false;    // AVX2 + FMA + F16C, with the OS saving YMM state
    bool avx512 = false;  // AVX-512 F/BW/VL/DQ/VNNI, with the OS saving ZMM and opmask state
    bool avxvnni = false; // AVX2 + AVX-VNNI (VEX vpdpbusd)
    bool amx = false;     // avx512 + AMX-TILE/INT8, the OS saving the tile state, use granted
};

/// Asks Linux for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM = 0x1023 with
/// XFEATURE_XTILEDATA = 18; Linux Documentation/arch/x86/xstate.rst): without it the first tile
/// instruction faults (SIGILL). True when granted.
bool request_amx_permission() {
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

CpuFeatures detect_cpu() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        return f;
    }
    const bool osxsave = (c >> 27) & 1;
    const bool fma = (c >> 12) & 1;
    const bool f16c = (c >> 29) & 1;
    const bool avx = (c >> 28) & 1;
    if (!osxsave || !avx) {
        return f;
    }
    // XCR0 (Intel SDM vol. 1, 13.3): bit 1 SSE, bit 2 YMM, bits 5-7 opmask/ZMM_Hi256/Hi16_ZMM.
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    const bool os_ymm = (xcr0_lo & 0x6u) == 0x6u;
    const bool os_zmm = (xcr0_lo & 0xE6u) == 0xE6u;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        return f;
    }
    const bool avx2 = (b >> 5) & 1;
    const bool avx512f = (b >> 16) & 1;
    const bool avx512dq = (b >> 17) & 1;
    const bool avx512bw = (b >> 30) & 1;
    const bool avx512vl = (b >> 31) & 1;
    const bool avx512vnni = (c >> 11) & 1;
    f.avx2 = os_ymm && avx2 && fma && f16c;
    f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
    // CPUID.(EAX=7, ECX=0):EDX bits 24, 25: AMX-TILE, AMX-INT8; XCR0 bits 17, 18: the OS saves
    // the tile configuration and data. Then the process must still ask for the data state.
    const bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
    const bool os_tiles = (xcr0_lo & 0x60000u) == 0x60000u;
    f.amx = f.avx512 && amx_tile && amx_int8 && os_tiles && request_amx_permission();
    // CPUID.(EAX=7, ECX=1):EAX bit 4 (Intel SDM vol. 2, CPUID): AVX-VNNI.
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d))
        f.avxvnni = f.avx2 && ((a >> 4) & 1);
#endif
    return f;
}

const CpuFeatures& cpu() {
    static const CpuFeatures features = detect_cpu();
    return features;
}

bool supported(KernelLevel level) {
    switch (level) {
    case KernelLevel::Scalar:
        return true;
    case KernelLevel::Avx2:
        return cpu().avx2;
    case KernelLevel::Avx512:
        return cpu().avx512;
    case KernelLevel::AvxVnni:
        return cpu().avxvnni;
    case KernelLevel::Amx:
        return cpu().amx;
    case KernelLevel::Auto:
        return true;
    }
    return false;
}

/// One table per level; a level's table starts from the one below it, so a type without a
/// kernel at that level falls back to the best lower one.
struct Tables {
    KernelTable scalar, avx2, avx512;
    Tables() {
        quant_detail::fill_scalar_kernels(scalar);
        avx2 = scalar;
        quant_detail::fill_avx2_kernels(avx2);
        avx512 = avx2;
        quant_detail::fill_avx512_kernels(avx512);
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

const KernelTable* table_for(KernelLevel level) {
    switch (level) {
    case KernelLevel::Scalar:
        return &tables().scalar;
    case KernelLevel::Avx2:
    case KernelLevel::AvxVnni:
        return &tables().avx2;
    case KernelLevel::Avx512:
    case KernelLevel::Amx:
        return &tables().avx512;
    case KernelLevel::Auto:
        break;
    }
    return &tables().scalar;
}

struct Current {
    std::atomic<KernelLevel> level;
    std::atomic<const KernelTable*> table;
    Current() {
        const KernelLevel best = best_kernel_level();
        level.store(best);
        table.store(table_for(best));
    }
};

Current& current() {
    static Current c;
    return c;
}

const quant_detail::TypeKernels& kernels(TensorType t) {
    return current().table.load(std::memory_order_relaxed)->by_type[quant_detail::slot(t)];
}

void check_row(TensorType t, int64_t n, const char* what) {
    const auto& tr = traits(t); // throws std::invalid_argument for an unknown type
    if (n < 0 || n % tr.block_size != 0) {
        throw std::invalid_argument(std::string(what) + ": row of " + std::to_string(n) +
                                    " elements is not a multiple of " +
                                    std::to_string(tr.block_size) + " for type " +
                                    std::string(tr.name));
    }
}

} // namespace

bool kernel_level_supported(KernelLevel level) {
    return supported(level);
}

KernelLevel best_kernel_level() {
    if (cpu().amx) {
        return KernelLevel::Amx;
    }
    if (cpu().avx512) {
        return KernelLevel::Avx512;
    }
    if (cpu().avxvnni) {
        return KernelLevel::AvxVnni;
    }
    if (cpu().avx2) {
        return KernelLevel::Avx2;
    }
    return KernelLevel::Scalar;
}

void set_kernel_level(KernelLevel level) {
    if (!supported(level)) {
        throw std::runtime_error("kernel level " + std::string(kernel_level_name(level)) +
                                 " is not supported by this CPU");
    }
    const KernelLevel resolved = level == KernelLevel::Auto ? best_kernel_level() : level;
    current().table.store(table_for(resolved));
    current().level.store(resolved);
}

KernelLevel kernel_level() {
    return current().level.load();
}

std::vector<KernelLevel> kernel_levels() {
    return {KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::AvxVnni, KernelLevel::Avx512,
            KernelLevel::Amx};
}

std::optional<KernelLevel> kernel_level_from_name(std::string_view name) {
    if (name == "best")
        return KernelLevel::Auto;
    for (const KernelLevel l : kernel_levels())
        if (kernel_level_name(l) == name)
            return l;
    return std::nullopt;
}

std::string_view kernel_level_name(KernelLevel level) {
    switch (level) {
    case KernelLevel::Scalar:
        return "scalar";
    case KernelLevel::Avx2:
        return "avx2";
    case KernelLevel::Avx512:
        return "avx512";
    case KernelLevel::AvxVnni:
        return "avxvnni";
    case KernelLevel::Amx:
        return "amx";
    case KernelLevel::Auto:
        return "auto";
    }
    return "unknown";
}

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
    check_row(t, n, "dequantize_row");
    kernels(t).dequantize(src, dst, n);
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
    check_row(t, n, "quantize_row");
    kernels(t).quantize(src, dst, n);
}

float vec_dot(TensorType t, int64_t n, const void* w, const void* xq) {
    check_row(t, n, "vec_dot");
    return kernels(t).vec_dot(n, w, xq);
}

void vec_dot_rows(TensorType t, int64_t n, int64_t n_rows, const void* w, size_t row_stride,
                  const void* xq, float* out) {
    check_row(t, n, "vec_dot_rows");
    if (const auto rows = kernels(t).vec_dot_rows) {
        rows(n, n_rows, w, row_stride, xq, out);
        return;
    }
    const auto fn = kernels(t).vec_dot; // one dispatch for all rows
    const auto* base = static_cast<const uint8_t*>(w);
    for (int64_t r = 0; r < n_rows; ++r)
        out[r] = fn(n, base + r * row_stride, xq);
}

} // namespace spanscope
