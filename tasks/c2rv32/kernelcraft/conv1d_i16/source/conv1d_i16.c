#include <stdint.h>

/* Valid 1-D correlation: y[i] = sum over k < K of x[i + k] * w[k], for 0 <= i <= L - K.
   x has L int16 elements, w has K (1 <= K <= L), y has L - K + 1 int32 elements. */
void conv1d_i16(const int16_t *x, const int16_t *w, int32_t *y, int L, int K)
{
    for (int i = 0; i <= L - K; i++) {
        int32_t acc = 0;
        for (int k = 0; k < K; k++)
            acc += (int32_t)x[i + k] * (int32_t)w[k];
        y[i] = acc;
    }
}
