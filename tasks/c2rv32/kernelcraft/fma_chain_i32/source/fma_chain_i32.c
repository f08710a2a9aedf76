#include <stdint.h>

/* y[i] = (a[i] * b[i] + c[i]) * d[i] + e[i] for i < n, with int32 wraparound: the arithmetic
   is done in uint32_t, where overflow is defined, and the result is read back as int32. */
void fma_chain_i32(const int32_t *a, const int32_t *b, const int32_t *c, const int32_t *d,
                   const int32_t *e, int32_t *y, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)a[i] * (uint32_t)b[i] + (uint32_t)c[i];
        y[i] = (int32_t)(t * (uint32_t)d[i] + (uint32_t)e[i]);
    }
}
