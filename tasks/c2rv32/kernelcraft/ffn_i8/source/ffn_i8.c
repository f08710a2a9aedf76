#include <stdint.h>

/* A two-layer int8 feed-forward block. dims = {D, H, O}.
     h[j] = min(max(W1[j] . x + b1[j], 0) >> 7, 127)    for j < H   (int8 output)
     y[o] = W2[o] . h + b2[o]                            for o < O   (int32 output)
   x[D], W1[H][D], W2[O][H] (row-major) and h are int8; b1, b2, y and the sums are int32. */
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

    for (int o = 0; o < O; o++) {
        int32_t acc = b2[o];
        for (int j = 0; j < H; j++)
            acc += (int32_t)W2[o * H + j] * (int32_t)h[j];
        y[o] = acc;
    }
}
