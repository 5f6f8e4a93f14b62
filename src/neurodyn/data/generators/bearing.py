"""Bearing degradation (remaining-useful-life) sequences: stand-in for PRONOSTIA / XJTU-SY (NAC §3.5).

One sample is one run-to-failure of a rolling bearing: vibration snapshots (horizontal and
vertical acceleration, ``n_points`` samples at ``fs``) every ``interval`` seconds, some dropped at
random (``drop_prob``) so the series is irregular. Each snapshot becomes 16 features, the paper's
preprocessing (Razzaq & Zhao's CARLE: windowed signal -> Morlet CWT -> statistical and domain
features), per axis:

    log10 CWT energy, dominant CWT frequency (kHz), CWT spectral entropy,
    kurtosis, skewness, mean, std of the snapshot

plus operating time (hours) and temperature (C). The target is the degradation per snapshot in
[0, 1] (per-step regression; use ``data.window`` to predict it from the last W snapshots).

Synthetic runs (``source="synthetic"``): shaft harmonics at ``f_r = rpm / 60`` plus noise, and after
a random fault onset (30-70 % of life) a train of resonance impulses at the fault frequency (outer
race ``BPFO = 3.57 f_r``; inner race ``BPFI = 5.43 f_r``, modulated by the shaft) whose amplitude
grows exponentially to failure, with a matching temperature rise. The label is 0 before the onset
and rises linearly to 1 at failure (``label="piecewise"``) or is the life fraction (``"linear"``).
Operating conditions (``CONDITIONS``): 0-2 are PRONOSTIA-like (1800/1650/1500 rpm, 4-5 kN, outer
race), 3-5 a second "XJTU-like" dataset (2100/2250/2400 rpm, 10-12 kN, inner race, another
resonance). Sample ``i`` runs condition ``conditions[i % len(conditions)]`` (``params/condition``),
so "train on condition 0, test on the others" is ``split_param: condition, train_values: [0]``.

Real files (``source="pronostia"`` or ``"xjtu"``, ``source_path`` = the data folder): one sample per
bearing folder (natural order), the same features, the label the life fraction (``linear``: the
physics-based labels of the paper's ref. 2025b are not public); XJTU-SY has no temperature (0). They are read
by the converter (the reader :mod:`neurodyn.data.formats.bearings`, reached through ``base.real_file`` with a
one-line note naming ``neurodyn convert FOLDER kind=pronostia``, the one route for real files); this module only
generates. The features, of synthetic and real runs alike, are :mod:`neurodyn.data.features.wavelets`'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import ConfigError, DataError
from ..features.wavelets import morlet_cwt, run_features, snapshot_features
from ..sequence_store import pad_sequences, take_sequences
from .base import Generator, check_source, real_file, register_generator, sample_rng

# rpm, load (kN), fault ("outer" | "inner"), resonance (Hz)
CONDITIONS = (
    (1800, 4.0, "outer", 3000.0),
    (1650, 4.2, "outer", 3000.0),
    (1500, 5.0, "outer", 3000.0),
    (2100, 12.0, "inner", 4200.0),
    (2250, 11.0, "inner", 4200.0),
    (2400, 10.0, "inner", 4200.0),
)
N_FEATURES = 16


@dataclass
class BearingConfig:
    source: str = "synthetic"  # synthetic | pronostia | xjtu
    source_path: str = ""  # pronostia / xjtu: folder of bearing folders
    conditions: tuple = (0, 1, 2, 3)
    life_min: int = 80  # snapshots per run (before dropping)
    life_max: int = 160
    interval: float = 60.0  # seconds between snapshots
    drop_prob: float = 0.2  # fraction of snapshots dropped (irregular sampling)
    fs: float = 25600.0
    n_points: int = 2560  # samples per snapshot (PRONOSTIA: 2560 = 0.1 s)
    n_freqs: int = 24  # CWT frequencies, log-spaced in [fs/256, fs/2.5]
    label: str = "piecewise"  # piecewise | linear
    max_len: int = 0  # padded length (0: life_max)
    max_snapshots: int = 0  # real files: keep at most this many snapshots (0: all)


# --------------------------------------------------------------------------------------------------
# Synthetic run-to-failure
# --------------------------------------------------------------------------------------------------


def synthetic_run(cfg: BearingConfig, condition: int, gen: torch.Generator) -> dict[str, np.ndarray]:
    """One run: ``signals (n, 2, points)``, ``times (n,)`` s, ``temperature (n,)``, ``label (n,)``."""
    rpm, load, fault, f_res = CONDITIONS[condition]
    u = lambda lo, hi, *shape: lo + (hi - lo) * torch.rand(tuple(shape), generator=gen, dtype=torch.float64)
    life = int(torch.randint(cfg.life_min, cfg.life_max + 1, (), generator=gen))
    keep = torch.rand(life, generator=gen) >= cfg.drop_prob
    keep[0] = keep[-1] = True
    k = torch.nonzero(keep).flatten().double()
    tau = k / (life - 1)  # life fraction in [0, 1]
    onset = float(u(0.3, 0.7))
    growth = float(u(2.0, 5.0))
    after = ((tau - onset) / (1 - onset)).clamp_min(0)
    severity = torch.expm1(growth * after) / math.expm1(growth)  # 0 -> 1 at failure
    n, npts = len(k), cfg.n_points
    t = torch.arange(npts, dtype=torch.float64) / cfg.fs
    f_r = rpm / 60.0
    f_fault = (3.57 if fault == "outer" else 5.43) * f_r
    sig = torch.zeros(n, 2, npts, dtype=torch.float64)
    for h, a in ((1, 0.08), (2, 0.04), (3, 0.02)):
        sig += a * torch.sin(2 * math.pi * h * f_r * t + u(0, 2 * math.pi, n, 2, 1))
    sig += (0.1 * (1 + 0.5 * severity))[:, None, None] * torch.randn(n, 2, npts, generator=gen, dtype=torch.float64)
    # impulse train at the fault frequency, each impulse a damped resonance
    period = cfg.fs / f_fault
    first = u(0, period, n)
    j = torch.arange(int(npts / period) + 2, dtype=torch.float64)
    pos = (first[:, None] + j[None] * period + u(-0.02, 0.02, n, len(j)) * period).round().long()
    spikes = torch.zeros(n, npts + 2 * int(period) + 2, dtype=torch.float64)
    spikes.scatter_add_(1, pos.clamp(0, spikes.shape[1] - 1), torch.ones_like(pos, dtype=torch.float64))
    spikes = spikes[:, :npts]
    klen = min(npts, int(8 * cfg.fs / f_res))
    tk = torch.arange(klen, dtype=torch.float64) / cfg.fs
    kernel = torch.exp(-0.08 * 2 * math.pi * f_res * tk) * torch.sin(2 * math.pi * f_res * tk)
    m = npts + klen
    train = torch.fft.irfft(torch.fft.rfft(spikes, m) * torch.fft.rfft(kernel, m), m)[:, :npts]
    if fault == "inner":
        train = train * (1 + 0.5 * torch.cos(2 * math.pi * f_r * t))
    amp = 2.5 * (load / 4.0) ** 0.5 * severity
    sig += (amp[:, None, None] * train[:, None, :]) * torch.tensor([1.0, 0.7], dtype=torch.float64)[None, :, None]
    temp = 35 + 0.4 * load + 8 * severity**2 + 0.3 * torch.randn(n, generator=gen, dtype=torch.float64)
    label = after if cfg.label == "piecewise" else tau
    return {
        "signals": sig.float(),
        "times": (k * cfg.interval).numpy(),
        "temperature": temp.float().numpy(),
        "label": label.float().numpy(),
    }


@register_generator
class BearingGenerator(
    Generator, name="bearing", config=BearingConfig, inputs=("x", "t", "mask"), targets=("y",), chunk_size=8
):
    def validate(self, cfg: BearingConfig) -> None:
        check_source(
            "bearing", cfg, ("synthetic", "pronostia", "xjtu"), ("pronostia", "xjtu"), "the folder of bearing folders"
        )
        bad = [c for c in cfg.conditions if not 0 <= int(c) < len(CONDITIONS)]
        if not cfg.conditions or bad:
            raise ConfigError(f"bearing conditions must be ids in 0..{len(CONDITIONS) - 1}, got {list(cfg.conditions)}")
        if not 3 <= cfg.life_min <= cfg.life_max:
            raise ConfigError(f"bearing needs 3 <= life_min <= life_max, got {cfg.life_min}, {cfg.life_max}")
        if not 0 <= cfg.drop_prob < 1 or cfg.n_points < 64 or cfg.n_freqs < 2 or not cfg.fs > 0:
            raise ConfigError("bearing needs 0 <= drop_prob < 1, n_points >= 64, n_freqs >= 2, fs > 0")
        if cfg.label not in ("piecewise", "linear"):
            raise ConfigError(f"bearing label must be 'piecewise' or 'linear', got {cfg.label!r}")

    def tag(self, cfg: BearingConfig) -> str:
        return cfg.source

    def generate(self, cfg: BearingConfig, ids: np.ndarray, seed: int, device: torch.device) -> dict[str, np.ndarray]:
        if cfg.source != "synthetic":
            return self._real(cfg, ids)
        xs, ts, ys, conds = [], [], [], []
        for i in ids:
            cond = int(cfg.conditions[int(i) % len(cfg.conditions)])
            run = synthetic_run(cfg, cond, sample_rng(seed, int(i)))
            xs.append(run_features(run["signals"], run["times"], run["temperature"], cfg.fs, cfg.n_freqs))
            ts.append((run["times"] / 3600.0).astype(np.float32))
            ys.append(run["label"][:, None])
            conds.append(cond)
        length = cfg.max_len or cfg.life_max
        x, mask = pad_sequences(xs, length)
        t, _ = pad_sequences(ts, length)
        y, _ = pad_sequences(ys, length)
        last = np.take_along_axis(t, np.maximum(mask.sum(1, keepdims=True) - 1, 0), 1)
        t = np.where(mask.astype(bool), t, last)
        return {
            "fields/x": x,
            "fields/t": t.astype(np.float32),
            "fields/mask": mask,
            "fields/y": y.astype(np.float32),
            "params/condition": np.asarray(conds, dtype=np.int64),
            "params/length": mask.sum(1).astype(np.int64),
        }

    def _real(self, cfg: BearingConfig, ids: np.ndarray) -> dict[str, np.ndarray]:
        """Bearings ``ids`` of the folder at ``source_path``, read and featurised by the converter."""
        data = real_file(
            "bearing", cfg.source, cfg.source_path, cfg.source, max_snapshots=cfg.max_snapshots, n_freqs=cfg.n_freqs
        )
        if int(ids.max()) >= data.n_samples:
            raise DataError(f"{cfg.source_path} holds {data.n_samples} bearings; cannot make sample {int(ids.max())}")
        out = take_sequences(data, ids, cfg.max_len or data.fields["x"].shape[1])
        return {k: out[k] for k in ("fields/x", "fields/t", "fields/mask", "fields/y")} | {
            "params/condition": out["params/condition"].astype(np.int64),
            "params/length": out["fields/mask"].sum(1).astype(np.int64),
        }


__all__ = [
    "BearingConfig",
    "BearingGenerator",
    "CONDITIONS",
    "N_FEATURES",
    "synthetic_run",
    "morlet_cwt",
    "snapshot_features",
    "run_features",
]
