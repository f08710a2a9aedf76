#include <stdint.h>

/* out[0] = sum of x[i] * x[i] for i < n, with int32 wraparound: each square fits in int32
   (at most 2^30), and the sum is accumulated in uint32_t, where overflow is defined. */
void sum_sq_i16(const int16_t *x, int32_t *out, int n)
{
    uint32_t acc = 0;
    for (int i = 0; i < n; i++)
        acc += (uint32_t)((int32_t)x[i] * (int32_t)x[i]);
    out[0] = (int32_t)acc;
}
