"""The share of a NAC training step spent in its NCP backbone (``ops.ncp_mlp``), from ``torch.profiler``.

    python -m neurodyn_lab run nac/profile                          # nac/sequence at cpu scale, T = 64, 6 channels
    python -m neurodyn_lab run nac/profile --length 128 --scale cpu --threads 1

Builds the preset's model (``--preset``, default ``nac/sequence``; its batch size) for ``--channels`` input channels
and 6 classes, and times AdamW steps (cross-entropy on a random batch of ``--length`` steps, timestamps in [0, 1]):
``--warmup`` steps, then the median of ``--steps``; then profiles ``--steps`` more and sums the self CPU time of the
events whose name holds ``ncp`` (the fused op, its autograd node and its kernels; on the reference path the backbone's
matmuls are not told apart, so the share is that of the fused op). Prints the step time, the backbone's forward and
backward milliseconds per step and their share of the profiled self time, and the profiler's top events.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def build(preset: str, scale: str, channels: int, classes: int):
    """``(model, batch size)`` of the preset at ``scale`` for ``channels`` inputs and ``classes`` outputs."""
    import neurodyn.models as ndm
    from neurodyn.experiments import load_experiment

    cfg = load_experiment(preset, scale, ["data.path=unused.h5"])
    model_cfg = {k: v for k, v in cfg["model"].items() if k != "name"}
    return ndm.build("nac", **model_cfg, in_channels=channels, out_channels=classes), int(cfg["train"]["batch_size"])


def profile(preset="nac/sequence", scale="cpu", length=64, channels=6, classes=6, steps=3, warmup=2, seed=0):
    """``{"step_ms", "ncp_fwd_ms", "ncp_bwd_ms", "share", "table"}`` (milliseconds per step)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    torch.manual_seed(seed)
    model, batch = build(preset, scale, channels, classes)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, length, channels)
    t = torch.linspace(0, 1, length).expand(batch, length).contiguous()
    y = torch.randint(0, classes, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x, t).reshape(batch, -1), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    ncp = {e.key: e.self_cpu_time_total for e in events if "ncp" in e.key.lower()}
    bwd = sum(v for k, v in ncp.items() if "bwd" in k.lower() or "backward" in k.lower())
    return {
        "step_ms": statistics.median(times),
        "batch": batch,
        "ncp_fwd_ms": (sum(ncp.values()) - bwd) / 1e3 / steps,
        "ncp_bwd_ms": bwd / 1e3 / steps,
        "share": sum(ncp.values()) / total if total else float("nan"),
        "table": events.table(sort_by="self_cpu_time_total", row_limit=12),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="nac/sequence")
    p.add_argument("--scale", default="cpu")
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--channels", type=int, default=6)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    r = profile(args.preset, args.scale, args.length, args.channels, steps=args.steps, warmup=args.warmup)
    print(
        f"{args.preset} ({args.scale}), batch {r['batch']}, T = {args.length}, {args.channels} channels, "
        f"{args.threads} thread(s): step {r['step_ms']:.1f} ms; NCP backbone forward {r['ncp_fwd_ms']:.1f} ms + "
        f"backward {r['ncp_bwd_ms']:.1f} ms per step = {r['share']:.1%} of the profiled self CPU time"
    )
    print(r["table"])
    return 0


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run nac/profile`` entry point: ``scale`` is the preset's scale."""
    return main(["--scale", scale, *argv])


if __name__ == "__main__":
    raise SystemExit(main())
