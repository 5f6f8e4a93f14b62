"""Evaluation metrics for channels-last fields ``(B, *spatial, C)`` (1 to 3 spatial axes), after PDEBench.

PDEBench (Takamoto et al. 2022, ``metric_func`` in ``pdebench/models/metrics.py``) splits the error by
what it measures. Its fields are ``(B, *spatial, T, C)``; here a field is one time step (or a steady
field), so apply these per step of a rollout. All metrics are computed in float64 on ``e = pred - target``
without gradients. For one sample ``b`` and channel ``c``, with ``N`` grid points ``x``:

``rel_l2``   ``||e_b|| / ||target_b||`` over all points AND channels (the training loss
             :func:`neurodyn.train.losses.relative_lp`, ``p=2``); one value per sample.
``rmse``     ``sqrt(mean_x e_bc(x)^2)``.
``nrmse``    ``||e_bc||_2 / ||target_bc||_2`` over space (= rmse / rms(target)); denominator clamped to
             ``eps`` (PDEBench has no clamp).
``max_err``  ``max |e|`` over ALL samples, points and channels (the worst point error in the test set).
``crmse``    error of the conserved quantity (spatial mean): ``d_bc = mean_x pred_bc - mean_x target_bc``
             (PDEBench: difference of spatial sums divided by N). Aggregated as PDEBench does: per channel
             ``sqrt(mean_b d_bc^2)`` (RMS over samples), then the mean over channels.
             :func:`sample_metrics` reports ``|d_bc|``.
``brmse``    ``sqrt(mean over boundary points of e_bc^2)``; the boundary is the set of grid points with at
             least one index equal to 0 or ``n_d - 1`` (1D: the two end points; 2D: the four edges; 3D: the
             six faces), each point counted ONCE.
``frmse_low/mid/high``  RMSE of the error's low/mid/high wavenumber band. ``F = rfftn(e_bc, norm="forward")``
             (the DFT divided by N, as PDEBench divides by ``nx*ny``), integer wavenumbers ``k_d`` (signed,
             ``-n/2..n/2``) and radial wavenumber ``|k| = sqrt(sum_d k_d^2)``. Bands (PDEBench defaults
             ``iLow=4, iHigh=12``, i.e. ``floor|k|`` in ``[0,4)``, ``[4,12)``, ``[12, ...)``):
             low ``|k| < 4``, mid ``4 <= |k| < 12``, high ``|k| >= 12`` (every remaining mode up to the
             Nyquist corner). Then ``frmse_band = sqrt(sum_{k in band} |F_k|^2)``, where the sum runs over
             the FULL spectrum (the rfft half-spectrum with conjugate-pair weights 2). By Parseval this is
             exactly the RMSE of the band-pass-filtered error field, and
             ``frmse_low^2 + frmse_mid^2 + frmse_high^2 = rmse^2`` for every sample and channel. Wavenumbers
             are per-axis mode indices (periods per domain length), whatever the physical extent of each axis.

Where ``max_err``, ``brmse`` and the ``frmse`` bands differ from PDEBench's numbers, and why:
docs/design.md#metrics-where-they-differ-from-pdebenchs.

Aggregation over a test set: every metric except ``max_err`` (max) and ``crmse`` (RMS over samples) is
the mean over samples and channels of the per-sample, per-channel values (``rel_l2``: over samples). This
is a per-sample average, so the result does not depend on the batching (PDEBench averages per-batch means,
which does). :class:`MetricAccumulator` keeps float64 sums, counts and maxes so that streaming over batches,
and over ranks with ``reduce_()``, gives the same numbers as :func:`evaluate_fields` on the whole set.

``grid=False`` (meshes, point clouds: ``spatial == (N,)`` without grid structure) drops ``brmse`` and
the ``frmse_*`` bands, which need a uniform grid.

Empty bands: a band that holds no mode of the grid is not reported at all (no key), never as 0 (a 16 x 16 grid's
largest ``|k|`` is ``sqrt(8^2 + 8^2) = 11.3``, so it has no high band; an 8-point 1-D grid has neither a mid nor a
high band): an absent error is not a perfect score. :func:`band_modes` counts each band's modes. An accumulator fed
grids of several sizes averages each band over the samples whose grid has it.

Duplicates: for a field of ONE channel ``nrmse`` and ``rel_l2`` are the same quantity by definition (both
``||e_b|| / ||target_b||`` over the sample's points; they differ only in float rounding); with several channels
they differ (``rel_l2`` pools the channels, ``nrmse`` averages the per-channel ratios). Both are kept in the
records (``metrics.jsonl``), and :func:`shown_metrics` keeps one of them in the tables a person reads.

``mask`` (point clouds padded to a common point count: ``(B, *spatial)`` bool, True on real points) restricts
every metric to the real points of each sample: the sums and means above run over them only (``rmse``
divides by the sample's own point count), so a padded sample scores exactly as the same sample unpadded.
A mask needs ``grid=False`` (padding breaks the grid the boundary and spectral metrics assume).

Zero targets: ``rel_l2`` (and ``nrmse``) of a sample whose target is all zero is undefined; its denominator is
clamped to ``eps``, so it reports the error norm times ``1/eps``. :meth:`MetricAccumulator.compute` then warns
once, with the number of such samples, pointing to the absolute metrics beside it (values are unchanged).

NaN policy: metrics never hide NaN. A NaN/inf in ``pred`` makes every metric that touches that point NaN
(the FFT spreads it to every band; ``max_err`` propagates it), and the accumulator keeps it to the end.
Shape mismatches raise ``ValueError`` naming both shapes.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor

from .losses import check_fields, relative_lp

__all__ = [
    "METRIC_NAMES",
    "DEFAULT_BANDS",
    "boundary_mask",
    "radial_wavenumber_sq",
    "fourier_band_rmse",
    "band_modes",
    "METRIC_DEFINITIONS",
    "metric_definition",
    "shown_metrics",
    "sample_metrics",
    "evaluate_fields",
    "MetricAccumulator",
]

DEFAULT_BANDS: tuple[int, int] = (4, 12)
GRID_METRICS = ("brmse", "frmse_low", "frmse_mid", "frmse_high")
METRIC_NAMES = ("rel_l2", "rmse", "nrmse", "max_err", "crmse") + GRID_METRICS
# how per-sample values combine over samples: mean, RMS, or max
_KIND = {
    "rel_l2": "mean",
    "rmse": "mean",
    "nrmse": "mean",
    "max_err": "max",
    "crmse": "rms",
    "brmse": "mean",
    "frmse_low": "mean",
    "frmse_mid": "mean",
    "frmse_high": "mean",
}


def _check_bands(bands: Sequence[int]) -> tuple[int, int]:
    try:
        lo, hi = (int(b) for b in bands)
        ok = lo == bands[0] and hi == bands[1] and 0 < lo < hi
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"bands must be two integers 0 < i_low < i_high (PDEBench: (4, 12)), got {bands!r}.")
    return lo, hi


def boundary_mask(spatial_shape: Sequence[int], device: torch.device | str | None = None) -> Tensor:
    """Boolean mask of shape ``spatial_shape``: True where some index is 0 or ``n_d - 1``."""
    mask = torch.zeros(tuple(spatial_shape), dtype=torch.bool, device=device)
    for axis, n in enumerate(spatial_shape):
        idx = [slice(None)] * len(spatial_shape)
        for end in (0, n - 1):
            idx[axis] = end
            mask[tuple(idx)] = True
    return mask


def radial_wavenumber_sq(spatial_shape: Sequence[int], device: torch.device | str | None = None) -> Tensor:
    """Integer ``|k|^2 = sum_d k_d^2`` on the ``rfftn`` layout of ``spatial_shape`` (last axis halved)."""
    grids = []
    for axis, n in enumerate(spatial_shape):
        i = torch.arange(n // 2 + 1 if axis == len(spatial_shape) - 1 else n, device=device)
        grids.append(torch.where(i <= (n - 1) // 2, i, i - n))  # signed frequencies as torch.fft.fftfreq * n
    mesh = torch.meshgrid(*grids, indexing="ij")
    return sum(k * k for k in mesh)


def _half_spectrum_weight(n_last: int, device) -> Tensor:
    """Multiplicity of each rfft mode in the full spectrum (2 for modes whose conjugate is not stored)."""
    w = torch.full((n_last // 2 + 1,), 2.0, dtype=torch.float64, device=device)
    w[0] = 1.0
    if n_last % 2 == 0:
        w[-1] = 1.0
    return w


def band_modes(spatial_shape: Sequence[int], bands: Sequence[int] = DEFAULT_BANDS) -> tuple[int, int, int]:
    """How many Fourier modes of a grid of ``spatial_shape`` fall in the low, mid and high band (full spectrum,
    each conjugate pair counted twice); 0 means the grid has no such band and it is not reported."""
    lo, hi = _check_bands(bands)
    spatial = tuple(int(n) for n in spatial_shape)
    k2 = radial_wavenumber_sq(spatial).reshape(-1, spatial[-1] // 2 + 1)
    w = _half_spectrum_weight(spatial[-1], k2.device)
    counts = [(w * m.double()).sum() for m in (k2 < lo * lo, (k2 >= lo * lo) & (k2 < hi * hi), k2 >= hi * hi)]
    return tuple(int(round(float(c))) for c in counts)  # type: ignore[return-value]


BAND_NAMES = ("frmse_low", "frmse_mid", "frmse_high")


def fourier_band_rmse(err: Tensor, bands: Sequence[int] = DEFAULT_BANDS) -> Tensor:
    """Band RMSEs ``(B, C, 3)`` (low, mid, high) of an error field ``err: (B, *spatial, C)``.

    ``sqrt(sum_{k in band} |F_k|^2)`` over the full spectrum with ``F = DFT(err)/N``; see the module
    docstring. The squares of the three bands sum to ``mean_x err^2`` (Parseval).
    """
    lo, hi = _check_bands(bands)
    spatial = tuple(err.shape[1:-1])
    dims = tuple(range(1, err.dim() - 1))
    spec = torch.fft.rfftn(err, dim=dims, norm="forward")
    w = _half_spectrum_weight(spatial[-1], err.device).reshape((-1, 1))  # broadcast over (..., n_last', C)
    power = (spec.real.square() + spec.imag.square()) * w
    power = power.reshape(err.shape[0], -1, err.shape[-1])  # (B, modes, C)
    k2 = radial_wavenumber_sq(spatial, err.device).reshape(-1)
    masks = (k2 < lo * lo, (k2 >= lo * lo) & (k2 < hi * hi), k2 >= hi * hi)
    # sum over modes with a 0/1 matrix so that NaN in any mode reaches every band (no silent masking)
    sel = torch.stack(masks, dim=1).to(power.dtype)  # (modes, 3)
    return torch.einsum("bmc,mk->bck", power, sel).sqrt()


@torch.no_grad()
def sample_metrics(
    pred: Tensor,
    target: Tensor,
    *,
    bands: Sequence[int] = DEFAULT_BANDS,
    grid: bool = True,
    eps: float = 1e-12,
    mask: Tensor | None = None,
) -> dict[str, Tensor]:
    """Per-sample metric values, float64 tensors of shape ``(B, C)`` (``rel_l2``: ``(B, 1)``).

    Keys are :data:`METRIC_NAMES` (without ``brmse``/``frmse_*`` when ``grid=False``, and without each
    ``frmse_*`` band the grid has no mode in: :func:`band_modes`). ``crmse`` holds the
    per-sample ``|mean pred - mean target|``; ``max_err`` the per-sample max ``|e|``. ``mask`` ``(B, *spatial)``
    (True on real points; ``grid=False`` only) restricts them to the real points. See the module docstring.
    """
    check_fields(pred, target, "metrics", min_spatial=1, max_spatial=3)
    _check_bands(bands)
    pred, target = pred.detach().double(), target.detach().double()
    B, C = pred.shape[0], pred.shape[-1]
    spatial = tuple(pred.shape[1:-1])
    err = pred - target
    e = err.reshape(B, -1, C)
    if mask is not None:
        if grid:
            raise ValueError("metrics: a point mask needs grid=False (padded points have no grid).")
        if tuple(mask.shape) != (B, *spatial):
            raise ValueError(
                f"metrics: mask of shape {tuple(mask.shape)} does not match the points "
                f"{(B, *spatial)} of fields {tuple(pred.shape)}."
            )
        m = mask.reshape(B, -1, 1).to(pred.device).bool()
        e = torch.where(m, e, torch.zeros((), dtype=e.dtype, device=e.device))
        t = torch.where(m, target.reshape(B, -1, C), torch.zeros((), dtype=e.dtype, device=e.device))
        count = m.sum(dim=1).double().clamp_min(1)  # (B, 1): each sample's real points
    else:
        t = target.reshape(B, -1, C)
        count = torch.full((B, 1), float(e.shape[1]), dtype=torch.float64, device=e.device)
    e2 = e.square()
    rmse = (e2.sum(dim=1) / count).sqrt()
    out = {
        "rel_l2": (e.reshape(B, -1).norm(dim=1) / t.reshape(B, -1).norm(dim=1).clamp_min(eps)).unsqueeze(1)
        if mask is not None
        else relative_lp(pred, target, 2, reduction="none", eps=eps).unsqueeze(1),
        "rmse": rmse,
        "nrmse": rmse / (t.square().sum(dim=1) / count).sqrt().clamp_min(eps),
        "max_err": e.abs().amax(dim=1),
        "crmse": (e.sum(dim=1) / count).abs(),
    }
    if grid:
        mask = boundary_mask(spatial, pred.device).reshape(-1)
        out["brmse"] = e2[:, mask, :].mean(dim=1).sqrt()
        f = fourier_band_rmse(err, bands)
        for name, modes, value in zip(BAND_NAMES, band_modes(spatial, bands), f.unbind(dim=-1)):
            if modes:
                out[name] = value
    return out


class MetricAccumulator:
    """Streaming, batch-independent evaluation: ``update(pred, target)`` per batch, ``compute()`` at the end.

    Keeps float64 per-channel sums of per-sample values (sums of squares for ``crmse``), running per-channel
    maxima for ``max_err``, and the sample count, so ``compute()`` equals :func:`evaluate_fields` on the
    concatenation of all batches whatever the batch sizes. Under ``torch.distributed`` call ``reduce_()``
    once on every rank after the last ``update`` (it all-reduces sums, counts and maxima in place; a rank
    that saw no data takes part too); without an initialised process group it does nothing.
    """

    def __init__(self, *, bands: Sequence[int] = DEFAULT_BANDS, grid: bool = True, eps: float = 1e-12):
        self.bands = _check_bands(bands)
        self.grid = grid
        self.eps = eps
        self.names = tuple(n for n in METRIC_NAMES if grid or n not in GRID_METRICS)
        self.reset()

    def reset(self) -> None:
        """Forget everything accumulated so far."""
        self._stats: dict[str, Tensor] | None = None
        self._channels: int | None = None
        self._count = 0
        self._band_count = torch.zeros(len(BAND_NAMES), dtype=torch.float64)  # samples whose grid has each band
        self._zero_targets = 0  # samples whose target norm is <= eps (relative L2 undefined)
        self._reduced = False

    @property
    def count(self) -> int:
        """Number of samples accumulated (over all ranks after ``reduce_()``)."""
        return self._count

    def _init_stats(self, channels: int, device) -> None:
        self._channels = channels
        self._stats = {}
        for n in self.names:
            size = 1 if n == "rel_l2" else channels
            fill = -math.inf if _KIND[n] == "max" else 0.0
            self._stats[n] = torch.full((size,), fill, dtype=torch.float64, device=device)

    def update(self, pred: Tensor, target: Tensor, mask: Tensor | None = None) -> None:
        """Add a batch of fields ``(B, *spatial, C)`` (``mask`` ``(B, *spatial)``: the real points of padded
        point clouds, ``grid=False`` only)."""
        if self._reduced:
            raise RuntimeError("MetricAccumulator.update() after reduce_(): call reset() to start a new evaluation.")
        vals = sample_metrics(pred, target, bands=self.bands, grid=self.grid, eps=self.eps, mask=mask)
        channels = pred.shape[-1]
        if self._stats is None:
            self._init_stats(channels, vals["rmse"].device)
        elif channels != self._channels:
            raise ValueError(
                f"MetricAccumulator.update: fields have {channels} channels (shape "
                f"{tuple(pred.shape)}) but earlier batches had {self._channels}."
            )
        for n in self.names:
            if n not in vals:  # a Fourier band this grid has no mode in
                continue
            v = vals[n].to(self._stats[n].device)
            kind = _KIND[n]
            if kind == "mean":
                self._stats[n] += v.sum(dim=0)
            elif kind == "rms":
                self._stats[n] += v.square().sum(dim=0)
            else:  # torch.maximum and amax propagate NaN
                self._stats[n] = torch.maximum(self._stats[n], v.amax(dim=0))
        self._count += pred.shape[0]
        self._band_count += torch.tensor([pred.shape[0] if n in vals else 0 for n in BAND_NAMES], dtype=torch.float64)
        kept = target.detach() if mask is None else target.detach() * mask[..., None].to(target.dtype)
        norms = torch.linalg.vector_norm(kept.reshape(target.shape[0], -1).double(), dim=1)
        self._zero_targets += int((norms <= self.eps).sum())

    def reduce_(self) -> MetricAccumulator:
        """All-reduce sums, counts (SUM) and maxima (MAX) over the default process group, in place.

        No-op unless ``torch.distributed`` is available and initialised, or when already reduced. Every
        rank must call it (it is a collective). NaN maxima survive the reduction.
        """
        import torch.distributed as dist

        if self._reduced or not (dist.is_available() and dist.is_initialized()):
            return self
        device = (
            torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        )
        # 1. agree on the channel count (ranks without data have none)
        big = 2**62
        c = self._channels if self._channels is not None else -1
        cc = torch.tensor([c, -(c if c >= 0 else big)], dtype=torch.int64, device=device)
        dist.all_reduce(cc, op=dist.ReduceOp.MAX)
        c_max, c_min = int(cc[0]), -int(cc[1])
        self._reduced = True
        if c_max < 0:  # nobody has data
            return self
        if c_min != c_max:
            raise ValueError(
                f"MetricAccumulator.reduce_: ranks accumulated fields with different channel "
                f"counts ({c_min} and {c_max})."
            )
        if self._stats is None:
            self._init_stats(c_max, device)
        # 2. sums and count in one SUM, maxima (NaN -> +inf plus a NaN flag in the SUM) in one MAX
        sum_names = [n for n in self.names if _KIND[n] != "max"]
        max_names = [n for n in self.names if _KIND[n] == "max"]
        maxes = torch.cat([self._stats[n].to(device) for n in max_names])
        sums = torch.cat(
            [self._stats[n].to(device) for n in sum_names]
            + [self._band_count.to(device)]
            + [
                torch.tensor([float(self._count), float(self._zero_targets)], dtype=torch.float64, device=device),
                torch.isnan(maxes).double(),
            ]
        )
        maxes = torch.where(torch.isnan(maxes), torch.full_like(maxes, math.inf), maxes)
        dist.all_reduce(sums, op=dist.ReduceOp.SUM)
        dist.all_reduce(maxes, op=dist.ReduceOp.MAX)
        n_max = maxes.numel()
        maxes = torch.where(sums[-n_max:] > 0, torch.full_like(maxes, math.nan), maxes)
        self._count = int(round(float(sums[-n_max - 2])))
        self._zero_targets = int(round(float(sums[-n_max - 1])))
        self._band_count = sums[-n_max - 2 - len(BAND_NAMES) : -n_max - 2].cpu().clone()
        offset = 0
        for n in sum_names:
            k = self._stats[n].numel()
            self._stats[n] = sums[offset : offset + k].clone()
            offset += k
        offset = 0
        for n in max_names:
            k = self._stats[n].numel()
            self._stats[n] = maxes[offset : offset + k].clone()
            offset += k
        return self

    def compute(self) -> dict[str, float]:
        """The metrics over everything accumulated: ``{name: float}`` (see the module docstring); a Fourier band
        no accumulated grid has a mode in is left out."""
        if self._stats is None or self._count == 0:
            raise RuntimeError("MetricAccumulator.compute(): no samples were accumulated (call update() first).")
        out = {}
        for n in self.names:
            s, kind = self._stats[n], _KIND[n]
            count = float(self._band_count[BAND_NAMES.index(n)]) if n in BAND_NAMES else self._count
            if count == 0:
                continue
            if kind == "mean":
                v = (s / count).mean()
            elif kind == "rms":
                v = (s / count).sqrt().mean()
            else:
                v = s.amax()
            out[n] = float(v)
        if self._zero_targets:
            warnings.warn(
                f"{self._zero_targets} of {self._count} samples have an all-zero target (norm <= "
                f"{self.eps:g}), for which relative L2 is undefined (it divides by {self.eps:g} instead, "
                f"so rel_l2 = {out['rel_l2']:.3g} says little); judge them by the absolute metrics "
                "reported beside it (rmse, max_err).",
                stacklevel=2,
            )
        return out


def evaluate_fields(
    pred: Tensor, target: Tensor, *, bands: Sequence[int] = DEFAULT_BANDS, grid: bool = True, eps: float = 1e-12
) -> dict[str, float]:
    """All metrics of a batch (or a whole test set) of fields ``(B, *spatial, C)``, as ``{name: float}``.

    Keys: ``rel_l2, rmse, nrmse, max_err, crmse`` and, if ``grid``, ``brmse`` and the ``frmse_low, frmse_mid,
    frmse_high`` bands the grid has modes in. Definitions and aggregation in the module docstring.
    """
    acc = MetricAccumulator(bands=bands, grid=grid, eps=eps)
    acc.update(pred, target)
    return acc.compute()


# --------------------------------------------------------------------------------------------------
# what each metric means, for the tables a person reads (summary.md, the command line)

_LO, _HI = DEFAULT_BANDS
BAND_RANGES = {"frmse_low": f"|k| < {_LO}", "frmse_mid": f"{_LO} <= |k| < {_HI}", "frmse_high": f"|k| >= {_HI}"}
_BAND = "rmse of the error's Fourier modes with radial wavenumber {} (k: periods per domain length); target's units"
METRIC_DEFINITIONS: dict[str, str] = {
    "rel_l2": "relative L2 error ||pred - target|| / ||target|| over each sample's points and channels, mean over "
    "samples; dimensionless (0 exact, 1 as large as the target)",
    "rmse": "root-mean-square error sqrt(mean over points of (pred - target)^2) per sample and channel, mean over "
    "both; target's units",
    "nrmse": "rmse / RMS of the target (||e_c|| / ||target_c||) per sample and channel, mean over both; dimensionless",
    "max_err": "largest |pred - target| over all samples, points and channels; target's units",
    "crmse": "error of the spatial mean (the conserved quantity), |mean pred - mean target| per sample and channel, "
    "RMS over samples, mean over channels; target's units",
    "brmse": "rmse over the grid's boundary points (an index 0 or n - 1 on some axis), mean over samples and "
    "channels; target's units",
    "frmse_low": _BAND.format(BAND_RANGES["frmse_low"]),
    "frmse_mid": _BAND.format(BAND_RANGES["frmse_mid"]),
    "frmse_high": _BAND.format(BAND_RANGES["frmse_high"] + ", up to the grid's highest mode") + " (the three bands' "
    "squares add up to rmse^2)",
    # autoregressive tasks (neurodyn.train.tasks.AutoregressiveTask.evaluate)
    "rel_l2_rollout": "relative L2 error of each trajectory over all its frames, points and channels, every frame "
    "predicted from the model's own earlier frames, mean over trajectories; dimensionless",
    "rel_l2_teacher_forced": "relative L2 error of each trajectory over all its frames, points and channels, each "
    "frame predicted from the true frames before it, mean over trajectories; dimensionless",
}
"""One line per field metric: what it measures, how it is aggregated, and its units (``target's units``: the units
the data stores the target in; predictions are compared in them, after the training normalizers are undone)."""


ROLLOUT_REL_L2 = (
    "relative L2 error of each trajectory over all its predicted frames, points and channels, in the "
    "task's evaluation mode (train.eval_mode, rollout by default), mean over trajectories; dimensionless"
)


def metric_definition(name: str, autoregressive: bool = False) -> str | None:
    """The one-line definition of metric ``name`` (``frame_<m>``: ``<m>`` of each predicted frame of a rollout,
    taken as a field; ``autoregressive``: ``rel_l2`` is an autoregressive task's, over whole trajectories), or None
    for a name this module does not define."""
    if autoregressive and name == "rel_l2":
        return ROLLOUT_REL_L2
    if name in METRIC_DEFINITIONS:
        return METRIC_DEFINITIONS[name]
    if name.startswith("frame_") and name[6:] in METRIC_DEFINITIONS:
        return f"per predicted frame (one frame of one trajectory is a sample): {METRIC_DEFINITIONS[name[6:]]}"
    return None


def shown_metrics(metrics: dict, channels: int | None = None) -> tuple[list[str], list[str]]:
    """The names of ``metrics`` worth a row in a table a person reads, and one note per name left out.

    Numbers only (per-step curves stay in ``metrics.jsonl``). ``nrmse`` (also ``frame_nrmse``) is left out where it
    is ``rel_l2`` by definition: a field of one channel (``channels == 1``; ``channels=None``: where the two agree to
    1e-9, which for several channels they do only by chance). An autoregressive task's ``rel_l2`` is
    ``rel_l2_<its evaluation mode>`` by construction; that one is left out. A Fourier band a grid has no mode in is
    absent from ``metrics`` already (:func:`band_modes`); where the grid's other metrics are there, a note says so
    (``n/a``)."""
    keys = [k for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    notes = []
    for prefix in ("", "frame_"):
        nrmse, rel = metrics.get(f"{prefix}nrmse"), metrics.get(f"{prefix}rel_l2")
        if nrmse is None or rel is None:
            continue
        same = channels == 1 if channels is not None else abs(nrmse - rel) <= 1e-9 * max(abs(rel), 1e-300)
        if same:
            keys.remove(f"{prefix}nrmse")
            notes.append(
                f"{prefix}nrmse is not shown: for a field of one channel it is {prefix}rel_l2 by definition "
                "(both ||pred - target|| / ||target|| over each sample's points)"
            )
    for mode in ("rollout", "teacher_forced"):
        name = f"rel_l2_{mode}"
        if name in keys and "rel_l2" in keys and "rel_l2_per_step" in metrics and metrics[name] == metrics["rel_l2"]:
            keys.remove(name)
            notes.append(f"rel_l2 is {name} (the evaluation mode); {name} is not shown twice")
    for prefix in ("", "frame_"):
        if f"{prefix}brmse" in keys:
            missing = [b for b in BAND_NAMES if f"{prefix}{b}" not in keys]
            notes += [f"{prefix}{b}: n/a, the grid has no Fourier mode with {BAND_RANGES[b]}" for b in missing]
    return keys, notes


# --------------------------------------------------------------------------------------------------
# metrics of the CHONN paper (per sample, averaged over the samples)


@torch.no_grad()
def order_metrics(pred: Tensor, true: Tensor) -> dict[str, float]:
    """RelL2 point (Eq. 48), spectral (Eq. 49; one-sided rfft) and derivative (Eq. 50; periodic central
    difference) of 1-D fields ``(N, L, 1)`` or ``(N, L)``, each the mean over samples."""
    p = pred.double().reshape(pred.shape[0], -1)
    t = true.double().reshape(true.shape[0], -1)
    rel = lambda a, b: ((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-300)).mean().item()  # noqa: E731
    fp, ft = torch.fft.rfft(p, dim=-1), torch.fft.rfft(t, dim=-1)
    der = lambda f: (f.roll(-1, dims=-1) - f.roll(1, dims=-1)) / 2  # noqa: E731  (h cancels in the ratio)
    return {"rel_l2_point": rel(p, t), "rel_l2_spec": rel(fp, ft), "rel_l2_der": rel(der(p), der(t))}


@torch.no_grad()
def poisson_metrics(pred: Tensor, true: Tensor) -> dict[str, float]:
    """RelL1 in % (Eq. 59), nRMSE normalised by the true field's range (Eq. 60) and MaxMSE (Eq. 61, the
    largest squared point error) of fields ``(N, *spatial, C)``, each per sample then averaged."""
    n = pred.shape[0]
    e = (pred.double() - true.double()).reshape(n, -1)
    t = true.double().reshape(n, -1)
    rel_l1 = 100 * e.abs().sum(-1) / t.abs().sum(-1).clamp_min(1e-300)
    nrmse = e.square().mean(-1).sqrt() / (t.amax(-1) - t.amin(-1)).clamp_min(1e-300)
    return {
        "rel_l1_pct": rel_l1.mean().item(),
        "nrmse_range": nrmse.mean().item(),
        "max_mse": e.square().amax(-1).mean().item(),
    }
