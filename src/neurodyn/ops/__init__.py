"""Pure tensor functions (no parameters) for neural-dynamics layers.

Every fast primitive has a slow, obviously correct reference beside it:

* :func:`selective_scan` / :func:`selective_scan_ref` -- Mamba's selective scan (mamba-ssm's
  ``selective_scan_fn`` signature, plus ``reverse`` and ``initial_state``); fused C++ kernel on CPU,
  chunked PyTorch scan anywhere, mamba-ssm's kernel on CUDA when installed.
* :func:`head_scan` / :func:`head_scan_ref` -- the multi-head selective scan with one step and decay per head
  (Mamba-2 heads; LaMO, GeoMaNO) in the time-major layout, on its own fused CPU kernel.
* :func:`linear_scan` -- ``h_t = a_t h_{t-1} + x_t`` along one axis.
* :func:`cross_scan` / :func:`cross_merge` / :func:`cross_unscan` -- four-way grid traversals.
* :func:`selective_scan_2d` / :func:`selective_scan_2d_ref` -- GeoMaNO's 2-D scan with correction R.
* :func:`s4d_kernel`, :func:`fft_conv`, :func:`s4d_recurrent` -- S4D convolution and its recurrence.
* :func:`knc_scan` / :func:`knc_scan_ref` -- CHONN's Kirchhoff-cell scan (``ops.knc_scan``).
* :func:`exact_logits` / :func:`euler_logits` / :func:`steady_logits` -- NAC's ODE logits (``ops.nac_logits``).
* :func:`block_topk` / :func:`exact_topk` -- sparse top-K key selection (``ops.block_topk``).
* :func:`ncp_mlp` / :func:`ncp_mlp_ref` -- NAC's pruned NCP backbone on every query-key pair, one fused CPU op
  (Triton kernels on CUDA; ``ops.ncp_mlp``).
* truncated DFT matrices against ``torch.fft`` (``ops.spectral``); :func:`fused_mlp` / :func:`mlp_ref`.
* ``ops.activations.tanh`` -- ``2 sigmoid(2x) - 1`` on CPU float32, against ``torch.tanh``.
* :func:`resolve_directions` -- the one scan-direction resolver (``ops.directions``).

The classical time-series features (DTW, ridge, MiniRocket) live beside the baselines they serve, in
:mod:`neurodyn.baselines`.

An op with several backends is a folder (flash-linear-attention's shape): ``selective_scan/``, ``head_scan/``,
``linear_scan/``, ``scan_2d/``, ``ncp_mlp/`` each hold the public function and its backend choice (``interface.py``),
the reference, the PyTorch path, the fused C++ kernel's operator (``cpu.py``) and the Triton kernels
(``triton_kernels.py``) with their operator (``triton_op.py``); the multi-head scan runs on the selective scan's Triton
kernels, the Kirchhoff-cell scan (``knc_scan.py``) on the selective scan's operators with their ZOH input. Every fused
kernel is a PyTorch operator ``torch.ops.neurodyn.*`` made by one helper (``ops.custom_op.define_op``: schema, fake,
autograd), so every function above traces under ``torch.compile(fullgraph=True)`` and ``torch.export``. The C++
kernels are built by ``ops.cpu_kernel`` on first use; the Triton kernels are loaded by ``ops.triton_loader`` when they
first run (no ``triton`` import with neurodyn): ``backend="triton"``, the ``"auto"`` choice for CUDA tensors when
``triton`` imports, pending a GPU measurement.
"""

from .block_topk import block_topk, exact_topk
from .cross_scan import PAPER_ORDER, VMAMBA_ORDER, cross_merge, cross_scan, cross_scan_indices, cross_unscan
from .directions import resolve_directions
from .fused_mlp import fused_mlp, mlp_ref
from .head_scan import head_scan, head_scan_ref
from .knc_scan import knc_scan, knc_scan_ref
from .linear_scan import linear_scan
from .nac_logits import euler_logits, exact_logits, steady_logits
from .ncp_mlp import ncp_mlp, ncp_mlp_ref
from .s4d import fft_conv, s4d_kernel, s4d_recurrent
from .scan_2d import selective_scan_2d, selective_scan_2d_ref
from .selective_scan import resolve_backend, selective_scan, selective_scan_ref

__all__ = [
    "block_topk",
    "exact_topk",
    "resolve_directions",
    "fused_mlp",
    "mlp_ref",
    "head_scan",
    "head_scan_ref",
    "knc_scan",
    "knc_scan_ref",
    "euler_logits",
    "exact_logits",
    "steady_logits",
    "ncp_mlp",
    "ncp_mlp_ref",
    "PAPER_ORDER",
    "VMAMBA_ORDER",
    "cross_merge",
    "cross_scan",
    "cross_scan_indices",
    "cross_unscan",
    "fft_conv",
    "linear_scan",
    "resolve_backend",
    "s4d_kernel",
    "s4d_recurrent",
    "selective_scan",
    "selective_scan_2d",
    "selective_scan_2d_ref",
    "selective_scan_ref",
]
