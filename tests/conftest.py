"""Shared pytest set-up: few threads (CI has 2 cores shared with other work) and fixed seeds."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_kernel: needs the compiled CPU kernels; they are built when the first "
                                       "such test starts (never at import or collection), and the test is skipped "
                                       "when they are unavailable")


def pytest_runtest_setup(item):
    """Build (or load) the compiled CPU kernels for a test marked ``needs_kernel``, or skip it without them."""
    if item.get_closest_marker("needs_kernel") is not None:
        from neurodyn.ops import cpu_kernel

        if cpu_kernel.get() is None:
            pytest.skip("the compiled CPU kernels are unavailable (no compiler or ninja, a failed build, or "
                        "NEURODYN_NO_CPP_EXT=1)")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty $NEURODYN_DATA for tests that generate datasets."""
    d = tmp_path / "data"
    monkeypatch.setenv("NEURODYN_DATA", str(d))
    return d


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the calls into the compiled CPU library by kernel name (every ``torch.ops.neurodyn`` operator runs
    through ``neurodyn.ops.kernel_ops._ext``); empty when the kernels are unavailable."""
    import collections

    from neurodyn.ops import kernel_ops

    calls = collections.Counter()
    ext = kernel_ops.cpu_kernel.get()

    class Spy:
        def __getattr__(self, name):
            fn = getattr(ext, name)

            def counted(*args):
                calls[name] += 1
                return fn(*args)
            return counted

    if ext is not None:
        monkeypatch.setattr(kernel_ops, "_ext", lambda: Spy())
    return calls
