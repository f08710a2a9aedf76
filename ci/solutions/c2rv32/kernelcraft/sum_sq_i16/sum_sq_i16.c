#include <stdint.h>

/* sum_sq_i16, optimized for PicoRV32: unrolled by eight with constant offsets from one pointer,
   so the loop's pointer bump and taken branch are paid once per eight elements (the baseline
   pays them every element). Up to seven leftover elements take the plain loop. The sum wraps
   like the baseline's (uint32_t accumulator). */
void sum_sq_i16(const int16_t *x, int32_t *out, int n)
{
    uint32_t acc = 0;
    const int16_t *end8 = x + (n & ~7), *end = x + n;
    while (x != end8) {
        int32_t v0 = x[0], v1 = x[1], v2 = x[2], v3 = x[3];
        int32_t v4 = x[4], v5 = x[5], v6 = x[6], v7 = x[7];
        x += 8;
        acc += (uint32_t)(v0 * v0) + (uint32_t)(v1 * v1) + (uint32_t)(v2 * v2) + (uint32_t)(v3 * v3)
             + (uint32_t)(v4 * v4) + (uint32_t)(v5 * v5) + (uint32_t)(v6 * v6) + (uint32_t)(v7 * v7);
    }
    while (x != end) {
        int32_t v = *x++;
        acc += (uint32_t)(v * v);
    }
    out[0] = (int32_t)acc;
}
