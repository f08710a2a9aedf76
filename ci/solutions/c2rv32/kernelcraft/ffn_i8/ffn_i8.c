#include <stdint.h>

/* ffn_i8, optimized for PicoRV32: both layers are one matrix-vector routine that does four
   rows per pass, so each vector element is loaded once for four multiply-adds (the baseline
   loads it for every one), with the columns unrolled by two and pointer increments instead of
   index arithmetic. Leftover rows and an odd last column take plain loops. The routine is
   inlined twice; `h != 0` (layer 1: clamp into int8 h) or not (layer 2: store int32 y) folds
   at compile time. */

static inline __attribute__((always_inline)) int8_t activate(int32_t s)
{
    if (s < 0)
        s = 0;
    s >>= 7;
    if (s > 127)
        s = 127;
    return (int8_t)s;
}

static inline __attribute__((always_inline)) void
matvec(const int8_t *W, const int8_t *v, const int32_t *bias, int rows, int cols, int32_t *y,
       int8_t *h)
{
    const int8_t *v_end = v + cols, *v_pairs_end = v + (cols & ~1);
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const int8_t *w0 = W + r * cols, *w1 = w0 + cols, *w2 = w1 + cols, *w3 = w2 + cols;
        const int8_t *p = v;
        int32_t s0 = bias[r], s1 = bias[r + 1], s2 = bias[r + 2], s3 = bias[r + 3];
        while (p != v_pairs_end) {
            int32_t x0 = p[0], x1 = p[1];
            p += 2;
            s0 += w0[0] * x0 + w0[1] * x1;
            s1 += w1[0] * x0 + w1[1] * x1;
            s2 += w2[0] * x0 + w2[1] * x1;
            s3 += w3[0] * x0 + w3[1] * x1;
            w0 += 2; w1 += 2; w2 += 2; w3 += 2;
        }
        if (p != v_end) { /* odd number of columns: the last one */
            int32_t x0 = *p;
            s0 += *w0 * x0; s1 += *w1 * x0; s2 += *w2 * x0; s3 += *w3 * x0;
        }
        if (h) {
            h[r] = activate(s0); h[r + 1] = activate(s1);
            h[r + 2] = activate(s2); h[r + 3] = activate(s3);
        } else {
            y[r] = s0; y[r + 1] = s1; y[r + 2] = s2; y[r + 3] = s3;
        }
    }
    for (; r < rows; r++) {
        const int8_t *w0 = W + r * cols, *p = v;
        int32_t s = bias[r];
        while (p != v_end)
            s += *w0++ * *p++;
        if (h)
            h[r] = activate(s);
        else
            y[r] = s;
    }
}

void ffn_i8(const int8_t *x, const int8_t *W1, const int32_t *b1, const int8_t *W2,
            const int32_t *b2, const int32_t *dims, int32_t *y, int8_t *h)
{
    int D = dims[0], H = dims[1], O = dims[2];
    matvec(W1, x, b1, H, D, (int32_t *)0, h);
    matvec(W2, h, b2, O, H, y, (int8_t *)0);
}
