// Include first in every kernel file: turns off automatic fused multiply-add for the rest of the
// translation unit. Fusing would change the rounding of d*q - m and of the quantisers' error
// sums; every product stays rounded as in ggml's reference C code and gguf-py (numpy). SIMD
// dot products still use FMA where written explicitly (_mm256_fmadd_ps).
// (No include guard on purpose: the pragma must reach each file that includes it.)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
