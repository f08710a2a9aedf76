#include <stdint.h>

/* WRONG on purpose (test fixture): the loop starts at i = 1, so x[0]^2 is left out of the
   sum. Compiles and runs; fails correctness (unless x[0] happens to be 0). */
void sum_sq_i16(const int16_t *x, int32_t *out, int n)
{
    uint32_t acc = 0;
    for (int i = 1; i < n; i++) /* BUG: should start at i = 0 */
        acc += (uint32_t)((int32_t)x[i] * (int32_t)x[i]);
    out[0] = (int32_t)acc;
}
