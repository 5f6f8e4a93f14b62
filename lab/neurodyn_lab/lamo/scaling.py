"""LaMO vs Transolver vs full attention: forward+backward time and peak memory per sample as N grows.

    python -m neurodyn_lab run lamo/scaling             # N = 1k, 4k, 16k, 64k (about 30 min on 2 busy cores)
    python -m neurodyn_lab run lamo/scaling --quick     # N = 1k, 4k; 1 timed run

Each measured point is saved to ``--out`` at once; running the command again resumes after the last
recorded point (``--fresh`` starts over).

Two geometries, each with the paper's configuration of both models (Table 6 / the standard-benchmark
scripts), batch 1, float32, ``torch.set_num_threads(2)``:

* ``point cloud`` (Elasticity configuration): N random points in the unit square, input = coordinates.
  LaMO: width 128, 8 layers, 64 slice tokens, Hydra-style bidirectional SSM (d_state 64, expand 2).
  Transolver: width 128, 8 layers, 8 heads, 64 slices. ``attention``: the same lifting / MLP / width /
  depth as Transolver with plain multi-head softmax self-attention over all N points (the "Transformer"
  row of the paper's Table 10; ``F.scaled_dot_product_attention``, which on CPU does not materialise the
  N x N matrix but still costs O(N^2) time); measured up to ``--attention-max`` points, beyond that the
  time is extrapolated as N^2 from the largest measured size and marked ``~``.
* ``grid`` (Darcy configuration): an s x s grid with s^2 = N (32, 64, 128, 256). LaMO: patch 2 tokens
  (M = N / 4), four-direction cross-scan, width 64. Transolver: width 128, 64 slices, 3x3 conv projections.

Time: median of ``--repeats`` forward+backward passes (``out.square().mean().backward()``) after one
warm-up, per sample. Peak memory: each (model, geometry, N) runs in a fresh subprocess; after the timed
runs the resident-set high-water mark is reset (``/proc/self/clear_refs``) and one more forward+backward
pass is made; the table reports VmHWM minus VmRSS before that pass (MiB), i.e. the activations and
gradients of one training step on top of the weights and the input. The workers run with
``MALLOC_MMAP_THRESHOLD_=131072`` so that glibc returns every large freed block to the OS (its dynamic
threshold would otherwise keep the warm-up's activations resident and hide the peak), and with
``OMP_WAIT_POLICY=PASSIVE``.
"""

from __future__ import annotations

import os

# Before torch starts OpenMP: on a shared, oversubscribed machine spinning OpenMP workers make 2-thread
# runs 5-15x slower than 1-thread runs; passive waiting removes that (measured on the project's 2-core VM).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import datetime as _dt
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from neurodyn_lab.paths import child_env, module_command, records
from neurodyn_lab.records import write_json

SIZES = (1024, 4096, 16384, 65536)
MODELS = ("lamo", "transolver", "attention")
GEOMETRIES = ("point_cloud", "grid")

LAMO_PC = dict(
    geometry="point_cloud",
    in_channels=2,
    out_channels=1,
    width=128,
    n_layers=8,
    mlp_ratio=1,
    ssm=dict(d_state=64, expand=2, heads=4, layout="hydra"),
    n_slices=64,
    slice_heads=8,
    share_encoder=True,
)
TRANSOLVER_PC = dict(
    variant="point_cloud", in_channels=2, out_channels=1, width=128, n_layers=8, n_heads=8, n_slices=64, mlp_ratio=1
)
LAMO_GRID = dict(
    in_channels=1,
    out_channels=1,
    width=64,
    n_layers=8,
    mlp_ratio=4,
    ssm=dict(d_state=64, expand=2, heads=1, norm="layernorm"),
    patch_size=2,
    pad_multiple=2,
)
TRANSOLVER_GRID = dict(
    variant="structured_mesh",
    in_channels=1,
    out_channels=1,
    width=128,
    n_layers=8,
    n_heads=8,
    n_slices=64,
    mlp_ratio=1,
    unified_pos=8,
)


class FullAttention(nn.Module):
    """Multi-head softmax self-attention over all points (O(N^2)); q, k, v, out projections."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, grid=None):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class AttentionTransformer(nn.Module):
    """Transolver's lifting, blocks and head with physics attention replaced by full attention."""

    def __init__(self, in_channels=2, width=128, n_layers=8, heads=8, mlp_ratio=1):
        super().__init__()
        from neurodyn.nn.blocks import ResidualBlock
        from neurodyn.nn.mlp import ChannelMLP

        self.lift = ChannelMLP(in_channels, width, 2 * width)
        self.blocks = nn.ModuleList(
            ResidualBlock(width, FullAttention(width, heads), mlp_ratio, out_channels=1 if l == n_layers - 1 else 0)
            for l in range(n_layers)
        )

    def forward(self, x, pos=None, ctx=None):
        h = self.lift(x.reshape(x.shape[0], -1, x.shape[-1]))
        for blk in self.blocks:
            h = blk(h)
        return h


def build(model: str, geometry: str, n: int):
    """(module, input) for one benchmark point."""
    import neurodyn.models as ndm

    g = torch.Generator().manual_seed(0)
    if geometry == "point_cloud":
        x = torch.rand(1, n, 2, generator=g)
        if model == "lamo":
            return ndm.build("lamo_mesh", **LAMO_PC), x
        if model == "transolver":
            return ndm.build("transolver", **TRANSOLVER_PC), x
        return AttentionTransformer(), x
    s = int(round(math.sqrt(n)))
    x = torch.rand(1, s, s, 1, generator=g)
    if model == "lamo":
        return ndm.build("lamo", grid_size=(s, s), **LAMO_GRID), x
    if model == "transolver":
        return ndm.build("transolver", **TRANSOLVER_GRID), x
    raise ValueError("the full-attention baseline is measured on point clouds only")


def _step(m, x):
    m.zero_grad(set_to_none=True)
    m(x).square().mean().backward()


def worker(model: str, geometry: str, n: int, repeats: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    m, x = build(model, geometry, n)
    _step(m, x)  # warm-up (also builds the C++ scan kernel if needed)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _step(m, x)
        times.append(time.perf_counter() - t0)
    m.zero_grad(set_to_none=True)
    from neurodyn.bench.measure import rss_increase_kib

    peak_kib = rss_increase_kib(lambda: _step(m, x))
    params = sum(p.numel() for p in m.parameters())
    return {"time": statistics.median(times), "times": times, "peak_mib": peak_kib / 1024, "params": params}


def run_point(model, geometry, n, repeats, threads, timeout):
    cmd = [
        *module_command("neurodyn_lab.lamo.scaling"),
        "--worker",
        model,
        geometry,
        str(n),
        "--repeats",
        str(repeats),
        "--threads",
        str(threads),
    ]
    env = child_env(MALLOC_MMAP_THRESHOLD_="131072", OMP_WAIT_POLICY="PASSIVE")
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--attention-max", type=int, default=16384)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out", default=str(records("lamo/scaling") / "lamo_scaling.json"))
    ap.add_argument("--fresh", action="store_true", help="do not resume from the points already in --out")
    ap.add_argument("--worker", nargs=3, metavar=("MODEL", "GEOMETRY", "N"))
    args = ap.parse_args(argv)
    if args.worker:
        model, geometry, n = args.worker
        print(json.dumps(worker(model, geometry, int(n), args.repeats, args.threads)))
        return
    sizes = SIZES[:2] if args.quick else SIZES
    repeats = 1 if args.quick else args.repeats
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    done = {}
    if out.exists() and not args.fresh:  # resume: keep the points measured by an interrupted run
        done = {
            (r["model"], r["geometry"], r["n"]): r
            for r in json.loads(out.read_text())["results"]
            if "time" in r or r.get("skipped")
        }
    results = []
    for geometry in GEOMETRIES:
        for n in sizes:  # models interleaved at each size, so that load changes hit all of them
            for model in MODELS:
                if model == "attention" and geometry == "grid":
                    continue
                if (model, geometry, n) in done:
                    results.append(done[(model, geometry, n)])
                    continue
                if model == "attention" and n > args.attention_max:
                    results.append({"model": model, "geometry": geometry, "n": n, "skipped": True})
                    continue
                r = run_point(model, geometry, n, repeats, args.threads, args.timeout)
                r.update(
                    model=model,
                    geometry=geometry,
                    n=n,
                    date=_dt.datetime.now().isoformat(timespec="seconds"),
                    load_avg=os.getloadavg(),
                )
                results.append(r)
                print(json.dumps(r), flush=True)
                save(out, results, args, repeats)
    meta = save(out, results, args, repeats)
    print_tables(results, sizes, meta)


def save(out: Path, results, args, repeats) -> dict:
    meta = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "threads": args.threads,
        "repeats": repeats,
        "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(),
        "load_avg": os.getloadavg(),
        "command": " ".join([Path(sys.executable).name] + sys.argv),
    }
    write_json(out, {"meta": meta, "results": results})
    return meta


def print_tables(results, sizes, meta) -> None:
    by = {(r["model"], r["geometry"], r["n"]): r for r in results}
    print(
        f"\n{meta['date']}, {meta['threads']} threads, median of {meta['repeats']} runs, load average "
        f"{', '.join(f'{v:.1f}' for v in meta['load_avg'])}\n"
    )
    for geometry in GEOMETRIES:
        models = [m for m in MODELS if not (m == "attention" and geometry == "grid")]
        print(f"### {geometry.replace('_', ' ')}: forward+backward seconds per sample (peak MiB)\n")
        print("| N | " + " | ".join(models) + " | " + " | ".join(f"{m} / N ms per 1k pts" for m in models) + " |")
        print("|---" * (1 + 2 * len(models)) + "|")
        for n in sizes:
            cells, per = [], []
            for m in models:
                r = by.get((m, geometry, n), {})
                if "time" in r:
                    cells.append(f"{r['time']:.3g} ({r['peak_mib']:.0f})")
                    per.append(f"{1000 * r['time'] / (n / 1000):.3g}")
                elif r.get("skipped"):
                    known = [by[(m, geometry, k)] for k in sizes if "time" in by.get((m, geometry, k), {})]
                    if known:
                        ref = known[-1]
                        est = ref["time"] * (n / ref["n"]) ** 2
                        cells.append(f"~{est:.3g} (N^2 extrapolation)")
                        per.append(f"~{1000 * est / (n / 1000):.3g}")
                    else:
                        cells.append("-"), per.append("-")
                else:
                    cells.append(r.get("error", "-")), per.append("-")
            print(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(per) + " |")
        print()
        for m in models:
            pts = [(n, by[(m, geometry, n)]["time"]) for n in sizes if "time" in by.get((m, geometry, n), {})]
            if len(pts) >= 2:
                (n0, t0), (n1, t1) = pts[0], pts[-1]
                print(f"- {m}: time grows as N^{math.log(t1 / t0) / math.log(n1 / n0):.2f} from N={n0} to N={n1}")
        print()


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run lamo/scaling`` entry point (the scale does not change the shapes; ``--quick`` for
    a short run)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    main()
