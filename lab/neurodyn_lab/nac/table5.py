"""NAC paper Table 5 on CPU: run time and peak memory of NAC (modes, Top-K, sparsity, released-code
compatibility) against attention, MHA, CfC, LTC, GRU, LSTM and an ODE-RNN, plus the Top-K scaling.

    python -m neurodyn_lab run nac/table5 --scale cpu        # ~minutes
    python -m neurodyn_lab run nac/table5 --scale paper --runs 10

Protocol (paper App. D.4): one sequence (batch 1) of n = 1024 steps with 64 features, d_model = 64,
4 heads, forward passes only. Here: ``torch.set_num_threads(2)``, one warm-up pass, then the median of
``--runs`` passes (default 5 at cpu scale, 10 at paper scale) and the interquartile range; peak memory
is the increase of the process' peak resident set (Linux VmHWM, reset before each model) over the
resident set before the passes, so it counts every allocation of the forward pass on CPU. Each model
is the registered sequence model with no convolution and no dense head (``per_step`` output), so the
sequence layer dominates. NAC-PW (every pair) is measured at ``--pw-n`` steps (default 512 at cpu
scale: at 1024 its pair tensor alone is ~4 GB). The scaling table times Algorithm 2's block Top-K
against the exhaustive Top-K and reports the recall of the true top keys.

The paper measured on a T4 GPU; compare orderings and ratios, not seconds.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys

import torch

from neurodyn_lab.paths import child_env, module_command, records
from neurodyn_lab.records import write_json

# name -> (registered model, config overrides); paper Table 5 rows we can build
MODELS = {
    "NAC-Exact/05s/8k": ("nac", dict(mode="exact", topk=8, sparsity=0.5)),
    "NAC-Euler": ("nac", dict(mode="euler", topk=8)),
    "NAC-Steady": ("nac", dict(mode="steady", topk=8)),
    "NAC-2k": ("nac", dict(topk=2)),
    "NAC-32k": ("nac", dict(topk=32)),
    "NAC-09s": ("nac", dict(sparsity=0.9)),
    "NAC-02s": ("nac", dict(sparsity=0.2)),
    "NAC-exact-topk (TF code)": ("nac", dict(topk=8, options={"topk_method": "exact"})),
    "NAC-released": ("nac", dict(compat="released")),
    "NAC-PW": ("nac", dict(topk=None)),
    "Attention": ("mha", dict(n_heads=1)),
    "MHA": ("mha", dict(n_heads=4)),
    "GRU": ("gru", {}),
    "LSTM": ("lstm", {}),
    "CfC": ("cfc", {}),
    "LTC": ("ltc", {}),
    "ODE-RNN (GRU + decay)": ("odernn", {}),
}
PAPER_T5 = {  # run time (s), peak memory (MB) on a T4 (paper Table 5)
    "NAC-Exact/05s/8k": (7.4101, 151.50),
    "NAC-Euler": (7.3367, 152.22),
    "NAC-Steady": (7.2942, 150.86),
    "NAC-2k": (7.3071, 44.75),
    "NAC-32k": (7.2313, 549.86),
    "NAC-PW": (8.5649, 5042.09),
    "NAC-09s": (7.222, 150.85),
    "NAC-02s": (7.252, 151.54),
    "Attention": (0.0016, 16.86),
    "MHA": (0.0041, 69.05),
    "GRU": (3.216, 0.54),
    "LSTM": (2.6241, 0.42),
    "CfC": (6.0988, 0.76),
    "LTC": (14.643, 0.99),
    "ODE-RNN (GRU + decay)": (12.2498, 0.64),  # the paper's GRU-ODE row
}


def build_model(name: str, d: int, heads: int):
    from neurodyn.models import build

    kind, over = MODELS[name]
    common = dict(in_channels=d, out_channels=d, conv_channels=(), dense=(), per_step=True)
    if kind == "nac":
        return build("nac", d_model=d, n_heads=heads, **common, **over).eval()
    return build(kind, hidden=d, **common, **over).eval()


def measure(model, x, t, runs: int) -> dict:
    from neurodyn.bench.measure import current_rss_mb, peak_rss_mb, reset_peak_rss, timed

    with torch.no_grad():
        model(x, t)  # warm-up
        reset_peak_rss()
        before = current_rss_mb()
        times = timed(lambda: model(x, t), repeats=runs, warmup=0)
        peak = peak_rss_mb() - before
    return {**times, "peak_mb": peak}


def topk_scaling(ns, K: int, D: int, runs: int) -> list[dict]:
    from neurodyn.bench.measure import current_rss_mb, peak_rss_mb, reset_peak_rss, timed
    from neurodyn.ops.block_topk import block_topk, exact_topk

    rows = []
    for n in ns:
        g = torch.Generator().manual_seed(n)
        q = torch.randn(1, n, D, generator=g)
        k_rand = torch.randn(1, n, D, generator=g)
        k_smooth = torch.randn(1, n, D, generator=g).cumsum(1) / 8
        row = {"n": n}
        for meth, fn in (("block", block_topk), ("exact", exact_topk)):
            if meth == "exact" and n > 8192:
                continue
            reset_peak_rss()
            before = current_rss_mb()
            row[f"{meth}_s"] = timed(lambda: fn(q, k_smooth, K), repeats=runs, warmup=1)["median"]
            row[f"{meth}_mb"] = peak_rss_mb() - before
        if n <= 8192:
            for kname, k in (("random", k_rand), ("smooth", k_smooth)):
                ref = exact_topk(q, k, K)[0]
                idx = block_topk(q, k, K)[0]
                row[f"recall_{kname}"] = (idx[..., :, None] == ref[..., None, :]).any(-1).float().mean().item()
        rows.append(row)
    return rows


def run(scale: str, argv: list[str]) -> int:
    import os

    if os.environ.get("MALLOC_MMAP_THRESHOLD_") is None:
        # large blocks straight from mmap, so that freed tensors leave the resident set and the peak-RSS
        # increase measures each model's own allocations (glibc would otherwise keep and reuse them)
        env = child_env(MALLOC_MMAP_THRESHOLD_="65536")
        os.execve(sys.executable, [*module_command("neurodyn_lab.nac.table5"), "--scale", scale, *argv], env)
    p = argparse.ArgumentParser(prog="python -m neurodyn_lab run nac/table5")
    p.add_argument("--n", type=int, default=None, help="sequence length (default 1024; tiny 128)")
    p.add_argument("--pw-n", type=int, default=None, help="length for NAC-PW (default 512 cpu, 1024 paper)")
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--no-scaling", action="store_true")
    p.add_argument("--out", default=str(records("nac/table5") / f"nac_runtime_{scale}.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    n = a.n or (128 if scale == "tiny" else 1024)
    pw_n = a.pw_n or {"tiny": 64, "cpu": 512, "paper": 1024}[scale]
    runs = a.runs or {"tiny": 2, "cpu": 5, "paper": 10}[scale]
    d, heads = 64, 4
    results = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "scale": scale,
        "n": n,
        "pw_n": pw_n,
        "runs": runs,
        "threads": a.threads,
        "torch": torch.__version__,
        "host": platform.node(),
        "cpu": platform.processor(),
        "models": {},
    }
    g = torch.Generator().manual_seed(0)
    for name in a.models:
        length = pw_n if name == "NAC-PW" else n
        x = torch.randn(1, length, d, generator=g)
        t = torch.arange(length, dtype=torch.float32)[None] / length
        torch.manual_seed(0)
        model = build_model(name, d, heads)
        r = measure(model, x, t, runs)
        r["n"] = length
        r["params"] = sum(p.numel() for p in model.parameters())
        results["models"][name] = r
        print(
            f"{name:>26s}  n={length:5d}  wall {r['median']:8.4f} s (IQR {r['iqr']:.4f})  "
            f"cpu {r['cpu_median']:8.4f} s"
            f"  peak +{r['peak_mb']:8.1f} MB",
            flush=True,
        )
        del model
    if not a.no_scaling:
        ns = [256, 1024] if scale == "tiny" else [256, 1024, 4096, 16384]
        results["topk_scaling"] = topk_scaling(ns, 8, 16, 3)
    write_json(a.out, results)
    print(markdown(results))
    return 0


def markdown(res: dict) -> str:
    lines = [
        f"Run time and peak memory, batch 1, n = {res['n']} (NAC-PW: n = {res['pw_n']}), 64 features, "
        f"d_model 64, 4 heads, forward only; median of {res['runs']} passes after a warm-up, "
        f"{res['threads']} threads, torch {res['torch']}, {res['date']}.",
        "",
        "| model | ours: wall time (s) | ours: CPU time (s) | ours: throughput (seq/s, wall) "
        "| ours: peak RSS (MB) "
        "| paper (T4): run time (s) | paper: peak memory (MB) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in res["models"].items():
        pt, pm = PAPER_T5.get(name, (None, None))
        extra = f" (n={r['n']})" if r["n"] != res["n"] else ""
        lines.append(
            f"| {name}{extra} | {r['median']:.4f} | {r['cpu_median']:.4f} | {1 / r['median']:.2f} | "
            f"{r['peak_mb']:.1f} | "
            f"{pt if pt is not None else '–'} | {pm if pm is not None else '–'} |"
        )
    if "topk_scaling" in res:
        lines += [
            "",
            "Top-K pair selection (K = 8, D = 16, smooth keys): time (s) and peak RSS increase (MB); recall "
            "of the exhaustive top-8 keys by Algorithm 2 (random / temporally smooth keys)",
            "",
            "| n | block s | block MB | exhaustive s | exhaustive MB | recall random | recall smooth |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in res["topk_scaling"]:
            f = lambda k, fmt: fmt.format(r[k]) if k in r else "–"
            lines.append(
                f"| {r['n']} | {f('block_s', '{:.4f}')} | {f('block_mb', '{:.1f}')} | "
                f"{f('exact_s', '{:.4f}')} | {f('exact_mb', '{:.1f}')} | "
                f"{f('recall_random', '{:.3f}')} | {f('recall_smooth', '{:.3f}')} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    from neurodyn_lab.cli import script_main

    sys.exit(script_main(run))
