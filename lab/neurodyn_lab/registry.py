"""The laboratory's commands: ``python -m neurodyn_lab run NAME [--scale tiny|cpu|paper] [options...]``.

:data:`COMMANDS` maps a name, ``<paper>/<claim>`` as the module that runs it, to the lab module (its
``run(scale, argv)``), the arguments put before the user's (one module may hold several experiments) and a line
that says what it measures. To add one: a module with ``run(scale, argv)`` under its paper's folder and an entry
here.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import NamedTuple

SCALES = ("tiny", "cpu", "paper")


class Command(NamedTuple):
    module: str  # neurodyn_lab.<paper>.<claim>
    description: str
    args: tuple[str, ...] = ()  # put before the user's arguments


COMMANDS: dict[str, Command] = {
    "lamo/scaling": Command(
        "neurodyn_lab.lamo.scaling",
        "LaMO Table 10: forward+backward time and peak memory per "
        "sample against Transolver and full attention as the number of points grows",
    ),
    "geomano/table1": Command(
        "neurodyn_lab.geomano.table1",
        "GeoMaNO Table 1 (and LaMO's): GeoMaNO vs LaMO vs Transolver vs FNO on Darcy and Navier-Stokes, several seeds",
    ),
    "geomano/table3": Command(
        "neurodyn_lab.geomano.table3",
        "GeoMaNO Table 3: 1-D / 2-D SSM x positional embedding x "
        "correction R (none = D only, 0001/0011/0111, learnable), several seeds",
    ),
    "geomano/kernel": Command(
        "neurodyn_lab.geomano.kernel",
        "GeoMaNO Table 2: the GeoMamba kernel vs a plain "
        "four-direction Mamba kernel, time and memory on 32^2-128^2 patch grids",
    ),
    "stssm/table1": Command(
        "neurodyn_lab.stssm.tables",
        "ST-SSM Table 1: KS nu=0.1, ST-SSM vs FFNO, Multi-Input FFNO, S4-FFNO, U-Net",
        ("--table", "1"),
    ),
    "stssm/table5": Command(
        "neurodyn_lab.stssm.tables",
        "ST-SSM Table 5: factorisations on a TorusLi-like set (ST-SSM, -VM, -FF, FNO2D-R)",
        ("--table", "5"),
    ),
    "stssm/speed": Command(
        "neurodyn_lab.stssm.speed",
        "ST-SSM vs FFNO training step on 64x64 fields, and one S4D layer's cost as the sequence grows",
    ),
    "chonn/order": Command(
        "neurodyn_lab.chonn.experiments",
        "CHONN Fig. 3: order-n CKB vs n stacked first-order blocks on T1-T4 (point/spectral/derivative RelL2)",
        ("order",),
    ),
    "chonn/poisson": Command(
        "neurodyn_lab.chonn.experiments",
        "CHONN Fig. 4g: Poisson order ablation, U-Net (order 0) vs CKB orders 1-4, ID K=16 / OOD K=20",
        ("poisson",),
    ),
    "chonn/darcy": Command(
        "neurodyn_lab.chonn.experiments",
        "CHONN Fig. 4c-d: CHONN-UNet vs U-Net vs FNO on Darcy, PDEBench metric table, relative gains",
        ("darcy",),
    ),
    "chonn/rollout": Command(
        "neurodyn_lab.chonn.experiments",
        "CHONN Fig. 5: CHONN-FNO vs FNO, shallow-water rollout and NS 40-step rollout from 3/5/10 frames",
        ("rollout",),
    ),
    "chonn/gain": Command(
        "neurodyn_lab.chonn.experiments",
        "CHONN merge choice: the scale of freshly built Cascaded "
        "Kirchhoff Blocks per stage, for every merge (no training)",
        ("gain",),
    ),
    "chonn/speed": Command(
        "neurodyn_lab.chonn.speed",
        "CHONN: training-step time of Cascaded Kirchhoff Blocks of "
        "order 1-4 against their backbones (chain, U-Net, FNO)",
    ),
    "nac/table1": Command(
        "neurodyn_lab.nac.table1",
        "NAC Table 1 at our scale: NAC profiles, modes and ablations vs "
        "baselines on event digits, activity and bearing RUL, several seeds",
    ),
    "nac/table5": Command(
        "neurodyn_lab.nac.table5",
        "NAC Table 5: run time and peak memory of NAC modes / Top-K vs "
        "attention, CfC, LTC, GRU, LSTM, ODE-RNN; block Top-K recall and memory",
    ),
    "nac/profile": Command(
        "neurodyn_lab.nac.profile", "NAC: the share of a training step spent in the NCP backbone (torch.profiler)"
    ),
    "operators/darcy": Command(
        "neurodyn_lab.operators.darcy",
        "LaMO vs Transolver vs FNO on Darcy: same data, epochs and seeds (--runs label=preset;overrides for variants)",
    ),
    "operators/resolution_transfer": Command(
        "neurodyn_lab.operators.resolution_transfer",
        "Darcy trained at 17x17, tested zero-shot at 17x17 and 33x33: FNO, LaMO (resample / tokens), GeoMaNO",
    ),
    "operators/ns_resolution": Command(
        "neurodyn_lab.operators.ns_resolution",
        "Navier-Stokes nu = 1e-4: the 64^2 data's solve against 128^2 and 256^2 solves over t <= 20",
    ),
    "time_series/uea": Command(
        "neurodyn_lab.time_series.uea",
        "NAC (paper, tuned, conv) vs GRU, LSTM, CfC, LTC, "
        "MHA, ODE-RNN and the majority / 1-NN / MiniRocket baselines on UEA/UCR archive files",
    ),
    "time_series/uea_floors": Command(
        "neurodyn_lab.time_series.uea_floors",
        "the UEA/UCR floors rerun under its "
        "pre-registered protocol (protocols/time_series/uea_floors.yaml): "
        "--archive DIRS runs it, --report, --dry-run (its runs and CPU-hours)",
    ),
    "time_series/rocket_baselines": Command(
        "neurodyn_lab.time_series.rocket_baselines",
        "MiniRocket, MultiRocket "
        "and Hydra on the archive files the pages cite, beside their published "
        "30-resample means (whole train file, raw series, seeds 0-2)",
    ),
    "time_series/uea_tuning": Command(
        "neurodyn_lab.time_series.uea_tuning",
        "the sequence presets' settings chosen on validation of UEA/UCR training files; test files never read",
    ),
    "time_series/long_series": Command(
        "neurodyn_lab.time_series.long_series",
        "long archive series (ACSF1, OSULeaf, "
        "PLAID): pooling or a strided front end chosen on validation, tested once, "
        "beside 1-NN and MiniRocket",
    ),
    "protocol": Command(
        "neurodyn_lab.protocol",
        "the paper experiments at the papers' protocol or scaled to two "
        "cores, as resumable queues (--status, --lanes a b c d, --report)",
    ),
}


def load(name: str):
    """The module of command ``name`` (imported)."""
    return importlib.import_module(COMMANDS[name].module)


def run(name: str, scale: str = "cpu", argv: Sequence[str] = ()) -> int:
    """Run command ``name`` at ``scale`` with the user's arguments ``argv``."""
    if name not in COMMANDS:
        raise SystemExit(f"unknown lab command {name!r}; known: {', '.join(sorted(COMMANDS))}")
    if scale not in SCALES:
        raise SystemExit(f"unknown scale {scale!r}; expected tiny, cpu or paper")
    command = COMMANDS[name]
    return int(load(name).run(scale, [*command.args, *argv]) or 0)
