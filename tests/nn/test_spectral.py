"""SpectralConv against an explicit DFT written from the definition, in float64.

Oracle: with X(k) = sum_t x(t) exp(-2πi k·t/n) for the kept frequencies k (non-last axes 0..m-1 and
-m..-1, last axis 0..m-1), Y_o(k) = sum_i R_io(k) X_i(k), the layer must return the real signal whose half
spectrum is Y and zero elsewhere:
    y(t) = Re( (1/N) sum_k c(k_last) Y(k) exp(+2πi k·t/n) ) + bias,
with c = 1 for the zero (and, for even n, the Nyquist) frequency of the last axis and c = 2 otherwise
(the conjugate partners of the half spectrum). No FFT is used.
"""

import itertools

import numpy as np
import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.nn.spectral import SpectralConv, neuralop_n_modes


def dense_dft_oracle(x: np.ndarray, weight: np.ndarray, modes, bias=None) -> np.ndarray:
    """x (B, Ci, *n) real, weight (Ci, Co, *kept) complex -> (B, Co, *n), by explicit exponentials."""
    spatial = x.shape[2:]
    d = len(spatial)
    freqs = [list(range(m)) + list(range(-m, 0)) for m in modes[:-1]] + [list(range(modes[-1]))]
    fwd = [np.exp(-2j * np.pi * np.outer(f, np.arange(n)) / n) for f, n in zip(freqs, spatial)]  # (K, n)
    letters_t, letters_k = "stu"[:d], "xyz"[:d]
    # X[b,i,k..] = sum_t x[b,i,t..] prod_j E_j[k_j, t_j]
    eq = f"bi{letters_t}," + ",".join(f"{k}{t}" for k, t in zip(letters_k, letters_t)) + f"->bi{letters_k}"
    X = np.einsum(eq, x, *fwd)
    Y = np.einsum(f"bi{letters_k},io{letters_k}->bo{letters_k}", X, weight)
    n_last, f_last = spatial[-1], np.array(freqs[-1])
    c = np.where((f_last == 0) | (2 * f_last == n_last), 1.0, 2.0)
    Y = Y * c.reshape((1, 1) + (1,) * (d - 1) + (-1,))
    inv = [np.conj(e).T for e in fwd]  # (n, K)
    eq = f"bo{letters_k}," + ",".join(f"{t}{k}" for k, t in zip(letters_k, letters_t)) + f"->bo{letters_t}"
    y = np.einsum(eq, Y, *inv).real / np.prod(spatial)
    if bias is not None:
        y = y + bias.reshape((1, -1) + (1,) * d)
    return y


CASES = [
    ((5,), (17,)),  # 1D, odd
    ((9,), (16,)),  # 1D, last mode is the Nyquist frequency
    ((3, 4), (10, 9)),  # 2D, odd last axis
    ((4, 4), (8, 6)),  # 2D at the limit: 2*m0 == n0 and m1 == n1//2 + 1 (Nyquist)
    ((2, 2, 3), (5, 6, 7)),  # 3D
]


@pytest.mark.parametrize("method", ["dft", "fft"])
@pytest.mark.parametrize("modes,spatial", CASES)
def test_matches_dense_dft(modes, spatial, method):
    conv = SpectralConv(3, 2, modes, method=method, bias=True).double()
    x = torch.randn(2, 3, *spatial, dtype=torch.float64)
    y = conv(x)
    expected = dense_dft_oracle(x.numpy(), conv.complex_weight().detach().numpy(), modes, conv.bias.detach().numpy())
    assert y.shape == (2, 2, *spatial) and y.dtype == torch.float64
    np.testing.assert_allclose(y.detach().numpy(), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", ["dft", "fft"])
def test_gradients_match_finite_differences(method):
    conv = SpectralConv(2, 2, (2, 3), method=method, bias=True).double()
    x = torch.randn(1, 2, 6, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda inp, w, b: torch.func.functional_call(conv, {"weight": w, "bias": b}, (inp,)),
        (x, conv.weight, conv.bias),
    )


def test_float32_close_to_float64_and_methods_agree():
    conv = SpectralConv(8, 8, (6, 6))
    x = torch.randn(2, 8, 30, 31)
    ref = conv.double()(x.double())
    conv.float()
    for method in ("dft", "fft"):
        conv.method = method
        y = conv(x)
        assert y.dtype == torch.float32
        assert (y.double() - ref).abs().max() <= 1e-5 * ref.abs().max()


def band_limited(batch, channels, n, kmax, generator):
    """Real 2D field with frequencies |k| <= kmax on an n x n grid of [0, 1)^2 (sampled exactly)."""
    t = torch.arange(n, dtype=torch.float64) / n
    field = torch.zeros(batch, channels, n, n, dtype=torch.float64)
    for kx, ky in itertools.product(range(-kmax, kmax + 1), range(kmax + 1)):
        a, b = torch.randn(2, batch, channels, 1, 1, generator=generator, dtype=torch.float64)
        phase = 2 * np.pi * (kx * t[:, None] + ky * t[None, :])
        field += a * torch.cos(phase) + b * torch.sin(phase)
    return field


@pytest.mark.parametrize("method", ["dft", "fft"])
def test_resolution_invariance(method):
    """The same weights on a 2x finer grid give the same function: subsampling commutes with the layer."""
    g = torch.Generator().manual_seed(1)
    conv = SpectralConv(2, 3, (5, 6), method=method, bias=True).double()
    fine = band_limited(2, 2, 32, kmax=7, generator=g)  # 7 < 16/2: no aliasing on the 16 x 16 grid either
    coarse = fine[:, :, ::2, ::2]
    y_fine, y_coarse = conv(fine), conv(coarse)
    assert y_fine.shape[-2:] == (32, 32) and y_coarse.shape[-2:] == (16, 16)
    torch.testing.assert_close(y_fine[:, :, ::2, ::2], y_coarse, atol=1e-11, rtol=0)
    # and the fine output is itself the band-limited interpolation of the coarse one: it is not constant
    assert y_fine.std() > 0.1


def _weight_of(complex_weight: torch.Tensor) -> torch.Tensor:
    """The stored layout (M, C_in, 2, C_out), modes axis by axis, from a complex (C_in, C_out, *kept) weight."""
    ci, co = complex_weight.shape[:2]
    w = complex_weight.reshape(ci, co, -1).permute(2, 0, 1)
    return torch.stack([w.real, w.imag], dim=2)


@pytest.mark.parametrize("method", ["dft", "fft"])
def test_a_grid_smaller_than_the_modes_keeps_the_modes_it_holds(method):
    conv = SpectralConv(2, 3, (12, 12), method=method, bias=True).double()
    conv(torch.randn(1, 2, 24, 22, dtype=torch.float64))  # the smallest grid that holds them: nothing said
    x = torch.randn(2, 2, 23, 21, dtype=torch.float64)
    with pytest.warns(
        UserWarning,
        match=r"SpectralConv: modes=\(12, 12\) do not fit the \(23, 21\) grid; using "
        r"modes=\(11, 11\)",
    ):
        y = conv(x)
    # the layer built with those modes and the lowest frequencies of the weight: rows 0..10 and -11..-1 of the
    # first axis (stored at 0..11 and 12..23), columns 0..10 of the last
    small = SpectralConv(2, 3, (11, 11), method=method, bias=True).double()
    cw = conv.complex_weight().detach()
    rows = list(range(11)) + list(range(24 - 11, 24))
    with torch.no_grad():
        small.weight.copy_(_weight_of(cw[:, :, rows, :11]))
        small.bias.copy_(conv.bias)
    torch.testing.assert_close(y, small(x), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match=r"expected \(batch, 2, n, n\)"):
        conv(torch.randn(1, 24, 24))
    with pytest.raises(ValueError, match="holds no Fourier mode"):
        conv(torch.randn(1, 2, 1, 24))
    with pytest.raises(ConfigError):
        SpectralConv(1, 1, (0, 3))
    with pytest.raises(ConfigError):
        SpectralConv(1, 1, (2, 2, 2, 2))


def test_parameter_layout_and_count():
    conv = SpectralConv(4, 5, (3, 7))
    # 2*3 x 7 complex weights per (in, out) pair, counted as two reals each; no bias by default
    assert sum(p.numel() for p in conv.parameters()) == 2 * 4 * 5 * (2 * 3) * 7
    assert conv.complex_weight().shape == (4, 5, 6, 7)


def test_neuralop_n_modes_keeps_the_same_frequencies():
    # neuraloperator keeps n_modes[j] frequencies (centred) on non-last axes and n_modes[-1] // 2 + 1 on the last
    for modes in [(12, 12), (16,), (4, 5, 6)]:
        nm = neuralop_n_modes(modes)
        assert tuple(nm[:-1]) == tuple(2 * m for m in modes[:-1])
        assert nm[-1] // 2 + 1 == modes[-1]
