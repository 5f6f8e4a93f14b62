"""``benchmarks/tools/nac_profile.py`` at the tiny scale: the backbone's events are found and their share is the part of
the profiled step they take (the fused CPU op runs forward and backward in every step)."""
import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_kernel

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "tools" / "nac_profile.py"


def test_the_backbone_share_of_a_tiny_nac_step():
    spec = importlib.util.spec_from_file_location("neurodyn_nac_profile_test", SCRIPT)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    r = tool.profile(scale="tiny", length=12, steps=2, warmup=1)
    assert r["ncp_fwd_ms"] > 0 and r["ncp_bwd_ms"] > 0
    assert 0 < r["share"] < 1
