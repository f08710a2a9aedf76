#include <stdint.h>

/* WRONG on purpose (test fixture): the second layer's output loop stops one short
   (o < O - 1), so the last output y[O-1] is never written and stays 0. h is right; y fails
   correctness. */
void ffn_i8(const int8_t *x, const int8_t *W1, const int32_t *b1, const int8_t *W2,
            const int32_t *b2, const int32_t *dims, int32_t *y, int8_t *h)
{
    int D = dims[0], H = dims[1], O = dims[2];

    for (int j = 0; j < H; j++) {
        int32_t acc = b1[j];
        for (int k = 0; k < D; k++)
            acc += (int32_t)W1[j * D + k] * (int32_t)x[k];
        if (acc < 0)
            acc = 0;
        acc >>= 7;
        if (acc > 127)
            acc = 127;
        h[j] = (int8_t)acc;
    }

    for (int o = 0; o < O - 1; o++) { /* BUG: should be o < O */
        int32_t acc = b2[o];
        for (int j = 0; j < H; j++)
            acc += (int32_t)W2[o * H + j] * (int32_t)h[j];
        y[o] = acc;
    }
}
