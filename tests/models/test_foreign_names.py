"""Names of neuraloperator, mamba-ssm and ncps given as model options are answered with ours (docs/coming-from.md),
and the n_modes conversion keeps the same frequencies (same parameter count of one spectral layer)."""

import pytest

from neurodyn.errors import ConfigError
from neurodyn.models import build


@pytest.mark.parametrize(
    "model,given,ours",
    [
        ("fno", {"n_modes": (16, 16)}, "'modes'"),
        ("fno", {"hidden_channels": 64}, "'width'"),
        ("gru", {"units": 32}, "'hidden'"),
        ("lamo", {"d_state": 8}, "model.ssm.d_state"),
    ],
)
def test_foreign_names_point_to_ours(model, given, ours):
    with pytest.raises(ConfigError) as err:
        build(model, **given)
    assert ours in str(err.value)


def test_neuralop_n_modes_keeps_our_frequencies():
    from neurodyn.nn.spectral import SpectralConv, neuralop_n_modes

    layer = SpectralConv(4, 4, (8, 9))
    kept = sum(p.numel() for p in layer.parameters() if p.dim() > 1) // (2 * 4 * 4)  # complex weights per pair
    n1, n2 = neuralop_n_modes((8, 9))
    assert (n1, n2) in ((16, 17),) and kept == n1 * (n2 // 2 + 1)  # theirs: n1 total x (n2 // 2 + 1) on the last
