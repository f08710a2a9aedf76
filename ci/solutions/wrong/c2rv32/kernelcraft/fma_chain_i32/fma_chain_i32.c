#include <stdint.h>

/* WRONG on purpose (test fixture): a misplaced parenthesis computes a*b + c*d + e instead of
   (a*b + c)*d + e. Compiles and runs; fails correctness. */
void fma_chain_i32(const int32_t *a, const int32_t *b, const int32_t *c, const int32_t *d,
                   const int32_t *e, int32_t *y, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)a[i] * (uint32_t)b[i] + (uint32_t)c[i] * (uint32_t)d[i]; /* BUG */
        y[i] = (int32_t)(t + (uint32_t)e[i]);
    }
}
