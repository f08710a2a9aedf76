#include <stdint.h>

/* WRONG on purpose (test fixture): the output loop stops one short (i < L - K instead of
   i <= L - K), so the last output y[L-K] is never written and stays 0. Fails correctness. */
void conv1d_i16(const int16_t *x, const int16_t *w, int32_t *y, int L, int K)
{
    for (int i = 0; i < L - K; i++) { /* BUG: should be i <= L - K */
        int32_t acc = 0;
        for (int k = 0; k < K; k++)
            acc += (int32_t)x[i + k] * (int32_t)w[k];
        y[i] = acc;
    }
}
