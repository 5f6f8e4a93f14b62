"""Shared pytest set-up: few threads (CI has 2 cores shared with other work) and fixed seeds."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(1)


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
