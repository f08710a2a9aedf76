#include <stdint.h>

/* gemm_i8, optimized for PicoRV32: register blocking. Each inner step loads two A bytes and
   four B bytes and does eight multiply-adds (the baseline: two loads per multiply-add), with
   pointer increments instead of index arithmetic. Leftover rows (M odd) and columns (N not a
   multiple of 4) take narrower versions of the same loop. */
void gemm_i8(const int8_t *A, const int8_t *B, int32_t *C, int M, int N, int K)
{
    int i = 0;
    for (; i + 2 <= M; i += 2) {
        const int8_t *a0 = A + i * K, *a1 = a0 + K, *a_end = a0 + K;
        int32_t *c0 = C + i * N, *c1 = c0 + N;
        int j = 0;
        for (; j + 4 <= N; j += 4) {
            int32_t s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
            const int8_t *p0 = a0, *p1 = a1, *b = B + j;
            while (p0 != a_end) {
                int32_t x0 = *p0++, x1 = *p1++;
                int32_t y0 = b[0], y1 = b[1], y2 = b[2], y3 = b[3];
                b += N;
                s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
                s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
            }
            c0[j] = s00; c0[j + 1] = s01; c0[j + 2] = s02; c0[j + 3] = s03;
            c1[j] = s10; c1[j + 1] = s11; c1[j + 2] = s12; c1[j + 3] = s13;
        }
        for (; j < N; j++) {
            int32_t s0 = 0, s1 = 0;
            const int8_t *p0 = a0, *p1 = a1, *b = B + j;
            while (p0 != a_end) {
                int32_t y = *b;
                b += N;
                s0 += *p0++ * y;
                s1 += *p1++ * y;
            }
            c0[j] = s0;
            c1[j] = s1;
        }
    }
    if (i < M) { /* the last row when M is odd */
        const int8_t *a0 = A + i * K, *a_end = a0 + K;
        int32_t *c0 = C + i * N;
        int j = 0;
        for (; j + 4 <= N; j += 4) {
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            const int8_t *p0 = a0, *b = B + j;
            while (p0 != a_end) {
                int32_t x = *p0++;
                s0 += x * b[0]; s1 += x * b[1]; s2 += x * b[2]; s3 += x * b[3];
                b += N;
            }
            c0[j] = s0; c0[j + 1] = s1; c0[j + 2] = s2; c0[j + 3] = s3;
        }
        for (; j < N; j++) {
            int32_t s = 0;
            const int8_t *p0 = a0, *b = B + j;
            while (p0 != a_end) {
                s += *p0++ * *b;
                b += N;
            }
            c0[j] = s;
        }
    }
}
