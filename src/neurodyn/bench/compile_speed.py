"""``torch.compile`` against eager: the time of a model's forward + backward step at a preset scale.

    OMP_NUM_THREADS=1 neurodyn bench compile-speed [--scale cpu] [--device cpu|cuda]
        [--models lamo/darcy geomano/darcy] [--threads 1] [--repeats 9] [--warmup 3] [--backend inductor]

Each model is built from its preset at ``--scale`` (``neurodyn.experiments.load_experiment``) with the channel counts
and grid of the preset's data (a 4-sample copy of the dataset is generated once under ``--data-dir`` to read them);
the batch has the preset's ``train.batch_size`` and one sample's shapes, with random values. One step = the model's
forward on the batch, a fixed linear loss of its output and the backward to every parameter (no optimizer step; the
data normalisation and the preset's loss stay outside the timed model). The compiled model is
``torch.compile(model, backend=--backend, fullgraph=True)`` on a copy of the same weights (if it does not compile as
one graph, e.g. a CUDA extension without a fake, it is said on stderr and timed with graph breaks: the table's
"one graph" column); its first step (the compilation) is timed separately. Eager and compiled steps are interleaved
(one of each per round, after ``--warmup`` rounds), so that a load change on a shared machine hits both alike; the
table gives the median seconds per step over ``--repeats`` rounds and compiled / eager (below 1: compiled is faster).

``--device`` defaults to ``cuda`` when available, else ``cpu`` (the fused C++ kernels run on CPU; on CUDA the scans
take mamba-ssm's kernels when installed, else the PyTorch path). Results:
``bench-results/compile_speed.json`` (``--out``) and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch  # noqa: E402

MODELS = ["lamo/darcy", "geomano/darcy"]
_SMALL = {
    "steady": ["data.n_train=4", "data.n_test=0", "data.n_val=0"],
    "autoregressive": ["data.n_train=2", "data.n_test=0", "data.n_val=0"],
}


def build(preset: str, scale: str, device: torch.device, data_dir: Path):
    """(model, inputs as a kwargs dict) of ``preset`` at ``scale``: channels and grid from a tiny copy of its data, a
    random batch of the preset's batch size."""
    from neurodyn.data.assembly import build_data
    from neurodyn.experiments import load_experiment
    from neurodyn.train.experiment import build_model, train_config

    cfg = load_experiment(preset, scale)
    if cfg.get("task", "steady") not in _SMALL:
        raise SystemExit(
            f"compile_speed: {preset} is a {cfg.get('task')} preset; only steady and autoregressive "
            f"(grid operator) presets are timed here"
        )
    small = load_experiment(preset, scale, _SMALL[cfg.get("task", "steady")])
    os.environ["NEURODYN_DATA"] = str(data_dir)
    data = build_data(small, progress=False, train_window_steps=train_config(small).window_steps)
    torch.manual_seed(0)
    model = build_model(cfg, data["sets"]["train"]).to(device)
    item = data["sets"]["train"][0]
    bs = int(cfg["train"].get("batch_size", 8))
    gen = torch.Generator().manual_seed(1)
    inputs = {}
    for key, arg in (("x", "x"), ("pos", "pos"), ("ctx", "ctx")):
        v = item.get(key)
        if torch.is_tensor(v):
            batch = (
                torch.randn((bs,) + tuple(v.shape), generator=gen, dtype=v.dtype)
                if key == "x"
                else v[None].expand((bs,) + tuple(v.shape)).clone()
            )
            inputs[arg] = batch.to(device)
    return model, inputs


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step(model, inputs, device) -> float:
    """Seconds of one forward + backward (a fixed linear loss of the output)."""
    _sync(device)
    t0 = time.perf_counter()
    y = model(**inputs)
    weight = torch.linspace(-1, 1, y.numel(), device=y.device, dtype=y.dtype).view_as(y)
    (y * weight).sum().backward()
    _sync(device)
    return time.perf_counter() - t0


def measure(preset: str, scale: str, device: torch.device, args) -> dict:
    model, inputs = build(preset, scale, device, args.data_dir)
    eager, compiled_model = model, copy.deepcopy(model)
    torch._dynamo.reset()
    fullgraph = True
    compiled = torch.compile(compiled_model, backend=args.backend, fullgraph=True)
    try:
        first = step(compiled, inputs, device)  # compilation (forward and backward graphs) plus one step
    except Exception as exc:  # noqa: BLE001 - e.g. a CUDA extension without a fake: time it with graph breaks
        msg = " ".join(str(exc).split())[:300]
        print(
            f"compile_speed: {preset} does not compile as one graph ({type(exc).__name__}: {msg}); timing it "
            f"with graph breaks",
            file=sys.stderr,
        )
        torch._dynamo.reset()
        for p in compiled_model.parameters():
            p.grad = None
        fullgraph = False
        compiled = torch.compile(compiled_model, backend=args.backend)
        first = step(compiled, inputs, device)
    from neurodyn.train.precision import with_precision

    bf16 = with_precision(eager, "bf16", device)  # the trainer's train.precision=bf16: the forward under autocast
    times = {"eager": [], "compiled": [], "bf16": []}
    for r in range(args.warmup + args.repeats):
        for name, m in (("eager", eager), ("compiled", compiled), ("bf16", bf16)):
            for p in m.parameters():
                p.grad = None
            t = step(m, inputs, device)
            if r >= args.warmup:
                times[name].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "preset": preset,
        "scale": scale,
        "device": str(device),
        "backend": args.backend,
        "fullgraph": fullgraph,
        "batch": int(next(iter(inputs.values())).shape[0]),
        "shape": list(inputs["x"].shape),
        "params": sum(p.numel() for p in model.parameters()),
        "first_compiled_step_s": first,
        "eager_s": med["eager"],
        "compiled_s": med["compiled"],
        "ratio": med["compiled"] / med["eager"],
        "bf16_s": med["bf16"],
        "bf16_ratio": med["bf16"] / med["eager"],
        "eager_all_s": times["eager"],
        "compiled_all_s": times["compiled"],
    }


def markdown(rows) -> str:
    lines = [
        "| model | scale | device | input | eager s/step | compiled s/step | compiled / eager | bf16 s/step | "
        "bf16 / eager | compile (first step) s | one graph |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['scale']} | {r['device']} | {tuple(r['shape'])} | {r['eager_s']:.4f} | "
            f"{r['compiled_s']:.4f} | {r['ratio']:.2f} | {r['bf16_s']:.4f} | {r['bf16_ratio']:.2f} | "
            f"{r['first_compiled_step_s']:.1f} | {'yes' if r['fullgraph'] else 'no'} |"
        )
    return "\n".join(lines)


def run(scale: str, argv) -> int:
    ap = argparse.ArgumentParser(prog="compile_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=MODELS, help="presets (default: lamo/darcy geomano/darcy)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/neurodyn_compile_speed_data"))
    ap.add_argument("--out", type=Path, default=Path("bench-results") / "compile_speed.json")
    args = ap.parse_args(list(argv))
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rows = [measure(p, scale, device, args) for p in args.models]
    result = {
        "torch": torch.__version__,
        "threads": args.threads,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "command": " ".join(["neurodyn bench compile-speed", "--scale", scale, *argv]),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    from neurodyn.bench import script_main

    sys.exit(script_main(run))
