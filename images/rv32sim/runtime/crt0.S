/* rv32sim start-up code.  Preprocessed by gcc; the kernel's entry point is
 * given on the compile line as -DARENA_ENTRY=name.
 *
 * The host (rv32sim.py) writes the kernel's arguments as 8 little-endian
 * 32-bit words at ARGS_ADDR; they go to a0..a7 so a plain C function
 *     void kernel(const T *in0, ..., T *out0, ..., int scalar0, ...)
 * can be called with no glue.  Memory is zero at start, so .bss needs no
 * clearing and .data is already in place (the image is loaded at 0). */

#ifndef ARENA_ENTRY
#error "compile with -DARENA_ENTRY=<kernel function name>"
#endif

#define STACK_TOP 0x01000000
#define ARGS_ADDR 0x00100000
#define EXIT_ADDR 0x10000000

	.section .text.start, "ax"
	.globl _start
	.type _start, @function
_start:
	.option push
	.option norelax
	la	gp, __global_pointer$
	.option pop
	li	sp, STACK_TOP
	li	t0, ARGS_ADDR
	lw	a0, 0(t0)
	lw	a1, 4(t0)
	lw	a2, 8(t0)
	lw	a3, 12(t0)
	lw	a4, 16(t0)
	lw	a5, 20(t0)
	lw	a6, 24(t0)
	lw	a7, 28(t0)
	call	ARENA_ENTRY
	/* Kernels return void: the exit code is always 0.  The 32-bit store
	 * to EXIT_ADDR is what ends the simulation. */
	li	t0, EXIT_ADDR
	sw	zero, 0(t0)
1:	ebreak
	j	1b
	.size _start, . - _start
