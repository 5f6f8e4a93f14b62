"""Every op the fused CPU kernels register (``torch.ops.neurodyn_scan.*``) rejects malformed arguments.

The ops are global: anyone can call them, not only the validating Python wrappers of ``neurodyn.ops``. So each op
checks every tensor it reads (device, shape against the others, dtype, contiguity) and raises a RuntimeError that
names the op and the argument instead of reading out of bounds (an empty ``B`` used to crash the process, a short
``delta`` or ``A`` to return garbage). A row of the table is (op, argument, defect) -> the start of the message,
``neurodyn_scan.<op>: <argument> ...``; every row starts from valid arguments, which run (``test_valid_arguments_run``).
"""

from __future__ import annotations

import re

import pytest
import torch

from neurodyn.ops import cpu_kernel

pytestmark = pytest.mark.needs_kernel

F = torch.float64


def _r(*shape):
    return torch.randn(*shape, dtype=F)


def _decay(*shape):
    return -torch.rand(*shape, dtype=F) - 0.1


def _ops():
    return cpu_kernel.get()


# ------------------------------------------------------------------------------------------------------------------
# valid arguments of every op, in call order (names as the op's messages use them)


def _selective_fwd():
    b, d, L, n = 2, 4, 70, 8  # two checkpoint chunks, B input-dependent with 2 groups, C fixed
    return {
        "u": _r(b, d, L),
        "delta": torch.rand(b, d, L, dtype=F) * 0.5,
        "A": _decay(d, n),
        "B": _r(b, 2, L, n),
        "C": _r(d, n),
        "D": _r(d),
        "h0": _r(b, d, n),
        "save_checkpoints": True,
        "zoh": False,
    }


def _selective_bwd():
    a = _selective_fwd()
    out, last, ckpt = _ops().selective_scan_fwd(*a.values())
    keep = {k: a[k] for k in ("u", "delta", "A", "B", "C", "D", "h0")}
    return {**keep, "ckpt": ckpt, "gout": _r(*out.shape), "glast": _r(*last.shape), "zoh": False}


def _linear():
    return {"a": torch.rand(3, 10, 5, dtype=F), "x": _r(3, 10, 5), "h0": _r(3, 5), "reverse": False}


def _scan2d_fwd():
    b, d, H, W, n = 2, 3, 10, 5, 8  # two row blocks
    return {
        "x": _r(b, d, H, W),
        "delta": torch.rand(b, d, H, W, dtype=F) * 0.5,
        "A": _decay(d, n),
        "B": _r(b, H, W, n),
        "C": _r(b, H, W, n),
        "D": _r(d),
        "R": _r(d, n),
        "form": 0,
        "save_checkpoints": True,
    }


def _scan2d_bwd():
    a = _scan2d_fwd()
    y, ckpt = _ops().scan2d_fwd(*a.values())
    keep = {k: a[k] for k in ("x", "delta", "A", "B", "C", "D", "R", "form")}
    return {**keep, "ckpt": ckpt, "gout": _r(*y.shape)}


def _head_fwd():
    b, S, L, H, P, G, N = 2, 2, 40, 2, 16, 1, 8  # two checkpoint chunks; P a multiple of the 8 float64 lanes
    return {
        "u": _r(b, S, L, H * P),
        "dt": torch.rand(b, S, L, H, dtype=F) * 0.5,
        "A": _decay(S, H),
        "B": _r(b, S, L, G, N),
        "C": _r(b, S, L, G, N),
        "D": _r(S, H * P),
        "save_checkpoints": True,
    }


def _head_bwd():
    a = _head_fwd()
    y, ckpt = _ops().head_scan_fwd(*a.values())
    keep = {k: a[k] for k in ("u", "dt", "A", "B", "C", "D")}
    return {**keep, "ckpt": ckpt, "gout": _r(*y.shape)}


def _ncp_fwd():
    C, M, a = 2, 20, 3  # two tiles of 16 rows; layers of 5 and 4 neurons
    return {
        "x": _r(C, M, a),
        "w_in": [_r(C, a, 5), _r(C, a, 4)],
        "bias": [_r(C, 5), _r(C, 4)],
        "w_rec": [torch.empty(0, dtype=F), _r(C, 5, 4)],
        "mask": [torch.ones(5, dtype=F), torch.ones(4, dtype=F)],
        "act": 1,
        "pat_in": [torch.ones(a, 5), torch.ones(a, 4)],
        "pat_rec": [torch.empty(0), torch.ones(5, 4)],
        "io": [_r(C, a), _r(C, a), _r(C, a, 2), _r(C, 2)],
    }


def _ncp_bwd():
    a = _ncp_fwd()
    *saved, y, head = _ops().ncp_mlp_fwd(*a.values())
    keep = {k: a[k] for k in ("x", "w_in", "bias", "w_rec", "mask")}
    return {
        **keep,
        "saved": saved,
        "gout": _r(*y.shape),
        "act": 1,
        "pat_in": a["pat_in"],
        "pat_rec": a["pat_rec"],
        "io": a["io"],
        "ghead": _r(*head.shape),
    }


VALID = {
    "selective_scan_fwd": _selective_fwd,
    "selective_scan_bwd": _selective_bwd,
    "linear_scan": _linear,
    "scan2d_fwd": _scan2d_fwd,
    "scan2d_bwd": _scan2d_bwd,
    "head_scan_fwd": _head_fwd,
    "head_scan_bwd": _head_bwd,
    "ncp_mlp_fwd": _ncp_fwd,
    "ncp_mlp_bwd": _ncp_bwd,
    "exp_test": lambda: {"x": _r(7)},
    "zoh_test": lambda: {"x": torch.rand(7, dtype=F), "which": 2},
    "chunk_size": dict,
    "head_scan_lanes": lambda: {"is_double": True},
}

# ncp's io list, by the names its messages use
_ALIASES = {"in_scale": ("io", 0), "in_shift": ("io", 1), "head_w": ("io", 2), "head_b": ("io", 3)}


def _locate(args: dict, name: str):
    """(container, key) of argument ``name`` in ``args``: ``"w_in[1]"`` is ``args["w_in"][1]``."""
    if name in _ALIASES:
        base, i = _ALIASES[name]
        return args[base], i
    m = re.fullmatch(r"(\w+)\[(\d+)\]", name)
    return (args[m.group(1)], int(m.group(2))) if m else (args, name)


def _call(op: str, args: dict):
    return getattr(_ops(), op)(*args.values())


# ------------------------------------------------------------------------------------------------------------------
# the table


def _shrink(dim):
    """A shape defect: one element fewer along ``dim``, or an extra leading dimension (``"rank"``)."""
    if dim == "rank":
        return lambda t: t.unsqueeze(0)
    return lambda t: t.narrow(dim, 0, t.shape[dim] - 1).contiguous()


def _non_contiguous(t):
    buf = torch.zeros(*t.shape, 2, dtype=t.dtype)
    buf[..., 0] = t
    return buf[..., 0]  # same shape and values, every stride doubled


_COMMON = {"u": "rank", "delta": -1, "A": -1, "B": -1, "C": -1, "D": -1, "h0": -1}
_SCAN2D = {"x": "rank", "delta": -1, "A": -1, "B": -1, "C": -1, "D": -1, "R": -1}
_HEAD = {"u": "rank", "dt": 2, "A": -1, "B": 2, "C": -1, "D": -1}  # dt fixes the heads and B the groups: shorten L
_NCP = {
    "x": "rank",
    "w_in[0]": -1,
    "w_in[1]": -1,
    "bias[0]": 0,
    "bias[1]": 0,
    "w_rec[1]": -1,
    "mask[0]": -1,
    "mask[1]": -1,
    "pat_in[0]": -1,
    "pat_in[1]": -1,
    "pat_rec[1]": -1,
    "in_scale": -1,
    "in_shift": -1,
    "head_w": 1,
    "head_b": -1,
}  # bias fixes a layer's width and head_w the head's: shorten another dimension
# op -> {tensor argument: the dimension its shape defect shortens ("rank": an extra one; None: any shape is valid)}
TENSORS = {
    "selective_scan_fwd": _COMMON,
    "selective_scan_bwd": {**_COMMON, "ckpt": -1, "gout": -1, "glast": -1},
    "linear_scan": {"a": -1, "x": "rank", "h0": -1},
    "scan2d_fwd": _SCAN2D,
    "scan2d_bwd": {**_SCAN2D, "ckpt": -1, "gout": -1},
    "head_scan_fwd": _HEAD,
    "head_scan_bwd": {**_HEAD, "ckpt": -1, "gout": -1},
    "ncp_mlp_fwd": _NCP,
    "ncp_mlp_bwd": {**_NCP, "saved[0]": -1, "saved[1]": -1, "gout": -1, "ghead": -1},
    "exp_test": {"x": None},
    "zoh_test": {"x": None},
}


def _rows():
    """(op, argument, defect name, defect, message pattern) for every tensor argument of every op."""
    for op, tensors in TENSORS.items():
        for arg, dim in tensors.items():
            head = re.escape(f"neurodyn_scan.{op}: {arg} ")
            if dim is not None:
                yield op, arg, "shape", _shrink(dim), head + r"has shape \["
            if not arg.startswith("pat_"):  # synapse patterns may have any dtype and layout (read as {0, 1})
                wrong = torch.int64 if dim in ("rank", None) else torch.float32  # the first tensor sets the dtype
                yield op, arg, "dtype", (lambda t, w=wrong: t.to(w)), head + "has dtype"
                yield op, arg, "non-contiguous", _non_contiguous, head + r"of shape \[.*\] is not contiguous"
            yield op, arg, "device", (lambda t: t.to("meta")), head + "is on meta"


ROWS = list(_rows())


@pytest.mark.parametrize("op", sorted(VALID))
def test_valid_arguments_run(op):
    """The starting point of every row is a valid call (so a row fails only by its own defect)."""
    out = _call(op, VALID[op]())
    outs = out if isinstance(out, (list, tuple)) else [out]
    if op == "scan2d_fwd":  # its checkpoint buffer's last slot is never written (allocated with torch.empty; the
        outs = outs[:1]  # backward does not read it): only the output itself must be finite
    for t in outs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            assert torch.isfinite(t).all()


@pytest.mark.parametrize("op,arg,defect,fn,pattern", ROWS, ids=[f"{r[0]}-{r[1]}-{r[2]}" for r in ROWS])
def test_each_tensor_argument_is_checked(op, arg, defect, fn, pattern):
    args = VALID[op]()
    box, key = _locate(args, arg)
    box[key] = fn(box[key])
    with pytest.raises(RuntimeError, match=pattern):
        _call(op, args)


def _set(name, value):
    def change(args):
        box, key = _locate(args, name)
        box[key] = value(box[key]) if callable(value) else value

    return change


# (op, change to valid arguments, the message) for the cases that used to crash or return garbage (an empty B, a
# short delta or A) and the non-tensor arguments
SPECIAL = [
    (
        "selective_scan_fwd",
        _set("B", torch.empty(0, dtype=F)),
        "neurodyn_scan.selective_scan_fwd: B has shape [0], expected (d, n_pad) = [4, 8] or (batch, groups, L, n_pad) "
        "= [2, G, 70, 8] with G dividing d = 4",
    ),
    (
        "selective_scan_fwd",
        _set("delta", lambda t: t[..., :69].contiguous()),
        "neurodyn_scan.selective_scan_fwd: delta has shape [2, 4, 69], expected (batch, d, L) like u = [2, 4, 70]",
    ),
    (
        "selective_scan_fwd",
        _set("A", lambda t: t[:3].contiguous()),
        "neurodyn_scan.selective_scan_fwd: A has shape [3, 8], expected (d, n_pad) = [4, n_pad] with n_pad a positive "
        "multiple of 8",
    ),
    (
        "selective_scan_fwd",
        _set("A", lambda t: t.float()),
        "neurodyn_scan.selective_scan_fwd: A has dtype Float, expected Double",
    ),
    (
        "selective_scan_fwd",
        _set("u", _non_contiguous),
        "neurodyn_scan.selective_scan_fwd: u of shape [2, 4, 70] is not contiguous",
    ),
    (
        "selective_scan_fwd",
        _set("B", lambda t: _r(2, 3, 70, 8)),
        "neurodyn_scan.selective_scan_fwd: B has shape [2, 3, 70, 8], expected",
    ),  # 3 groups do not divide d = 4
    (
        "selective_scan_bwd",
        _set("ckpt", lambda t: t[:, :, :1].contiguous()),
        "neurodyn_scan.selective_scan_bwd: ckpt has shape [2, 4, 1, 8], expected (batch, d, chunks, n_pad) as "
        "selective_scan_fwd saved it = [2, 4, 2, 8]",
    ),
    (
        "linear_scan",
        _set("a", lambda t: t[:, :9].contiguous()),
        "neurodyn_scan.linear_scan: a has shape [3, 9, 5], expected (P, L, Q) like x = [3, 10, 5]",
    ),
    ("scan2d_fwd", _set("form", 3), "neurodyn_scan.scan2d_fwd: form is 3, expected 0 (cbx), 1 (eq9) or 2 (alg2)"),
    ("scan2d_bwd", _set("ckpt", lambda t: t[:, :, :1].contiguous()), "neurodyn_scan.scan2d_bwd: ckpt has shape"),
    (
        "head_scan_fwd",
        _set("dt", lambda t: torch.rand(*t.shape[:3], 32, dtype=F)),  # 32 heads of one channel
        "neurodyn_scan.head_scan_fwd: dt has shape [2, 2, 40, 32], expected (batch, S, L, H) = [2, 2, 40, H] with H "
        "dividing the 32 channels of u into heads of a multiple of 8 channels",
    ),
    ("head_scan_fwd", _set("B", lambda t: _r(2, 2, 40, 3, 8)), "neurodyn_scan.head_scan_fwd: B has shape"),
    ("head_scan_bwd", _set("ckpt", lambda t: t[:, :1].contiguous()), "neurodyn_scan.head_scan_bwd: ckpt has shape"),
    ("ncp_mlp_fwd", _set("act", 7), "neurodyn_scan.ncp_mlp_fwd: act is 7"),
    ("ncp_mlp_fwd", _set("mask", lambda t: t[:1]), "neurodyn_scan.ncp_mlp_fwd: w_in, bias, w_rec and mask have"),
    ("ncp_mlp_fwd", _set("pat_rec", lambda t: t[:1]), "neurodyn_scan.ncp_mlp_fwd: pat_rec has 1 entries"),
    ("ncp_mlp_fwd", _set("io", lambda t: t[:3]), "neurodyn_scan.ncp_mlp_fwd: io has 3 entries"),
    ("ncp_mlp_bwd", _set("saved", lambda t: t[:1]), "neurodyn_scan.ncp_mlp_bwd: saved has 1 entries"),
    ("zoh_test", _set("which", 5), "neurodyn_scan.zoh_test: which is 5"),
]


@pytest.mark.parametrize("op,change,message", SPECIAL, ids=[f"{s[0]}-{i}" for i, s in enumerate(SPECIAL)])
def test_special_cases(op, change, message):
    args = VALID[op]()
    change(args)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _call(op, args)


# ------------------------------------------------------------------------------------------------------------------
# the kernel cache


@pytest.mark.slow
def test_a_truncated_library_in_the_cache_is_rebuilt_or_bypassed_never_loaded(tmp_path):
    """A cached library cut to half its size (a disk that filled, a copy cut short) used to be loaded as it was: a bus
    error (exit 135) in every process that needed the kernels. Now the cache is verified first; with no compiler to
    rebuild it (CXX points nowhere) the pure-PyTorch path is used, said in one line, and the scans still run."""
    import os
    import shutil
    import subprocess
    import sys

    cache = tmp_path / "ext"
    shutil.copytree(cpu_kernel.build_dir(), cache, ignore=shutil.ignore_patterns("*.o", "*.lock", "lock"))
    library = cache / "neurodyn_scan_cpu.so"
    library.write_bytes(library.read_bytes()[: library.stat().st_size // 2])
    probe = (
        "import torch; from neurodyn import ops; from neurodyn.ops import cpu_kernel; "
        "print(cpu_kernel.get() is None, ops.selective_scan_ref(*[torch.ones(1, 2, 3)] * 2, -torch.ones(2, 1), "
        "torch.ones(1, 1, 3), torch.ones(1, 1, 3)).shape)"
    )
    env = {**os.environ, "NEURODYN_EXT_DIR": str(cache), "CXX": str(tmp_path / "no-compiler"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["True", "torch.Size([1,", "2,", "3])"], done.stdout
    warning = [line for line in done.stderr.splitlines() if "neurodyn:" in line]
    assert len(warning) == 1 and "pure-PyTorch path" in warning[0], done.stderr
