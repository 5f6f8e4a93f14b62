"""Speed and memory of the GeoMamba kernel vs a plain four-direction Mamba kernel on 32^2, 64^2, 128^2 patch grids.

    python -m neurodyn_lab run geomano/kernel                  # all kernels, grids 32 64 128
    python -m neurodyn_lab run geomano/kernel --grids 32 --repeats 3 --kernels geo-2d-0011 plain-lamo

One kernel = one token mixer of width D (default 64, the paper's Darcy width) with N = 16 states on a
``(batch, g, g, D)`` token grid, forward + backward of ``out.square().mean()``. Kernels:

* ``plain-lamo``: LaMO's ``LatentSSM`` (neurodyn.nn.mamba) with the four cross-scan directions, x_proj layout,
  depthwise 3x3 conv, LayerNorm gate, per-channel Delta (heads = d_inner) and diagonal A -- a plain VMamba-SS2D-style
  four-direction Mamba kernel written by another hand, on ``ops.selective_scan``.
* ``geo-1d-none``: our GeoMamba kernel, 1-D SSM, no correction (= the plain kernel in our layout).
* ``geo-1d-0011`` / ``geo-1d-learn``: 1-D GeoMamba-SSM with fixed / learnable R (closed-form correction).
* ``geo-2d-none`` / ``geo-2d-0011`` / ``geo-2d-learn`` / ``geo-2d-corners``: 2DGeoMamba-SSM (``ops.selective_scan_2d``).

Each (kernel, grid) runs in a fresh subprocess (``OMP_WAIT_POLICY=PASSIVE``, ``torch.set_num_threads(--threads)``):
``--warmup`` untimed calls, then the median (and min) of ``--repeats`` timed forward+backward calls, in wall time
and in process CPU time (the sum over the threads; less sensitive to other processes on a shared machine). Memory:
``saved MB`` = bytes of the distinct tensors autograd saves for backward during one forward (deterministic; the
activation memory a training step holds), ``peak dMB`` = growth of the process's peak RSS over one
forward+backward after the warm-up (noisy, includes allocator behaviour). Writes
``lab/records/geomano/kernel/geomano_kernel.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import datetime as _dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from neurodyn_lab.paths import child_env, module_command, records
from neurodyn_lab.records import write_json

KERNELS = {
    "plain-lamo": None,
    "geo-1d-none": dict(ssm="1d", correction="none"),
    "geo-1d-0011": dict(ssm="1d", correction="fixed", r_pattern="0011"),
    "geo-1d-learn": dict(ssm="1d", correction="learnable"),
    "geo-2d-none": dict(ssm="2d", correction="none"),
    "geo-2d-0011": dict(ssm="2d", correction="fixed", r_pattern="0011"),
    "geo-2d-learn": dict(ssm="2d", correction="learnable"),
    "geo-2d-corners": dict(ssm="2d", correction="fixed", r_pattern="0011", directions="corners"),
}


def build(name: str, D: int, N: int):
    if name == "plain-lamo":
        from neurodyn.nn.mamba import LatentSSM
        from neurodyn.nn.ssm_config import LatentSSMConfig

        config = LatentSSMConfig(
            d_state=N, expand=1, heads=D, layout="x_proj", conv="same", norm="layernorm", a_mode="diag"
        )
        return LatentSSM(config, D, ("row", "row_rev", "col", "col_rev"))
    from neurodyn.nn.geomamba import GeoMambaKernel

    return GeoMambaKernel(D, d_state=N, **KERNELS[name])


def measure(name: str, grid: int, batch: int, D: int, N: int, threads: int, warmup: int, repeats: int) -> dict:
    import torch

    from neurodyn.bench.measure import peak_rss_mb, reset_peak_rss

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = build(name, D, N)
    z = torch.randn(batch, grid, grid, D, requires_grad=True)

    def step():
        m.zero_grad(set_to_none=True)
        z.grad = None
        m(z).square().mean().backward()

    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(z)
    out.square().mean().backward()
    del out
    for _ in range(warmup):
        step()
    reset_peak_rss()
    base = peak_rss_mb()
    step()
    peak = peak_rss_mb() - base
    times, fwd, cpu = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        with torch.no_grad():
            m(z)
        t1 = time.perf_counter()
        c1 = time.process_time()
        step()
        t2 = time.perf_counter()
        cpu.append(time.process_time() - c1)
        fwd.append(t1 - t0)
        times.append(t2 - t1)
    return {
        "kernel": name,
        "grid": grid,
        "batch": batch,
        "D": D,
        "N": N,
        "threads": threads,
        "fwd_bwd_median_s": statistics.median(times),
        "fwd_bwd_min_s": min(times),
        "fwd_bwd_cpu_median_s": statistics.median(cpu),
        "fwd_median_s": statistics.median(fwd),
        "saved_mb": sum(saved.values()) / 2**20,
        "peak_rss_delta_mb": peak,
        "params": sum(p.numel() for p in m.parameters()),
        "repeats": repeats,
        "load_avg": os.getloadavg(),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="*", default=list(KERNELS))
    ap.add_argument("--grids", nargs="*", type=int, default=[32, 64, 128])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--d-state", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(records("geomano/kernel") / "geomano_kernel.json"))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        name, grid = args.worker.split(":")
        rec = measure(name, int(grid), args.batch, args.width, args.d_state, args.threads, args.warmup, args.repeats)
        print("RESULT " + json.dumps(rec), flush=True)
        return
    env = child_env(OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(args.threads))
    recs = []
    for grid in args.grids:
        for name in args.kernels:
            cmd = [
                *module_command("neurodyn_lab.geomano.kernel"),
                "--worker",
                f"{name}:{grid}",
                "--batch",
                str(args.batch),
                "--width",
                str(args.width),
                "--d-state",
                str(args.d_state),
                "--threads",
                str(args.threads),
                "--warmup",
                str(args.warmup),
                "--repeats",
                str(args.repeats),
            ]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
            if res.returncode or not line:
                print(f"{name} {grid}: failed\n{res.stderr[-2000:]}", flush=True)
                continue
            rec = json.loads(line[0][7:])
            recs.append(rec)
            print(
                f"{name:15s} {grid:4d}^2  fwd+bwd {rec['fwd_bwd_median_s'] * 1e3:9.1f} ms (min "
                f"{rec['fwd_bwd_min_s'] * 1e3:9.1f}, cpu {rec['fwd_bwd_cpu_median_s'] * 1e3:9.1f})  "
                f"fwd {rec['fwd_median_s'] * 1e3:8.1f} ms  saved "
                f"{rec['saved_mb']:8.1f} MB  peak d {rec['peak_rss_delta_mb']:8.1f} MB  load "
                f"{rec['load_avg'][0]:.1f}",
                flush=True,
            )
    old = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else []
    keep = [r for r in old if (r["kernel"], r["grid"]) not in {(x["kernel"], x["grid"]) for x in recs}]
    write_json(args.out, keep + recs)
    print(f"\ncommand: {' '.join([Path(sys.executable).name] + sys.argv)}\n")
    base = {r["grid"]: r for r in keep + recs if r["kernel"] == "plain-lamo"}
    print(
        "| kernel | grid | fwd+bwd ms (median) | min | x plain | CPU ms (median) | x plain | fwd ms | saved MB "
        "| x plain | peak RSS dMB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(keep + recs, key=lambda r: (r["grid"], list(KERNELS).index(r["kernel"]))):
        b = base.get(r["grid"])
        rt = f"{r['fwd_bwd_median_s'] / b['fwd_bwd_median_s']:.2f}" if b else "-"
        rm = f"{r['saved_mb'] / b['saved_mb']:.2f}" if b else "-"
        rc = f"{r['fwd_bwd_cpu_median_s'] / b['fwd_bwd_cpu_median_s']:.2f}" if b else "-"
        print(
            f"| {r['kernel']} | {r['grid']}^2 | {r['fwd_bwd_median_s'] * 1e3:.1f} | "
            f"{r['fwd_bwd_min_s'] * 1e3:.1f} | {rt} "
            f"| {r['fwd_bwd_cpu_median_s'] * 1e3:.1f} | {rc} | {r['fwd_median_s'] * 1e3:.1f} "
            f"| {r['saved_mb']:.1f} | {rm} | {r['peak_rss_delta_mb']:.0f} |"
        )


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run geomano/kernel`` entry point (the scale does not change the shapes)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    main()
