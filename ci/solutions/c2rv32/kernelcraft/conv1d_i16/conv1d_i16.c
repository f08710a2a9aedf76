#include <stdint.h>

/* conv1d_i16, optimized for PicoRV32: four outputs per pass. The window x[i..i+3] slides
   through registers, so each tap costs one x load and one w load for four multiply-adds
   (the baseline: two loads per multiply-add); taps are unrolled by two. Leftover outputs
   (L - K + 1 not a multiple of 4) and an odd last tap take the plain loop. */
void conv1d_i16(const int16_t *x, const int16_t *w, int32_t *y, int L, int K)
{
    int n = L - K + 1, i = 0;
    const int16_t *w_end = w + K, *w_pairs_end = w + (K & ~1);
    for (; i + 4 <= n; i += 4) {
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        const int16_t *xp = x + i + 3, *wp = w;
        int32_t x0 = x[i], x1 = x[i + 1], x2 = x[i + 2];
        while (wp != w_pairs_end) {
            int32_t w0 = wp[0], w1 = wp[1], x3 = xp[0], x4 = xp[1];
            wp += 2;
            xp += 2;
            s0 += x0 * w0 + x1 * w1;
            s1 += x1 * w0 + x2 * w1;
            s2 += x2 * w0 + x3 * w1;
            s3 += x3 * w0 + x4 * w1;
            x0 = x2;
            x1 = x3;
            x2 = x4;
        }
        if (wp != w_end) { /* K odd: the last tap */
            int32_t w0 = wp[0], x3 = xp[0];
            s0 += x0 * w0;
            s1 += x1 * w0;
            s2 += x2 * w0;
            s3 += x3 * w0;
        }
        y[i] = s0;
        y[i + 1] = s1;
        y[i + 2] = s2;
        y[i + 3] = s3;
    }
    for (; i < n; i++) {
        int32_t s = 0;
        const int16_t *xp = x + i, *wp = w;
        while (wp != w_end)
            s += *xp++ * *wp++;
        y[i] = s;
    }
}
