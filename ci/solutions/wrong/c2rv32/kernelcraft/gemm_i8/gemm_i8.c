#include <stdint.h>

/* WRONG on purpose (test fixture): the k loop stops one short (k < K - 1), so every C[i][j]
   misses its last product A[i][K-1] * B[K-1][j]. Compiles and runs; fails correctness. */
void gemm_i8(const int8_t *A, const int8_t *B, int32_t *C, int M, int N, int K)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            int32_t acc = 0;
            for (int k = 0; k < K - 1; k++) /* BUG: should be k < K */
                acc += (int32_t)A[i * K + k] * (int32_t)B[k * N + j];
            C[i * N + j] = acc;
        }
    }
}
