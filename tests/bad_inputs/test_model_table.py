"""Bad inputs on the model side: each case -> the one sentence expected, and nothing hangs.

``CASES``: a call on tiny models, ops, metrics, checkpoints or ``compare`` and the exception (type and words)
it must raise, in one line. ``EMPTY``: ops called with an empty length (no steps, queries, keys or samples)
return the correctly shaped empty result, as torch ops do, and their backward runs. ``WARNS``: metrics that are
undefined for a sample say so. The whole table runs in seconds (tiny configs, no training).
"""

import argparse
import functools
import warnings

import pytest
import torch

from neurodyn import models, ops
from neurodyn.checkpoint_io import read_checkpoint
from neurodyn.errors import ConfigError, DataError
from neurodyn.ops.knc_scan import knc_scan_ref

GRID = (2, 16, 16, 1)
SEQ = (2, 6, 1)
FRAMES = (2, 3, 16, 16, 1)
# every registered model: a tiny config and an input it accepts
SPECS = {
    "fno": (dict(modes=(4, 4), width=8, n_layers=1, lifting_channels=0, projection_channels=8), GRID),
    "ffno": (dict(modes=(4, 4), width=8, n_layers=1), GRID),
    "s4_ffno": (dict(modes=(4, 4), width=8, n_layers=2, memory_after=1, d_state=4), FRAMES),
    "fno2d_time": (dict(in_channels=1, modes=(4, 4), width=8, n_layers=1, projection_channels=8), GRID),
    "fno2d_r": (dict(in_channels=1, modes=(4, 4), width=8, n_layers=1, projection_channels=8), GRID),
    "unet": (dict(init_features=4), GRID),
    "chonn_unet": (dict(init_features=4), GRID),
    "chonn_fno": (dict(modes=(4, 4), width=8, n_layers=1, lifting_channels=0, projection_channels=8), GRID),
    "chonn1d": (dict(width=8), (2, 16, 1)),
    "chonn_vision": (dict(in_channels=1, num_classes=3, dims=(8,), depths=(1,)), GRID),
    "geomano": (dict(width=8, n_layers=1, latent_grid=(4, 4)), GRID),
    "lamo": (dict(width=16, n_layers=1, grid_size=(16, 16)), GRID),
    "lamo_mesh": (dict(width=16, n_layers=1, geometry="point_cloud", slice_heads=2, n_slices=4), (2, 20, 1)),
    "transolver": (dict(width=16, n_layers=1, variant="point_cloud", n_heads=2, n_slices=4), (2, 20, 1)),
    "stssm": (dict(dims=2, width=8, n_layers_pre=1, n_layers_post=1, d_state=4), FRAMES),
    "nac": (dict(in_channels=1, out_channels=3, d_model=8, n_heads=2, topk=2), SEQ),
    **{name: (dict(hidden=8), SEQ) for name in ("gru", "lstm", "cfc", "ltc", "odernn")},
    "mha": (dict(hidden=8, n_heads=2), SEQ),
    # fitted in one pass: no parameters, so any floating dtype (the input's is kept)
    **{
        name: (dict(in_channels=1, out_channels=3), SEQ)
        for name in ("majority", "knn", "minirocket", "multirocket", "hydra")
    },
}
FITTED = ("majority", "knn", "minirocket", "multirocket", "hydra")


@functools.cache
def tiny(name: str) -> torch.nn.Module:
    return models.build(name, **SPECS[name][0])


def call_model(name: str, dtype=torch.float32, batch: int | None = None):
    shape = SPECS[name][1]
    shape = shape if batch is None else (batch, *shape[1:])
    return lambda ctx: tiny(name)(torch.zeros(shape, dtype=dtype))


def compare_without_training(presets):
    """``compare`` with training replaced by a failure: a preset that does not fit must be refused before."""

    def call(ctx):
        from neurodyn import compare

        def trained(*args, **kwargs):
            raise AssertionError("compare started training before it had checked every preset")

        ctx.monkeypatch.setattr(compare, "run_jobs", trained)
        ctx.monkeypatch.setenv("NEURODYN_DATA", str(ctx.tmp_path / "data"))
        compare.compare(presets, ctx.tmp_path / "cmp", "tiny", epochs=1)

    return call


def gpu_out_of_memory(ctx):
    """A model whose construction runs out of (GPU) memory, as torch says it."""
    from neurodyn.models import registry

    class Huge(torch.nn.Module):
        def __init__(self, config):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity")

    ctx.monkeypatch.setitem(registry._MODELS, "fno", (Huge, registry.entry("fno")[1]))
    models.build("fno")


def foreign_checkpoint(ctx):
    path = ctx.tmp_path / "foreign.pt"
    torch.save({"model": argparse.Namespace(width=8), "model_state": {}}, path)
    read_checkpoint(path)


class _Evil:
    """Deletes the file ``canary`` when unpickled (what a malicious checkpoint does, harmlessly)."""

    def __init__(self, canary):
        self.canary = str(canary)

    def __reduce__(self):
        import os

        return os.remove, (self.canary,)


def malicious_checkpoint(ctx):
    canary = ctx.tmp_path / "canary.txt"
    canary.write_text("alive")
    path = ctx.tmp_path / "evil.pt"
    torch.save({"model": {"name": "fno"}, "model_state": _Evil(canary)}, path)
    try:
        read_checkpoint(path)
    finally:
        assert canary.read_text() == "alive"  # nothing of the file ran


def text_checkpoint(ctx):
    path = ctx.tmp_path / "notes.pt"
    path.write_text("hello")
    read_checkpoint(path)


CASES = [
    # 1. input dtype / batch of every model, checked once at the top of forward (models.inputs.check_input)
    (
        "fno-float64",
        call_model("fno", torch.float64),
        ValueError,
        "FNO expects float32 input like its parameters; got float64; call model.double() or x.float()",
    ),
    (
        "fno-int64",
        call_model("fno", torch.int64),
        ValueError,
        "FNO expects float32 input like its parameters; got int64",
    ),
    ("fno-batch-0", call_model("fno", batch=0), ValueError, "FNO input x has batch size 0"),
    ("geomano-float64", call_model("geomano", torch.float64), ValueError, "GeoMaNO expects float32 input"),
    ("geomano-int64", call_model("geomano", torch.int64), ValueError, "got int64; call x.float()"),
    ("geomano-batch-0", call_model("geomano", batch=0), ValueError, "GeoMaNO input x has batch size 0"),
    *[
        (f"{name}-float64", call_model(name, torch.float64), ValueError, "expects float32 input like its parameters")
        for name in SPECS
        if name not in ("fno", "geomano", *FITTED)
    ],
    *[(f"{name}-int64", call_model(name, torch.int64), ValueError, "expects floating-point input") for name in FITTED],
    *[
        (f"{name}-batch-0", call_model(name, batch=0), ValueError, "input x has batch size 0")
        for name in SPECS
        if name not in ("fno", "geomano")
    ],
    ("nac-int64", call_model("nac", torch.int64), ValueError, "NACModel expects float32 input"),
    # 2. a config too large for memory (10**12 channels: more than any address space, so no machine allocates it)
    (
        "fno-width-too-large",
        lambda ctx: models.build("fno", modes=(4, 4), width=10**12),
        ConfigError,
        "model 'fno' with this config does not fit in memory",
    ),
    (
        "gpu-out-of-memory",
        gpu_out_of_memory,
        ConfigError,
        "model 'fno' with this config does not fit in memory: its parameters need more than this machine has (one "
        "allocation of 2.00 GiB was refused)",
    ),
    # 5. a foreign checkpoint says why it was refused
    (
        "checkpoint-foreign-object",
        foreign_checkpoint,
        DataError,
        "holds Python objects that are not allowed to load safely (torch.load weights_only=True): the global "
        "argparse.Namespace",
    ),
    (
        "checkpoint-text-file",
        text_checkpoint,
        DataError,
        "is truncated or not a neurodyn checkpoint (bytes that are not a pickle)",
    ),
    (
        "checkpoint-malicious-pickle",
        malicious_checkpoint,
        DataError,
        "evil.pt is not a neurodyn checkpoint: it holds "
        "Python objects that are not allowed to load safely (torch.load weights_only=True): the global posix.remove; "
        "nothing of it was loaded or run",
    ),
    # 6. compare checks every preset before any training
    (
        "compare-sequence-on-fields",
        compare_without_training(["fno/darcy", "nac/activity"]),
        ConfigError,
        "preset 'nac/activity' is a sequence model and cannot train on the field data of 'fno/darcy'",
    ),
    # 7. impossible sizes (already refused before this table; kept so that they stay so)
    (
        "fno-width-0",
        lambda ctx: models.build("fno", width=0),
        ConfigError,
        "FNO config field width must be >= 1; got 0",
    ),
    (
        "fno-negative-modes",
        lambda ctx: models.build("fno", modes=(-4, 4)),
        ConfigError,
        "FNO modes must be positive; got modes=(-4, 4)",
    ),
    (
        "geomano-width-0",
        lambda ctx: models.build("geomano", width=0),
        ConfigError,
        "geomano config field width must be >= 1; got 0",
    ),
    (
        "geomano-negative-latent-grid",
        lambda ctx: models.build("geomano", latent_grid=(-4, 4)),
        ConfigError,
        "geomano latent_grid must be (h, w) with h, w >= 1",
    ),
    ("lamo-width-0", lambda ctx: models.build("lamo", width=0), ConfigError, "lamo config field width must be >= 1"),
    ("lamo-negative-grid", lambda ctx: models.build("lamo", grid_size=(-4, 4)), ConfigError, "lamo grid_size must be"),
]


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    return argparse.Namespace(tmp_path=tmp_path, monkeypatch=monkeypatch)


def test_every_registered_model_is_in_the_table():
    assert sorted(SPECS) == models.available()


@pytest.mark.parametrize("case, call, error, words", CASES, ids=[c[0] for c in CASES])
def test_bad_model_input(ctx, case, call, error, words):
    with pytest.raises(error) as info:
        call(ctx)
    text = str(info.value)
    assert words in text, text
    assert "\n" not in text and "Traceback" not in text, text
    if case.startswith("compare"):  # refused up front: no dataset was generated either
        assert not (ctx.tmp_path / "data").exists()


def _scan_inputs(b=2, L=5, d=4, n=3):
    return (
        torch.randn(b, d, L),
        torch.rand(b, d, L),
        -torch.rand(d, n),
        torch.randn(b, n, L),
        torch.randn(b, n, L),
        torch.randn(d),
    )


def _head_inputs(b=2, L=5, S=2, H=2, P=16, G=1, N=3):
    return (
        torch.randn(b, S, L, H * P),
        torch.rand(b, S, L, H),
        -torch.rand(S, H),
        torch.randn(b, S, L, G, N),
        torch.randn(b, S, L, G, N),
        torch.randn(S, H * P),
    )


def _grid_inputs(b=2, H=3, W=3, d=3, n=2):
    return (
        torch.randn(b, d, H, W),
        torch.rand(b, d, H, W),
        -torch.rand(d, n),
        torch.randn(b, n, H, W),
        torch.randn(b, n, H, W),
        torch.randn(d),
    )


EMPTY = [
    # 3. empty lengths give empty results (head_scan's "heads" backend and every torch backend used to fail)
    ("head_scan-L0-heads", lambda *a: ops.head_scan(*a, backend="heads"), _head_inputs(L=0), (2, 2, 0, 32)),
    ("head_scan-b0-torch", lambda *a: ops.head_scan(*a, backend="torch"), _head_inputs(b=0), (0, 2, 5, 32)),
    ("head_scan_ref-L0", ops.head_scan_ref, _head_inputs(L=0), (2, 2, 0, 32)),
    ("selective_scan-b0-torch", lambda *a: ops.selective_scan(*a, backend="torch"), _scan_inputs(b=0), (0, 4, 5)),
    ("selective_scan-L0", ops.selective_scan, _scan_inputs(L=0), (2, 4, 0)),
    ("selective_scan_ref-L0", ops.selective_scan_ref, _scan_inputs(L=0), (2, 4, 0)),
    (
        "knc_scan-b0-torch",
        lambda u, dl, A, B, C, D: ops.knc_scan(u, dl, 0.1 - A, B, C, D, backend="torch"),
        _scan_inputs(b=0),
        (0, 4, 5),
    ),
    ("knc_scan-L0", lambda u, dl, A, B, C, D: ops.knc_scan(u, dl, 0.1 - A, B, C, D), _scan_inputs(L=0), (2, 4, 0)),
    ("knc_scan_ref-L0", lambda u, dl, A, B, C, D: knc_scan_ref(u, dl, 0.1 - A, B, C, D), _scan_inputs(L=0), (2, 4, 0)),
    (
        "linear_scan-b0-torch",
        lambda a, x: ops.linear_scan(a, x, backend="torch"),
        (torch.rand(0, 3, 5), torch.randn(0, 3, 5)),
        (0, 3, 5),
    ),
    (
        "scan_2d-H0-torch",
        lambda *a: ops.selective_scan_2d(*a, R="0011", backend="torch"),
        _grid_inputs(H=0),
        (2, 3, 0, 3),
    ),
    (
        "scan_2d-b0-torch",
        lambda *a: ops.selective_scan_2d(*a, R="0011", backend="torch"),
        _grid_inputs(b=0),
        (0, 3, 3, 3),
    ),
    ("scan_2d_ref-W0", lambda *a: ops.selective_scan_2d_ref(*a, R="0011"), _grid_inputs(W=0), (2, 3, 3, 0)),
    ("s4d-L0", lambda u, K: ops.fft_conv(u, K[:, :0]), (torch.randn(2, 4, 0), torch.randn(4, 3)), (2, 4, 0)),
    (
        "block_topk-no-queries",
        lambda q, k: ops.block_topk(q, k, 3)[0],
        (torch.randn(2, 0, 4), torch.randn(2, 9, 4)),
        (2, 0, 3),
    ),
    (
        "block_topk-no-keys",
        lambda q, k: ops.block_topk(q, k, 3)[0],
        (torch.randn(2, 5, 4), torch.randn(2, 0, 4)),
        (2, 5, 0),
    ),
    (
        "block_topk-no-groups",
        lambda q, k: ops.block_topk(q, k, 3, key_mask=torch.ones(0, 9, dtype=torch.bool))[0],
        (torch.randn(0, 5, 4), torch.randn(0, 9, 4)),
        (0, 5, 3),
    ),
    (
        "ncp_mlp-no-rows",
        lambda x, w: ops.ncp_mlp(x, [w], [torch.zeros(2, 5)], [None], [torch.ones(5)]),
        (torch.randn(2, 0, 3), torch.randn(2, 3, 5)),
        (2, 0, 5),
    ),
]


@pytest.mark.parametrize("case, call, inputs, shape", EMPTY, ids=[c[0] for c in EMPTY])
def test_empty_length_gives_an_empty_result(case, call, inputs, shape):
    inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = call(*inputs)
    assert tuple(out.shape) == shape
    if out.requires_grad:  # the backward of an empty result runs too (zero gradients)
        out.sum().backward()
        assert all(t.grad is None or not t.grad.any() for t in inputs)


def _zero_targets():
    from neurodyn.train.metrics import evaluate_fields

    target = torch.zeros(4, 8, 8, 1)
    target[2:] = torch.randn(2, 8, 8, 1)
    return evaluate_fields(target + 1e-7 * torch.randn_like(target), target)


WARNS = [
    # 4. relative L2 of an all-zero target is undefined: one warning with the count, the values unchanged
    ("metrics-zero-targets", _zero_targets, "2 of 4 samples have an all-zero target"),
]


@pytest.mark.parametrize("case, call, words", WARNS, ids=[c[0] for c in WARNS])
def test_undefined_metric_warns(case, call, words):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    said = [str(w.message) for w in seen]
    assert len(said) == 1 and words in said[0] and "relative L2 is undefined" in said[0], said
