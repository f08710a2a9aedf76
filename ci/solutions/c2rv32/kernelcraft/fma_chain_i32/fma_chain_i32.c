#include <stdint.h>

/* fma_chain_i32, optimized for PicoRV32: four elements per iteration with constant offsets
   from pointers bumped once per iteration (the baseline bumps six pointers or recomputes six
   addresses per element) and a quarter of the loop branches. Up to three leftover elements
   take the plain loop. Arithmetic in uint32_t for defined int32 wraparound. */
void fma_chain_i32(const int32_t *a, const int32_t *b, const int32_t *c, const int32_t *d,
                   const int32_t *e, int32_t *y, int n)
{
    const uint32_t *pa = (const uint32_t *)a, *pb = (const uint32_t *)b,
                   *pc = (const uint32_t *)c, *pd = (const uint32_t *)d,
                   *pe = (const uint32_t *)e;
    uint32_t *py = (uint32_t *)y, *py_end4 = py + (n & ~3), *py_end = py + n;
    while (py != py_end4) {
        uint32_t t0 = (pa[0] * pb[0] + pc[0]) * pd[0] + pe[0];
        uint32_t t1 = (pa[1] * pb[1] + pc[1]) * pd[1] + pe[1];
        uint32_t t2 = (pa[2] * pb[2] + pc[2]) * pd[2] + pe[2];
        uint32_t t3 = (pa[3] * pb[3] + pc[3]) * pd[3] + pe[3];
        py[0] = t0;
        py[1] = t1;
        py[2] = t2;
        py[3] = t3;
        pa += 4; pb += 4; pc += 4; pd += 4; pe += 4; py += 4;
    }
    while (py != py_end)
        *py++ = (*pa++ * *pb++ + *pc++) * *pd++ + *pe++;
}
