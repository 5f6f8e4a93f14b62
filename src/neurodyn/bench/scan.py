"""Speed and peak-memory benchmark of neurodyn.ops scans. Prints markdown tables.

    neurodyn bench scan                  # full run (a few minutes on 2 cores)
    neurodyn bench scan --quick          # L in {256, 1024}, fewer repeats, no memory

Selective scan: batch 2, d 128, n 16, input-dependent B and C, D, z gate, softplus(delta), float32,
forward ("fwd") and forward + backward of ``out.sum()`` ("f+b"). Compared implementations:
``ours`` = ``selective_scan`` with backend auto (the fused C++ kernel on CPU), ``torch`` = the chunked
PyTorch fallback, ``ref`` = ``selective_scan_ref`` (sequential loop; measured up to ``--ref-max-len``,
linearly extrapolated beyond, marked ``~``), ``pscan`` = mambapy's Blelloch ``pscan`` inside the
selective-scan composition of mamba.py (exp(delta A), delta B u, pscan, contraction with C, D skip,
gate), ``floor`` = one ``torch.exp`` over a (batch, d, L, n) float32 tensor. Times are medians.

Peak memory: every (implementation, L, mode) runs in a fresh subprocess that builds its inputs,
warms up on a 64x shorter sequence, resets the kernel's resident-set high-water mark (writing 5 to
/proc/self/clear_refs), runs the operation once and reports ``VmHWM - VmRSS before the call``.
torch's CPU allocator returns large blocks to the OS, so this is the peak of the tensors the call
allocates (its output, autograd's saved tensors and the gradients included, to within allocator
slack). Linux only; tracemalloc would not see torch's allocations.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

BATCH, DIM, NSTATE = 2, 128, 16


# ---------------------------------------------------------------------------------------------
# implementations under test


def _inputs(L: int, grad: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(BATCH, DIM, L, generator=g)
    delta = torch.randn(BATCH, DIM, L, generator=g) * 0.5 - 2.0
    A = -torch.exp(torch.rand(DIM, NSTATE, generator=g) * 2)
    B = torch.randn(BATCH, NSTATE, L, generator=g)
    C = torch.randn(BATCH, NSTATE, L, generator=g)
    D = torch.randn(DIM, generator=g)
    z = torch.randn(BATCH, DIM, L, generator=g)
    xs = [u, delta, A, B, C, D, z]
    if grad:
        for t in xs:
            t.requires_grad_(True)
    return xs


def _mambapy_scan(u, delta, A, B, C, D, z):
    """mamba.py's selective_scan composition around its pscan, in its (batch, L, d, n) layout."""
    from mambapy.pscan import pscan

    x = u.transpose(1, 2)  # (b, L, d)
    dt = F.softplus(delta.transpose(1, 2))
    dA = torch.exp(dt.unsqueeze(-1) * A)  # (b, L, d, n)
    BX = (dt * x).unsqueeze(-1) * B.transpose(1, 2).unsqueeze(2)  # (b, L, d, n)
    hs = pscan(dA, BX)
    y = (hs @ C.transpose(1, 2).unsqueeze(-1)).squeeze(3) + D * x
    return (y * F.silu(z.transpose(1, 2))).transpose(1, 2)


def _op(impl: str):
    from neurodyn.ops import selective_scan, selective_scan_ref

    if impl == "ours":
        return lambda *a: selective_scan(*a, delta_softplus=True)
    if impl == "torch":
        return lambda *a: selective_scan(*a, delta_softplus=True, backend="torch")
    if impl == "ref":
        return lambda *a: selective_scan_ref(*a, delta_softplus=True)
    if impl == "pscan":
        return _mambapy_scan
    if impl == "floor":
        return None
    raise ValueError(impl)


def _run_once(impl: str, L: int, mode: str, xs, floor_x=None):
    if impl == "floor":
        torch.exp(floor_x)
        return
    out = _op(impl)(*xs)
    if mode == "f+b":
        out.sum().backward()


def _time_interleaved(L, cases, repeats, ref_repeats):
    """Median wall time of each (impl, mode) case; the cases take turns in every repetition, so that
    load from other processes on a shared machine falls on all of them alike."""
    prepared = {}
    for impl, mode in cases:
        xs = None if impl == "floor" else _inputs(L, mode == "f+b")
        fx = torch.randn(BATCH, DIM, L, NSTATE) if impl == "floor" else None
        prepared[impl, mode] = (xs, fx)

    def once(impl, mode):
        xs, fx = prepared[impl, mode]
        if xs is not None:
            for t in xs:
                t.grad = None
        with torch.no_grad() if mode == "fwd" else torch.enable_grad():
            t0 = time.perf_counter()
            _run_once(impl, L, mode, xs, fx)
            return time.perf_counter() - t0

    for impl, mode in cases:  # warm-up (not for the slow loop reference)
        if impl != "ref":
            once(impl, mode)
    samples = {c: [] for c in cases}
    for r in range(repeats):
        for impl, mode in cases:
            if impl == "ref" and r >= ref_repeats:
                continue
            samples[impl, mode].append(once(impl, mode))
    return {c: statistics.median(v) for c, v in samples.items()}


def _worker(impl: str, L: int, mode: str, threads: int) -> None:
    """Subprocess entry: print the peak memory (bytes) of one call on fresh inputs."""
    from neurodyn.bench import rss_increase_kib

    torch.set_num_threads(threads)
    if impl == "ours":
        from neurodyn.ops import cpu_kernel

        cpu_kernel.get()
    if impl == "pscan":
        import mambapy.pscan  # noqa: F401
    xs = None if impl == "floor" else _inputs(max(L // 64, 1), mode == "f+b")  # warm code paths
    fx = torch.randn(BATCH, DIM, max(L // 64, 1), NSTATE) if impl == "floor" else None
    with torch.no_grad() if mode == "fwd" else torch.enable_grad():
        _run_once(impl, L, mode, xs, fx)
    xs = None if impl == "floor" else _inputs(L, mode == "f+b")
    fx = torch.randn(BATCH, DIM, L, NSTATE) if impl == "floor" else None

    def call():
        with torch.no_grad() if mode == "fwd" else torch.enable_grad():
            _run_once(impl, L, mode, xs, fx)

    print(json.dumps({"peak": rss_increase_kib(call) * 1024}))


def _peak_memory(impl, L, mode, threads) -> float | None:
    cmd = [sys.executable, __file__, "--worker", impl, str(L), mode, "--threads", str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])["peak"]


# ---------------------------------------------------------------------------------------------
# secondary benchmarks


def _time(fn, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_2d(repeats):
    from neurodyn.ops import selective_scan_2d, selective_scan_2d_ref

    rows = []
    b, d, n, K = 1, 64, 16, 4
    for S in (64, 128):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(b, d, S, S, generator=g)
        delta = torch.randn(b, K, d, S, S, generator=g) * 0.5 - 2
        A = -torch.exp(torch.rand(K, d, n, generator=g))
        B, C = torch.randn(b, K, n, S, S, generator=g), torch.randn(b, K, n, S, S, generator=g)
        Dk = torch.randn(K, d, generator=g)
        leaves = [x, delta, A, B, C, Dk]
        fx = torch.randn(b, K, d, S, S, n)
        floor = _time(lambda t=fx: torch.exp(t), repeats)  # bound now: the name is deleted below
        del fx
        row = {"grid": f"{S}x{S}", "floor": floor}
        for backend in ("auto", "scan", "torch") if S <= 64 else ("auto", "scan"):

            def fwd():
                with torch.no_grad():
                    selective_scan_2d(x, delta, A, B, C, Dk, R="0011", delta_softplus=True, backend=backend)

            def fb():
                for t in leaves:
                    t.requires_grad_(True)
                    t.grad = None
                selective_scan_2d(
                    x, delta, A, B, C, Dk, R="0011", delta_softplus=True, backend=backend
                ).sum().backward()
                for t in leaves:
                    t.requires_grad_(False)

            row[f"{backend}_fwd"] = _time(fwd, repeats)
            row[f"{backend}_fb"] = _time(fb, max(1, repeats // 2))
        if S == 64:  # the double loop: forward only, one run, a 16x16 crop extrapolated by cell count
            s = 16
            t_ref = _time(
                lambda: selective_scan_2d_ref(
                    x[..., :s, :s],
                    delta[..., :s, :s],
                    A,
                    B[..., :s, :s],
                    C[..., :s, :s],
                    Dk,
                    R="0011",
                    delta_softplus=True,
                ),
                1,
                warmup=0,
            )
            row["ref_fwd"] = t_ref * (S * S) / (s * s)
        rows.append(row)
    return rows


def bench_cross(repeats):
    from neurodyn.ops import cross_merge, cross_scan, selective_scan

    b, H, W, c, n = 2, 64, 64, 128, 16
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, H, W, c, generator=g, requires_grad=True)
    L = H * W
    delta = torch.randn(b * 4, c, L, generator=g) * 0.5 - 2
    A = -torch.exp(torch.rand(c, n, generator=g))
    B, C = torch.randn(b * 4, n, L, generator=g), torch.randn(b * 4, n, L, generator=g)

    def cross_only():
        seqs = cross_scan(x)  # (b, 4, L, c)
        cross_merge(seqs * 1.0, H, W).sum().backward()

    def full():
        seqs = cross_scan(x).reshape(b * 4, L, c).transpose(1, 2)
        y = selective_scan(seqs, delta, A, B, C, delta_softplus=True)
        cross_merge(y.transpose(1, 2).reshape(b, 4, L, c), H, W).sum().backward()

    t_cross = _time(cross_only, repeats)
    t_full = _time(full, max(1, repeats // 2))
    return {"shape": f"({b}, {H}, {W}, {c}), 4 directions", "cross": t_cross, "full": t_full}


def bench_s4d(repeats):
    from neurodyn.ops import fft_conv, s4d_kernel

    b, H, N2, L = 8, 64, 32, 4096
    g = torch.Generator().manual_seed(0)
    A = torch.complex(-0.5 * torch.ones(H, N2), math.pi * torch.arange(N2).float().repeat(H, 1))
    Bc = torch.randn(H, N2, generator=g, dtype=torch.cfloat)
    Cc = torch.randn(H, N2, generator=g, dtype=torch.cfloat)
    log_dt = torch.empty(H).uniform_(math.log(1e-3), math.log(1e-1), generator=g)
    D = torch.randn(H, generator=g)
    u = torch.randn(b, H, L, generator=g)
    params = [A, Bc, Cc, log_dt, D, u]

    def layer():
        return fft_conv(u, s4d_kernel(A, Bc, Cc, log_dt, L), D)

    def direct():  # causal depthwise convolution with the same (precomputed) kernel
        K = s4d_kernel(A, Bc, Cc, log_dt, L)
        return F.conv1d(F.pad(u, (L - 1, 0)), K.flip(-1).unsqueeze(1), groups=H) + D[:, None] * u

    out = {"shape": f"batch {b}, H {H}, N {2 * N2}, L {L}"}
    for name, fn in (("fft", layer), ("direct", direct)):
        with torch.no_grad():
            out[f"{name}_fwd"] = _time(fn, repeats)

        def fb():
            for t in params:
                t.requires_grad_(True)
                t.grad = None
            fn().sum().backward()
            for t in params:
                t.requires_grad_(False)

        out[f"{name}_fb"] = _time(fb, max(1, repeats // 2))
    with torch.no_grad():
        out["max_abs_diff"] = (layer() - direct()).abs().max().item()
    return out


# ---------------------------------------------------------------------------------------------
# report


def bench_knc(repeats, threads_note=""):
    """Kirchhoff cell (ops.knc_scan), forward + backward, interleaved: the fused kernel with the ZOH
    factor in-kernel (``zoh``) against the same kernel with Euler's input term (``euler``), the previous
    ZOH path (``ZOHInput`` building ``B_eff (batch, D, L, N)``, then the generic fused scan: ``zoh B_eff``)
    and the pure-PyTorch path (``zoh torch``). Shapes of chonn1d's cells: batch 32, D 32 x 2 directions,
    N 8 (padded 8), input-dependent b, c (one group)."""
    from neurodyn.ops import selective_scan
    from neurodyn.ops.knc_scan import ZOHInput, knc_scan

    rows = []
    for batch, D, N, L in ((32, 64, 8, 256), (4, 64, 16, 4096)):
        g = torch.Generator().manual_seed(0)
        u = torch.randn(batch, D, L, generator=g).requires_grad_()
        delta = (torch.rand(batch, D, L, generator=g) * 0.3 + 0.01).requires_grad_()
        lam = (torch.rand(D, N, generator=g) + 0.1).requires_grad_()
        b = torch.randn(batch, 1, N, L, generator=g).requires_grad_()
        c = torch.randn(batch, 1, N, L, generator=g).requires_grad_()
        d = torch.randn(D, generator=g).requires_grad_()
        args = (u, delta, lam, b, c, d)

        def beff_path():
            B_eff = ZOHInput.apply(delta, lam, b.transpose(-1, -2)).transpose(-1, -2)
            return selective_scan(u, delta, -lam, B_eff, c, d, backend="cpp")

        fns = {
            "zoh": lambda: knc_scan(*args, "zoh"),
            "euler": lambda: knc_scan(*args, "euler"),
            "zoh B_eff": beff_path,
            "zoh torch": lambda: knc_scan(*args, "zoh", backend="torch"),
        }
        ts = {k: [] for k in fns}
        for r in range(repeats + 1):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f().sum().backward()
                if r:
                    ts[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in ts.items()}
        rows.append(((batch, D, N, L), med))
    print("\n## Kirchhoff cell (knc_scan) forward + backward, ms (median, interleaved)\n")
    print("| batch, D, N, L | zoh (fused) | euler (fused) | zoh B_eff (old) | zoh torch | zoh / euler | old / zoh |")
    print("|---|---|---|---|---|---|---|")
    for shape, m in rows:
        print(
            f"| {', '.join(map(str, shape))} | {_ms(m['zoh'])} | {_ms(m['euler'])} | {_ms(m['zoh B_eff'])} | "
            f"{_ms(m['zoh torch'])} | {m['zoh'] / m['euler']:.2f} | {m['zoh B_eff'] / m['zoh']:.2f} |"
        )
    return rows


def _ms(t):
    return "n/a" if t is None else f"{t * 1e3:.1f}"


def _mb(x):
    return "n/a" if x is None else f"{x / 2**20:.0f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ref-max-len", type=int, default=1024, help="longest L at which the loop reference is timed")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-extras", action="store_true", help="skip the 2D / cross-scan / S4D sections")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--knc-only", action="store_true", help="only the Kirchhoff-cell (knc_scan) section")
    p.add_argument("--worker", nargs=3, metavar=("IMPL", "L", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args.worker[0], int(args.worker[1]), args.worker[2], args.threads)
        return
    if args.quick:
        args.lengths, args.repeats, args.no_memory = [256, 1024], 3, True
    torch.set_num_threads(args.threads)
    if args.knc_only:
        print(
            f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}; threads {torch.get_num_threads()}, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        bench_knc(args.repeats)
        return
    from neurodyn.ops import cpu_kernel, resolve_backend

    t0 = time.time()
    cpu_kernel.get()
    build = time.time() - t0
    try:
        import mambapy.pscan  # noqa: F401

        have_pscan = True
    except ImportError:
        have_pscan = False
    impls = ["ours", "torch"] + (["pscan"] if have_pscan else []) + ["ref", "floor"]

    print(f"# neurodyn scan benchmark  {_dt.datetime.now().isoformat(timespec='seconds')}")
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    auto = resolve_backend("auto", torch.zeros(1, 1, 1))
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"{platform.processor() or platform.machine()}, backend auto -> {auto}, extension load {build:.1f}s, "
        f"mambapy {'yes' if have_pscan else 'not installed'}"
    )
    print(
        f"shapes: batch {BATCH}, d {DIM}, n {NSTATE}, input-dependent B/C, D, z, softplus; float32; "
        f"load average at start {os.getloadavg()[0]:.1f} (1 min)\n"
    )

    times: dict = {}
    for L in args.lengths:
        cases = [
            (impl, mode)
            for impl in impls
            for mode in ("fwd", "f+b")
            if not (impl == "floor" and mode == "f+b") and not (impl == "ref" and L > args.ref_max_len)
        ]
        for (impl, mode), t in _time_interleaved(L, cases, args.repeats, 3 if L <= 256 else 1).items():
            times[impl, L, mode] = t
        print(f"  measured L = {L} (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    ref_lens = [L for L in args.lengths if ("ref", L, "f+b") in times]
    for L in args.lengths:  # linear extrapolation of the loop reference from its longest measured L
        for mode in ("fwd", "f+b"):
            if ("ref", L, mode) not in times and ref_lens:
                L0 = max(ref_lens)
                times["ref~", L, mode] = times["ref", L0, mode] * L / L0

    def ref_t(L, mode):
        return times.get(("ref", L, mode)) or times.get(("ref~", L, mode))

    def tag(L):
        return "" if ("ref", L, "f+b") in times else "~"

    print("## Time (ms, median)\n")
    head = (
        "| L | ours fwd | ours f+b | torch fwd | torch f+b |"
        + (" pscan fwd | pscan f+b |" if have_pscan else "")
        + " ref fwd | ref f+b | exp floor |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for L in args.lengths:
        cells = [
            str(L),
            _ms(times["ours", L, "fwd"]),
            _ms(times["ours", L, "f+b"]),
            _ms(times["torch", L, "fwd"]),
            _ms(times["torch", L, "f+b"]),
        ]
        if have_pscan:
            cells += [_ms(times["pscan", L, "fwd"]), _ms(times["pscan", L, "f+b"])]
        cells += [tag(L) + _ms(ref_t(L, "fwd")), tag(L) + _ms(ref_t(L, "f+b")), _ms(times["floor", L, "fwd"])]
        print("| " + " | ".join(cells) + " |")

    print(
        "\n## Ratios (targets: ref/ours f+b >= 100 for L >= 1024; pscan/ours f+b >= 3 for L >= 1024; "
        "ours/floor fwd <= 8, f+b <= 25)\n"
    )
    head = (
        "| L | ref / ours (f+b) |"
        + (" pscan / ours (f+b) | pscan / ours (fwd) |" if have_pscan else "")
        + " ours / floor (fwd) | ours / floor (f+b) | torch / floor (fwd) | torch / floor (f+b) |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for L in args.lengths:
        o_f, o_b, fl = times["ours", L, "fwd"], times["ours", L, "f+b"], times["floor", L, "fwd"]
        cells = [str(L), f"{tag(L)}{ref_t(L, 'f+b') / o_b:.0f}" if ref_t(L, "f+b") else "n/a"]
        if have_pscan:
            cells += [f"{times['pscan', L, 'f+b'] / o_b:.1f}", f"{times['pscan', L, 'fwd'] / o_f:.1f}"]
        cells += [
            f"{o_f / fl:.1f}",
            f"{o_b / fl:.1f}",
            f"{times['torch', L, 'fwd'] / fl:.1f}",
            f"{times['torch', L, 'f+b'] / fl:.1f}",
        ]
        print("| " + " | ".join(cells) + " |")

    if not args.no_memory:
        print("\n## Peak memory of one call (MiB above the inputs; fresh subprocess each)\n")
        mem_impls = ["ours", "torch"] + (["pscan"] if have_pscan else []) + ["ref", "floor"]
        head = "| L | mode | " + " | ".join(mem_impls) + " |"
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for L in args.lengths:
            for mode in ("fwd", "f+b"):
                cells = [str(L), mode]
                for impl in mem_impls:
                    if (impl == "floor" and mode == "f+b") or (impl == "ref" and L > args.ref_max_len):
                        cells.append("-")
                        continue
                    cells.append(_mb(_peak_memory(impl, L, mode, args.threads)))
                print("| " + " | ".join(cells) + " |")

    if not args.no_extras:
        reps = max(1, args.repeats // 2)
        print("\n## 2D selective scan (GeoMaNO, 4 'paper' directions, R = 0011, batch 1, d 64, n 16, float32; ms)\n")
        print(
            "`auto` = fused C++ 2-D kernel; `scan` = row then column `linear_scan` (C++ 1-D scan, autograd "
            "elsewhere); `torch` = the same on the pure-PyTorch scan (64x64 only).\n"
        )
        print(
            "| grid | auto fwd | auto f+b | scan fwd | scan f+b | torch fwd | torch f+b | exp floor (b,K,d,H,W,n) "
            "| auto fwd / floor | auto f+b / floor | double-loop ref fwd |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in bench_2d(reps):
            ref = f"~{_ms(r['ref_fwd'])} (16x16 crop x cells)" if "ref_fwd" in r else "-"
            print(
                f"| {r['grid']} | {_ms(r['auto_fwd'])} | {_ms(r['auto_fb'])} | {_ms(r['scan_fwd'])} | "
                f"{_ms(r['scan_fb'])} | {_ms(r.get('torch_fwd'))} | {_ms(r.get('torch_fb'))} | {_ms(r['floor'])} | "
                f"{r['auto_fwd'] / r['floor']:.1f} | {r['auto_fb'] / r['floor']:.1f} | {ref} |"
            )
        c = bench_cross(reps)
        print(f"\n## Cross-scan overhead ({c['shape']}, f+b; ms)\n")
        print("| cross_scan + cross_merge | with selective_scan in between | overhead share |")
        print("|---|---|---|")
        print(f"| {_ms(c['cross'])} | {_ms(c['full'])} | {100 * c['cross'] / c['full']:.1f}% |")
        s = bench_s4d(reps)
        print(f"\n## S4D layer ({s['shape']}; ms; kernel generation included)\n")
        print(
            "| s4d_kernel + fft_conv fwd | f+b | direct causal conv1d fwd | f+b | speed-up fwd | speed-up f+b "
            "| max abs diff |"
        )
        print("|---|---|---|---|---|---|---|")
        print(
            f"| {_ms(s['fft_fwd'])} | {_ms(s['fft_fb'])} | {_ms(s['direct_fwd'])} | {_ms(s['direct_fb'])} | "
            f"{s['direct_fwd'] / s['fft_fwd']:.1f}x | {s['direct_fb'] / s['fft_fb']:.1f}x | "
            f"{s['max_abs_diff']:.1e} |"
        )
        bench_knc(reps)
    print(f"\nload average at end {os.getloadavg()[0]:.1f} (1 min); total {time.time() - t0:.0f} s")


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench scan`` entry point (the scale does not change the shapes; ``--quick`` for a short run)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    main()
