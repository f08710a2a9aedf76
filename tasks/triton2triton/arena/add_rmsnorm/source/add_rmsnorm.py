"""Fused residual add + RMSNorm in Triton: h = x + residual; out = h / rms(h) * weight.

Baseline: correct, deliberately unoptimized. Two kernels: the add writes h to global memory,
then the norm reads h twice (sum of squares, then normalize) in small blocks with one warp.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, r_ptr, h_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask).to(tl.float32)
    tl.store(h_ptr + offs, (x + r).to(h_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_kernel(h_ptr, w_ptr, out_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    h_row = h_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        h = tl.load(h_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += h * h
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        h = tl.load(h_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (h * inv_rms * w).to(out_ptr.dtype.element_ty), mask=mask)


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """Returns (out, h) for 2-D contiguous x and residual of the same shape and dtype."""
    assert x.ndim == 2 and x.shape == residual.shape and x.is_contiguous() and residual.is_contiguous()
    n_rows, n_cols = x.shape
    h = torch.empty_like(x)
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 256),)](x, residual, h, n, BLOCK=256, num_warps=1)
    rmsnorm_kernel[(n_rows,)](h, weight, out, n_cols, n_cols, eps, BLOCK=64, num_warps=1)
    return out, h
