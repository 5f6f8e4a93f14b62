"""Training-step cost of every seed model against its baseline, at the presets' cpu scale.

    OMP_NUM_THREADS=1 neurodyn bench step-speed [--threads 1 2] [--repeats 5] [--only chonn]

One step = forward, the preset's loss through its task (steady / autoregressive, e.g. a 10-frame rollout
for the Navier-Stokes presets / sequence), backward and an AdamW step (fused, as the Trainer's). Every model is built
from its preset (``neurodyn.experiments.load_experiment(preset, "cpu")``) with the channel counts of the preset's
data (a tiny copy of the dataset is generated once under ``--data-dir`` to read them and fit the
normalizers); the batch has the preset's ``train.batch_size`` and the shapes of one sample, with random
values. All models of one thread count are timed interleaved (one step of each per round, after
``--warmup`` rounds), so a load change on the shared machine hits every model alike; the table gives the
median over ``--repeats`` rounds of the wall-clock seconds per step and its ratio to the pair's baseline.

Results: ``bench-results/step_speed.json`` (``--out``); the table is printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch  # noqa: E402

# (group, seed preset, its baselines, config overrides of the seed model); a baseline is a preset name or
# "preset;key=value;..." (the same preset with overrides)
PAIRS = [
    ("lamo", "lamo/darcy", ["fno/darcy"], []),
    ("geomano", "geomano/darcy", ["fno/darcy"], []),
    ("stssm", "stssm/ks-nu0.1", ["ffno/ks-nu0.1"], []),
    ("chonn_unet", "chonn_unet/poisson", ["unet/poisson"], []),
    ("chonn_fno", "chonn_fno/navier_stokes_rollout", ["fno/navier_stokes_rollout"], []),
    ("chonn1d", "chonn1d/order1d", ["chonn1d/order1d;model.ssm.discretization=euler"], []),  # ZOH (Eq. 34) vs Euler
    ("nac", "nac/bearing", ["gru/bearing", "mha/bearing"], []),
]
# a tiny copy of each dataset: enough samples to fit the normalizers and read one item
_SMALL = {
    "steady": ["data.n_train=4", "data.n_test=0", "data.n_val=0"],
    "autoregressive": ["data.n_train=2", "data.n_test=0", "data.n_val=0"],
}


def _split(spec: str) -> tuple[str, list[str]]:
    preset, *overrides = spec.split(";")
    return preset, overrides


def _label(preset: str, overrides) -> str:
    return preset + "".join(f" [{o.split('.', 1)[1]}]" for o in overrides)


def build_case(preset: str, overrides, data_dir: Path, scale: str = "cpu", device="cpu"):
    """(model, task, batch, optimizer, n_params, batch size) of a preset at ``scale`` (default cpu) on a random batch
    of its shapes (the dataset copy generated on ``device``; everything returned is on the CPU)."""
    from neurodyn.data.assembly import build_data
    from neurodyn.experiments import load_experiment
    from neurodyn.models import count_parameters
    from neurodyn.train.experiment import build_model, build_task, train_config
    from neurodyn.train.trainer import make_optimizer

    cfg = load_experiment(preset, scale, list(overrides))
    small = load_experiment(preset, scale, list(overrides) + _small_overrides(cfg))
    os.environ["NEURODYN_DATA"] = str(data_dir)
    tcfg = train_config(small)
    data = build_data(small, device, progress=False, train_window_steps=tcfg.window_steps)
    torch.manual_seed(0)
    model = build_model(cfg, data["sets"]["train"])
    task = build_task(small, data, tcfg)
    item = data["sets"]["train"][0]
    bs = int(cfg["train"].get("batch_size", 8))
    gen = torch.Generator().manual_seed(1)
    batch = {}
    for k, v in item.items():
        if not torch.is_tensor(v):
            continue
        if v.is_floating_point() and k in ("x", "y", "ctx", "cf", "u"):
            batch[k] = torch.randn((bs,) + tuple(v.shape), generator=gen, dtype=v.dtype)
        else:  # positions, masks, labels, grids: the sample's own values
            batch[k] = v[None].expand((bs,) + tuple(v.shape)).clone()
    opt = make_optimizer("adamw", model.parameters(), float(cfg["train"].get("lr", 1e-3)), 0.0)  # as the Trainer
    return model, task, batch, opt, count_parameters(model), bs


def _small_overrides(cfg) -> list[str]:
    d = cfg["data"]
    if cfg.get("task") == "sequence":
        return []  # already small (a few synthetic recordings)
    if d.get("split_sizes"):
        return ["data.split_sizes=[4,1,1]", "data.n_train=4", "data.n_val=1", "data.n_test=1"]
    return _SMALL.get(cfg.get("task", "steady"), _SMALL["steady"])


def train_step(model, task, batch, opt) -> None:
    loss = task.training_loss(model, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def time_cases(threads: int, cases: dict, repeats: int, warmup: int) -> dict[str, float]:
    torch.set_num_threads(threads)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(warmup + repeats):
        for key, (model, task, batch, opt, *_rest) in cases.items():
            t0 = time.perf_counter()
            train_step(model, task, batch, opt)
            if r >= warmup:
                times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--only", nargs="+", default=None, help="groups to run (lamo geomano stssm chonn_unet ...)")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/neurodyn_step_speed_data"))
    ap.add_argument("--out", type=Path, default=Path("bench-results") / "step_speed.json")
    args = ap.parse_args(argv)

    pairs = [p for p in PAIRS if args.only is None or p[0] in args.only]
    cases: dict[str, tuple] = {}
    for _group, seed, baselines, overrides in pairs:
        for preset, ov in [(seed, overrides)] + [_split(b) for b in baselines]:
            key = _label(preset, ov)
            if key not in cases:
                cases[key] = build_case(preset, ov, args.data_dir)
    results = {
        "threads": {},
        "params": {k: c[4] for k, c in cases.items()},
        "batch": {k: c[5] for k, c in cases.items()},
        "repeats": args.repeats,
        "warmup": args.warmup,
        "torch": torch.__version__,
        "command": " ".join(["neurodyn bench step-speed"] + (argv or sys.argv[1:])),
    }
    for th in args.threads:
        results["threads"][str(th)] = time_cases(th, cases, args.repeats, args.warmup)
    rows = []
    for group, seed, baselines, overrides in pairs:
        key = _label(seed, overrides)
        for base in [_label(*_split(b)) for b in baselines] or [None]:
            row = {
                "group": group,
                "model": key,
                "baseline": base,
                "params": results["params"][key],
                "batch": results["batch"][key],
            }
            for th in args.threads:
                t = results["threads"][str(th)]
                row[f"s_{th}"] = t[key]
                row[f"base_s_{th}"] = t[base] if base else None
                row[f"ratio_{th}"] = t[key] / t[base] if base else None
            rows.append(row)
    results["rows"] = rows
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(markdown(rows, args.threads))


def markdown(rows, threads) -> str:
    head = (
        "| model | baseline | params | batch | "
        + " | ".join(f"s/step {t}t | baseline {t}t | ratio {t}t" for t in threads)
        + " |"
    )
    lines = [head, "|" + "---|" * (4 + 3 * len(threads))]
    f = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
    for r in rows:
        cells = [r["model"], r["baseline"] or "-", f"{r['params']:,}", str(r["batch"])]
        for t in threads:
            cells += [f(r[f"s_{t}"], ".4f"), f(r[f"base_s_{t}"], ".4f"), f(r[f"ratio_{t}"], ".2f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench step-speed`` entry point (the models are the presets' cpu scale whatever the scale)."""
    main(list(argv))
    return 0


if __name__ == "__main__":
    main()
