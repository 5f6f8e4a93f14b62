"""Training-step speed of neurodyn's FNO against neuraloperator's FNO (same architecture), on CPU.

    .venv/bin/python benchmarks/fno_speed.py                   # threads=2, 64x64 and 85x85, batch 8
    .venv/bin/python benchmarks/fno_speed.py --threads 1 --runs 30 --check

Needs the optional dependency ``neuraloperator`` (``pip install neuraloperator==2.0.0 -c constraints.txt``).

Both models are the classic FNO of Li et al.: grid positional channels, lifting MLP (in+2 -> 4*width -> width),
``n_layers`` Fourier layers ``v <- σ(K v + W v)`` with a pointwise linear skip and no activation after the
last one, projection MLP (width -> 4*width -> out), GELU. neuraloperator is configured to that
(``use_channel_mlp=False``, ``fno_skip="linear"``, ratios 4) and its ``n_modes`` is chosen to keep the same
frequencies as ours (``neurodyn.nn.spectral.neuralop_n_modes``); the script prints both parameter counts,
which are equal. ``--check`` also copies our weights into their model (without positional channels, whose
grids differ: theirs ``i/n``, ours ``i/(n-1)``) and compares outputs. One difference remains in what is
timed: with ``use_channel_mlp=False`` neuraloperator 2.0 applies the activation twice in each layer but the
last (``FNOBlocks.forward_with_postactivation``), i.e. three extra GELUs on ``(B, width, n, n)`` per forward
(a few ms per step here, a small fraction of their time); ``--check`` mirrors it on our side.

One step = forward, relative-L2 loss (mean over the batch of ||pred - y|| / ||y||), backward, AdamW step.
Each model is warmed up, then the two are timed alternately (order flipped every round) to spread machine
noise over both; the table reports medians (and the interquartile range) of wall-clock ms per step, and
the median process CPU time per step (all threads; less sensitive to other programs on a shared machine).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 85], help="square grid sizes (default 64 85)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--modes", type=int, nargs="+", default=[12, 12], help="our modes per axis (default 12 12)")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--runs", type=int, default=20, help="timed steps per model and size (>= 10)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--check", action="store_true", help="also check that the two models compute the same function")
    p.add_argument(
        "--ablation",
        action="store_true",
        help="also time neurodyn with SpectralConv's FFT path and with unfused lifting/projection MLPs",
    )
    return p.parse_args(argv)


def rel_l2(pred, target):
    import torch

    b = pred.shape[0]
    diff = torch.linalg.vector_norm((pred - target).reshape(b, -1), dim=1)
    return (diff / torch.linalg.vector_norm(target.reshape(b, -1), dim=1)).mean()


def build_models(args):
    import torch
    from neuralop.models import FNO as TheirFNO

    import neurodyn.models as ndm
    from neurodyn.nn.spectral import neuralop_n_modes

    modes = tuple(args.modes)
    ours = ndm.build(
        "fno",
        in_channels=1,
        out_channels=1,
        modes=modes,
        width=args.width,
        n_layers=args.layers,
        lifting_channels=4 * args.width,
        projection_channels=4 * args.width,
    )
    theirs = TheirFNO(
        n_modes=neuralop_n_modes(modes),
        in_channels=1,
        out_channels=1,
        hidden_channels=args.width,
        n_layers=args.layers,
        lifting_channel_ratio=4,
        projection_channel_ratio=4,
        positional_embedding="grid",
        use_channel_mlp=False,
        fno_skip="linear",
        domain_padding=None,
        non_linearity=torch.nn.functional.gelu,
    )
    return ours, theirs


def ablations(ours, x, y) -> dict:
    """Our FNO with one optimisation switched off at a time (same weights)."""
    import copy

    fft = copy.deepcopy(ours)
    for conv in fft.spectral:
        conv.method = "fft"
    unfused = copy.deepcopy(ours)
    unfused.lifting.fused = unfused.projection.fused = False
    return {
        "neurodyn, SpectralConv via torch.fft": (fft, x, y),
        "neurodyn, unfused lifting/projection": (unfused, x, y),
    }


def check_same_function(args) -> float:
    """Copy our weights into neuraloperator's FNO (no positional channels) and compare outputs."""
    import torch
    from neuralop.models import FNO as TheirFNO

    import neurodyn.models as ndm
    from neurodyn.nn.spectral import neuralop_n_modes

    modes = tuple(args.modes)
    ours = ndm.build(
        "fno",
        modes=modes,
        width=args.width,
        n_layers=args.layers,
        positional_grid=False,
        lifting_channels=4 * args.width,
        projection_channels=4 * args.width,
    )
    theirs = TheirFNO(
        n_modes=neuralop_n_modes(modes),
        in_channels=1,
        out_channels=1,
        hidden_channels=args.width,
        n_layers=args.layers,
        lifting_channel_ratio=4,
        projection_channel_ratio=4,
        positional_embedding=None,
        use_channel_mlp=False,
        fno_skip="linear",
    )
    # neuraloperator 2.0's FNOBlocks applies the activation twice in every layer but the last when
    # use_channel_mlp=False (once after K v + W v, once more after the skipped channel-MLP stage); mirror
    # that on our side so that the comparison isolates everything else.
    ours.act = torch.nn.Sequential(ours.act, type(ours.act)())
    with torch.no_grad():
        for mine, their in ((ours.lifting, theirs.lifting), (ours.projection, theirs.projection)):
            lins = [m for m in mine if isinstance(m, torch.nn.Linear)]
            for lin, conv in zip(lins, their.fcs):
                conv.weight.copy_(lin.weight[..., None])
                conv.bias.copy_(lin.bias)
        for l in range(args.layers):
            w = ours.spectral[l].complex_weight()  # (Ci, Co, 2*m_1, .., m_d), frequencies 0..m-1, -m..-1
            for j, m in enumerate(modes[:-1]):  # theirs is ordered -m..m-1 (fftshift) on non-last axes
                w = torch.roll(w, m, dims=2 + j)
            theirs.fno_blocks.convs[l].weight.tensor.copy_(w)
            theirs.fno_blocks.convs[l].bias.copy_(ours.spectral[l].bias.view(-1, *([1] * len(modes))))
            theirs.fno_blocks.fno_skips[l].conv.weight.copy_(ours.skips[l].weight[..., None])
    n = args.sizes[0]
    x = torch.randn(2, *([n] * len(modes)), 1)  # float32: neuraloperator 2.0 spectra are complex64 only
    a = ours(x)
    b = theirs(x.movedim(-1, 1)).movedim(1, -1)
    return float((a - b).abs().max() / b.abs().max())


def main(argv=None) -> None:
    args = parse(argv)
    if args.runs < 10:
        sys.exit("--runs must be >= 10")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    try:
        import neuralop  # noqa: F401
    except ImportError:
        sys.exit("neuraloperator is not installed: .venv/bin/pip install neuraloperator==2.0.0 -c constraints.txt")
    import warnings

    warnings.filterwarnings("ignore")
    from importlib.metadata import version

    import neurodyn.models as ndm

    torch.manual_seed(0)
    ours, theirs = build_models(args)
    n_ours, n_theirs = ndm.count_parameters(ours), ndm.count_parameters(theirs)
    print(
        f"# FNO training step, {datetime.date.today().isoformat()}, torch {torch.__version__}, "
        f"neuraloperator {version('neuraloperator')}, {platform.processor() or platform.machine()}, "
        f"threads={torch.get_num_threads()}"
    )
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print(
        f"# modes={tuple(args.modes)} (neuralop n_modes="
        f"{tuple(2 * m for m in args.modes[:-1]) + (2 * args.modes[-1] - 1,)}), width={args.width}, "
        f"layers={args.layers}, batch={args.batch}; parameters: neurodyn {n_ours:,}, neuraloperator {n_theirs:,}"
    )
    if args.check:
        print(
            f"# same-function check (float32, weights copied, no grid channels): max rel. diff "
            f"{check_same_function(args):.2e}"
        )

    rows = []
    for n in args.sizes:
        d = len(args.modes)
        x = torch.randn(args.batch, *([n] * d), 1)
        y = torch.randn(args.batch, *([n] * d), 1)
        xt, yt = x.movedim(-1, 1).contiguous(), y.movedim(-1, 1).contiguous()  # theirs is channels-first
        models = {"neurodyn": (ours, x, y), "neuraloperator": (theirs, xt, yt)}
        if args.ablation:
            models.update(ablations(ours, x, y))
        opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, (m, _, _) in models.items()}

        def step(key):
            model, inp, tgt = models[key]
            opt = opts[key]
            t0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad(set_to_none=True)
            loss = rel_l2(model(inp), tgt)
            loss.backward()
            opt.step()
            return time.perf_counter() - t0, time.process_time() - c0

        for key in models:
            for _ in range(args.warmup):
                step(key)
        times = {k: [] for k in models}
        cpu = {k: [] for k in models}
        order = list(models)
        for r in range(args.runs):
            for key in order if r % 2 == 0 else order[::-1]:
                wall, used = step(key)
                times[key].append(wall * 1e3)
                cpu[key].append(used * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        iqr = {k: statistics.quantiles(v, n=4) for k, v in times.items()}
        cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
        rows.append((n, med, iqr, cpu_med))

    print()
    print(
        "| grid | batch | threads | neurodyn ms/step (IQR) | neuraloperator ms/step (IQR) | theirs / ours "
        "| CPU ms/step ours / theirs |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n, med, iqr, cpu_med in rows:
        grid = "x".join([str(n)] * len(args.modes))
        o, t = med["neurodyn"], med["neuraloperator"]
        print(
            f"| {grid} | {args.batch} | {torch.get_num_threads()} | {o:.1f} ({iqr['neurodyn'][0]:.1f}-"
            f"{iqr['neurodyn'][2]:.1f}) | {t:.1f} ({iqr['neuraloperator'][0]:.1f}-{iqr['neuraloperator'][2]:.1f}) "
            f"| {t / o:.2f} | {cpu_med['neurodyn']:.0f} / {cpu_med['neuraloperator']:.0f} |"
        )
    if args.ablation:
        print()
        print("| grid | variant | ms/step (IQR) | CPU ms/step |")
        print("| --- | --- | --- | --- |")
        for n, med, iqr, cpu_med in rows:
            grid = "x".join([str(n)] * len(args.modes))
            for key in med:
                print(f"| {grid} | {key} | {med[key]:.1f} ({iqr[key][0]:.1f}-{iqr[key][2]:.1f}) | {cpu_med[key]:.0f} |")
    print(f"# load average at the end: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench fno-speed`` entry point (the scale does not change the shapes)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    main()
