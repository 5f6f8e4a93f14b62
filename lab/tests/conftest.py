"""The lab tests' set-up: one torch thread, fixed seeds, an empty ``$NEURODYN_DATA`` for tests that generate data, and
a guard: a test session that changes a file under ``lab/records`` fails (tests write into temporary folders only;
records are written by the drivers' record writers when an experiment runs)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

RECORDS = Path(__file__).resolve().parents[1] / "records"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: longer tests (deselect with -m 'not slow')")
    config.addinivalue_line(
        "markers",
        "needs_kernel: needs the compiled CPU kernels (built when the first such test "
        "starts; skipped when they are unavailable)",
    )


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_kernel") is not None:
        from neurodyn.ops import cpu_kernel

        if cpu_kernel.get() is None:
            pytest.skip("the compiled CPU kernels are unavailable")


def records_state() -> dict[str, tuple[int, int]]:
    """``{path: (size, mtime_ns)}`` of every file under ``lab/records``."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in RECORDS.rglob("*") if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def _records_untouched():
    """Fails the session when a test wrote into ``lab/records``."""
    before = records_state()
    yield
    after = records_state()
    changed = sorted(set(before) ^ set(after) | {p for p in before if p in after and before[p] != after[p]})
    assert not changed, f"a test changed lab/records: {changed[:5]}"


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
