"""CHONN's cascade at initialisation: the scale of a freshly built Cascaded Kirchhoff Block per stage, for every
merge of the scan directions (the measurement behind ``merge="mean"``; chonn.md, "merge").

    python -m neurodyn_lab run chonn/gain --merges sum mean norm skip_scale per_direction
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

GAIN_CASES = (("uni", 1, 16), ("bi", 1, 16), ("cross", 2, 64))  # (scan, dims, d_model)


def init_gain(
    merge: str,
    scan: str,
    dims: int,
    d_model: int,
    order: int,
    seeds: Sequence[int] = (0, 1, 2),
    size: int = 256,
    batch: int = 8,
    **block_kw,
) -> dict[str, Any]:
    """Scale of a freshly built :class:`~neurodyn.nn.kirchhoff.CascadedKirchhoffBlock` on ``x ~ N(0, 1)``.

    Returns, averaged over ``seeds`` (one block and one input per seed): ``stage`` (``std(y_r) / std(y_{r-1})``
    with ``y_0 = u``, Eq. 35), ``cum`` (``std(y_r) / std(u)``), ``branch`` (``std(W_o(ybar * g)) / std(x)``)
    and ``grad`` (the norm of the loss gradient ``mean(out^2)`` at ``in_proj.weight``, the block's first layer).
    ``size`` is the sequence length (1-D) or the number of grid points (2-D: a square grid).
    """
    from neurodyn.nn.kirchhoff import CascadedKirchhoffBlock

    stage, cum, branch, grad = [], [], [], []
    for seed in seeds:
        torch.manual_seed(seed)
        blk = CascadedKirchhoffBlock(d_model, order=order, dims=dims, scan=scan, merge=merge, **block_kw)
        side = int(round(math.sqrt(size)))
        x = torch.randn(batch, *((size,) if dims == 1 else (side, side)), d_model)
        with torch.no_grad():
            xn = blk.norm(x)
            u = F_silu(blk.conv(blk.in_proj(xn).chunk(2, dim=-1)[0].movedim(-1, 1)))
            ys = blk.stages(u)
        stds = [u.std().item()] + [y.std().item() for y in ys]
        stage.append([stds[r + 1] / stds[r] for r in range(order)])
        cum.append([stds[r + 1] / stds[0] for r in range(order)])
        out = blk(x, residual=False)
        branch.append(out.std().item() / x.std().item())
        out.square().mean().backward()
        grad.append(blk.in_proj.weight.grad.norm().item())
    return {
        "merge": merge,
        "scan": scan,
        "dims": dims,
        "d_model": d_model,
        "order": order,
        "stage": np.mean(stage, 0).tolist(),
        "cum": np.mean(cum, 0).tolist(),
        "branch": float(np.mean(branch)),
        "grad": float(np.mean(grad)),
    }


def F_silu(x):
    return torch.nn.functional.silu(x)


def gain_table(
    merges: Sequence[str], orders: Sequence[int] = (1, 2, 3, 4), seeds: Sequence[int] = (0, 1, 2), **block_kw
) -> str:
    """Markdown table of :func:`init_gain` for every merge, scan mode (``GAIN_CASES``) and order; the
    gradient column is relative to the first-order block of the same merge and scan."""
    lines = [
        "| merge | scan | order | stage gains std(y_r)/std(y_r-1) | std(y_r)/std(u) | branch/x | grad / order-1 grad |",
        "| --- | --- | ---: | --- | --- | ---: | ---: |",
    ]
    for merge in merges:
        for scan, dims, d_model in GAIN_CASES:
            g1 = None
            for n in orders:
                g = init_gain(merge, scan, dims, d_model, n, seeds, **block_kw)
                g1 = g["grad"] if n == 1 else g1
                rel = g["grad"] / g1 if g1 else float("nan")
                lines.append(
                    f"| {merge} | {scan} | {n} | "
                    + " / ".join(f"{v:.3g}" for v in g["stage"])
                    + " | "
                    + " / ".join(f"{v:.3g}" for v in g["cum"])
                    + f" | {g['branch']:.3g} | {rel:.3g} |"
                )
    return "\n".join(lines)
