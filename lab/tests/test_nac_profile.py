"""``neurodyn_lab.nac.profile`` at the tiny scale: the backbone's events are found and their share is the part of
the profiled step they take (the fused CPU op runs forward and backward in every step)."""

import pytest

from neurodyn_lab.nac import profile as tool

pytestmark = pytest.mark.needs_kernel


def test_the_backbone_share_of_a_tiny_nac_step():
    r = tool.profile(scale="tiny", length=12, steps=2, warmup=1)
    assert r["ncp_fwd_ms"] > 0 and r["ncp_bwd_ms"] > 0
    assert 0 < r["share"] < 1
