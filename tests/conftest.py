"""Shared pytest set-up: few threads (CI has 2 cores shared with other work) and fixed seeds."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default="cpu",
        help="the torch device the model, op and trainer tests that take the `device` fixture run on "
        "(default cpu; e.g. cuda, cuda:1); a device this machine lacks skips them",
    )


def pytest_configure(config):
    text = config.getoption("--device")
    try:
        torch.device(text)
    except RuntimeError:
        raise pytest.UsageError(f"--device {text!r} is not a torch device (cpu, cuda, cuda:1, ...)") from None
    config.addinivalue_line(
        "markers",
        "needs_kernel: needs the compiled CPU kernels; they are built when the first "
        "such test starts (never at import or collection), and the test is skipped "
        "when they are unavailable",
    )


def pytest_runtest_setup(item):
    """Build (or load) the compiled CPU kernels for a test marked ``needs_kernel``, or skip it without them."""
    if item.get_closest_marker("needs_kernel") is not None:
        from neurodyn.ops import cpu_kernel

        if cpu_kernel.get() is None:
            pytest.skip(
                "the compiled CPU kernels are unavailable (no compiler or ninja, a failed build, or "
                "NEURODYN_NO_CPP_EXT=1)"
            )


def _usable(device: torch.device) -> bool:
    """Whether tensors can be created on ``device`` here."""
    try:
        torch.zeros(1, device=device)
    except (RuntimeError, AssertionError):  # torch raises AssertionError for a CUDA device in a CPU-only build
        return False
    return True


@pytest.fixture(scope="session")
def device(request) -> torch.device:
    """The device of ``pytest --device`` (default cpu) for the model, op and trainer tests that take it; the tests
    are skipped when this machine has no such device."""
    dev = torch.device(request.config.getoption("--device"))  # checked in pytest_configure
    if not _usable(dev):
        pytest.skip(f"--device {dev}: this machine has no such device")
    return dev


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture(autouse=True)
def _modes_warning_anew(monkeypatch):
    """Each test hears the warning about modes a grid cannot hold anew (it is said once per process)."""
    from neurodyn.nn import spectral

    monkeypatch.setattr(spectral, "_SAID", set())


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty $NEURODYN_DATA for tests that generate datasets."""
    d = tmp_path / "data"
    monkeypatch.setenv("NEURODYN_DATA", str(d))
    return d


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the calls into the compiled CPU library by kernel name (every ``torch.ops.neurodyn`` operator runs
    through ``neurodyn.ops.cpu_kernel.library``); empty when the kernels are unavailable."""
    import collections

    from neurodyn.ops import cpu_kernel

    calls = collections.Counter()
    ext = cpu_kernel.get()

    class Spy:
        def __getattr__(self, name):
            fn = getattr(ext, name)

            def counted(*args):
                calls[name] += 1
                return fn(*args)

            return counted

    if ext is not None:
        monkeypatch.setattr(cpu_kernel, "library", lambda: Spy())
    return calls


class TinyRun:
    """A finished ``run_experiment``: its final metrics, a copy of the model as built before any training step, the
    very module the trainer optimised, and the run restored from its checkpoint (``load_run``)."""

    def __init__(self, final, initial, module, run_dir):
        from neurodyn.train.runs import load_run

        self.final, self.initial, self.module = final, initial, module
        self.restored = load_run(run_dir)

    def test_rel_l2_by_hand(self) -> float:
        """mean_i |pred_i - y_i| / |y_i| of the saved model on the test split, in physical units."""
        from neurodyn.train.runs import batches

        r = self.restored
        with torch.no_grad():
            errs = [
                (r.task.predict(r.model, b) - b["y"]).flatten(1).norm(dim=1) / b["y"].flatten(1).norm(dim=1)
                for b in batches(r.split("test"), 3)
            ]
        return torch.cat(errs).mean().item()

    def train_errors(self) -> tuple[float, float]:
        """The training split's rel. L2 of the initial and of the trained model."""
        from neurodyn.train.runs import batches

        r = self.restored
        train = list(batches(r.split("train"), 8))
        return tuple(r.task.evaluate(m.eval(), train)["rel_l2"] for m in (self.initial, r.model))


@pytest.fixture
def tiny_run(monkeypatch):
    """``tiny_run(cfg, run_dir) -> TinyRun``: ``run_experiment`` keeping a copy of the model as the trainer built
    it, for tests that check what training did."""
    import copy

    from neurodyn.train import experiment

    def run(cfg, run_dir):
        built, real_build = [], experiment.build_model

        def keep_initial(*args, **kwargs):
            model = real_build(*args, **kwargs)
            built.append((copy.deepcopy(model), model))
            return model

        monkeypatch.setattr(experiment, "build_model", keep_initial)
        try:
            final = experiment.run_experiment(cfg, run_dir, progress=False)
        finally:
            monkeypatch.setattr(experiment, "build_model", real_build)
        return TinyRun(final, *built[-1], run_dir)

    return run


@pytest.fixture
def test_split_rel_l2():
    """``f(run) -> float``: a run's test-split relative L2 recomputed from its checkpoint's predictions on the raw
    test samples, ``mean_b ||pred_b - y_b|| / ||y_b||`` written out here (an oracle for the numbers a run records)."""

    def rel_l2(run) -> float:
        from neurodyn.train.runs import load_run

        trained = load_run(run)
        split = trained.split("test")
        x = torch.stack([split[i]["x"] for i in range(len(split))])
        y = torch.stack([split[i]["y"] for i in range(len(split))]).double()
        pred = trained.predict(x).double()
        return ((pred - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean().item()

    return rel_l2
