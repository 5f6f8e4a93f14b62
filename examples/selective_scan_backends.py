"""Call ``neurodyn.ops.selective_scan`` (Mamba's S6 recurrence) with each backend and compare them.

Every backend computes the same recurrence (``h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t``, ``y_t = C_t h_t + D u_t``,
``out_t = y_t silu(z_t)``) and its gradients: ``ref`` (a sequential loop: the oracle), ``torch`` (chunked PyTorch),
``cpp`` (the fused CPU kernel, when it builds), ``triton`` (the Triton kernels: CUDA tensors, or CPU tensors under
``TRITON_INTERPRET=1``), ``mamba`` (mamba-ssm's CUDA kernel, when installed), ``auto`` (the fastest available).

    python examples/selective_scan_backends.py                    # on CUDA when there is a GPU, else the CPU
    python examples/selective_scan_backends.py --tiny             # a small problem: what the library's tests run
"""

import argparse
import time

import torch

from neurodyn.ops import selective_scan

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--tiny", action="store_true", help="batch 2, 8 channels, 64 steps")
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
args = parser.parse_args()
b, d, n, L = (2, 8, 4, 64) if args.tiny else (4, 256, 16, 2048)
g = torch.Generator().manual_seed(0)
u, delta, z = (torch.randn(b, d, L, generator=g) for _ in range(3))
A = -torch.rand(d, n, generator=g) - 0.5  # real, negative: decaying states
B, C = torch.randn(b, n, L, generator=g), torch.randn(b, n, L, generator=g)  # input-dependent
D, bias = torch.randn(d, generator=g), torch.randn(d, generator=g)
args_cpu = (u, delta, A, B, C, D, z, bias)

reference = selective_scan(*(t.double() for t in args_cpu), delta_softplus=True, backend="ref")
for backend in ("ref", "torch", "cpp", "triton", "mamba", "auto"):
    tensors = [t.to(args.device) for t in args_cpu]
    try:
        t0 = time.perf_counter()
        out = selective_scan(*tensors, delta_softplus=True, backend=backend)
        if out.is_cuda:
            torch.cuda.synchronize()
        ms = 1e3 * (time.perf_counter() - t0)
    except (RuntimeError, ValueError, ImportError) as exc:  # a backend this machine lacks says why in one line
        print(f"{backend:>7s}: not here ({str(exc).splitlines()[0][:100]})")
        continue
    err = (out.double().cpu() - reference).abs().max().item()
    print(f"{backend:>7s}: max |out - ref| = {err:.2e}   ({ms:.1f} ms, first call)")
