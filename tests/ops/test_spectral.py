"""Truncated DFT matrices (ops.spectral) against torch.fft: forward and gradients, float32 and float64."""

import pytest
import torch

from neurodyn.ops.spectral import dft_axis, dft_stack, idft_axis, idft_side, irdft_matrix, kept_frequencies, rdft_matrix

CPU = torch.device("cpu")
TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-4)}
DTYPES = [torch.float64, torch.float32]


def _grads_close(f_ours, f_ref, x, dtype):
    out = f_ours(x)
    w = torch.randn_like(out)
    (g_ours,) = torch.autograd.grad((out * w).sum(), x)
    (g_ref,) = torch.autograd.grad((f_ref(x) * w).sum(), x)
    torch.testing.assert_close(g_ours, g_ref, **TOL[dtype])


def test_kept_frequencies():
    assert kept_frequencies(10, 3, last=False) == [0, 1, 2, -3, -2, -1]
    assert kept_frequencies(10, 3, last=True) == [0, 1, 2]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, m", [(16, 5), (15, 8), (16, 9), (7, 1)])
def test_rdft_matrix_is_truncated_rfft(n, m, dtype):
    torch.manual_seed(0)
    x = torch.randn(3, n, dtype=dtype, requires_grad=True)
    F = rdft_matrix(n, m, dtype, CPU)
    assert F.shape == (n, 2 * m)

    def ref(x):
        X = torch.fft.rfft(x)[..., :m]
        return torch.cat([X.real, X.imag], -1)

    torch.testing.assert_close(x @ F, ref(x), **TOL[dtype])
    _grads_close(lambda x: x @ F, ref, x, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, m", [(16, 5), (15, 8), (16, 9), (7, 1)])
def test_irdft_matrix_is_irfft_of_the_zero_filled_spectrum(n, m, dtype):
    torch.manual_seed(1)
    z = torch.randn(3, 2 * m, dtype=dtype, requires_grad=True)
    G = irdft_matrix(n, m, dtype, CPU)

    def ref(z):
        X = torch.complex(z[:, :m], z[:, m:])
        full = torch.zeros(3, n // 2 + 1, dtype=X.dtype).index_copy(1, torch.arange(m), X)
        return torch.fft.irfft(full, n)

    torch.testing.assert_close(z @ G, ref(z), **TOL[dtype])
    _grads_close(lambda z: z @ G, ref, z, dtype)


def _complex(t):  # (P, n, Q, 2, m) real layout -> complex (P, n, Q, m)
    return torch.complex(t[:, :, :, 0], t[:, :, :, 1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, m", [(12, 3), (9, 4), (8, 4)])
def test_dft_axis_is_fft_at_the_kept_frequencies(n, m, dtype):
    torch.manual_seed(2)
    P, Q, md = 2, 3, 4
    t = torch.randn(P, n, Q, 2, md, dtype=dtype, requires_grad=True)
    keep = torch.tensor(kept_frequencies(n, m, last=False)) % n

    def ours(t):
        return dft_axis(t, dft_stack(n, m, dtype, CPU), P)

    def ref(t):
        X = torch.fft.fft(_complex(t), dim=1)[:, keep]
        return torch.stack([X.real, X.imag], dim=3)

    torch.testing.assert_close(ours(t), ref(t), **TOL[dtype])
    _grads_close(ours, ref, t, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, m", [(12, 3), (9, 4), (8, 4)])
def test_idft_axis_is_ifft_of_the_zero_filled_spectrum(n, m, dtype):
    torch.manual_seed(3)
    P, Q, md = 2, 3, 4
    t = torch.randn(P, 2 * m, Q, 2, md, dtype=dtype, requires_grad=True)
    keep = torch.tensor(kept_frequencies(n, m, last=False)) % n

    def ours(t):
        return idft_axis(t, idft_side(n, m, dtype, CPU), P)

    def ref(t):
        z = _complex(t)
        full = torch.zeros(P, n, Q, md, dtype=z.dtype).index_copy(1, keep, z)
        x = torch.fft.ifft(full, dim=1)
        return torch.stack([x.real, x.imag], dim=3)

    torch.testing.assert_close(ours(t), ref(t), **TOL[dtype])
    _grads_close(ours, ref, t, dtype)


def test_matrices_are_cached_per_size_modes_dtype():
    assert rdft_matrix(16, 5, torch.float32, CPU) is rdft_matrix(16, 5, torch.float32, CPU)
    assert rdft_matrix(16, 5, torch.float32, CPU) is not rdft_matrix(16, 5, torch.float64, CPU)
