// The BF16 panels (kernels/bf16_panels.h) on AVX2: the widen_fma product on 8-lane vectors. A
// panel's pair-vector is two ymm loads (rows 0-7 and 8-15); each is widened to the even columns'
// f32 weights (a shift) and the odd columns' (a mask) and multiplied with fused multiply-adds,
// even column first, into one accumulator per row and token. Each result is the same chain of
// fused multiply-adds from zero over its columns in order as the AVX-512 widen_fma tiles', so the
// two give the same bits.
#pragma once

#include <cstdint>

namespace radixserve::kernels::x86 {

// y[t, r] for tokens [0, n) and the rows of panels [p0, p1) (16 rows each, `rows` in all, also
// y's row stride), from panels of `pairs` column pairs and activations xr: f32 values rounded to
// bf16, row stride ldx >= 2 * pairs, zero past the matrix's columns. Requires AVX2 and FMA.
void Avx2Bf16PanelRange(const uint32_t* panels, int64_t pairs, int64_t rows, const float* xr,
                        int64_t ldx, int64_t n, int64_t p0, int64_t p1, float* y);

}  // namespace radixserve::kernels::x86
