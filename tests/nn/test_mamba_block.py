"""neurodyn.nn.Mamba: mamba-ssm's Mamba block (constructor, parameter names and shapes, count, initialisation),
strictly causal, and equal to a step-by-step recurrence written here."""

import math

import pytest
import torch
import torch.nn.functional as F

from neurodyn.errors import ConfigError
from neurodyn.nn import Mamba
from neurodyn.ops import cpu_kernel

BACKENDS = ["torch", "ref"] + (["cpp"] if cpu_kernel.available() else [])


def expected_shapes(d_model, d_state=16, d_conv=4, expand=2, dt_rank="auto", bias=False, conv_bias=True):
    """mamba-ssm's parameters of ``Mamba(d_model, ...)``, from its published layout."""
    di = int(expand * d_model)
    r = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
    shapes = {
        "in_proj.weight": (2 * di, d_model),
        "conv1d.weight": (di, 1, d_conv),
        "x_proj.weight": (r + 2 * d_state, di),
        "dt_proj.weight": (di, r),
        "dt_proj.bias": (di,),
        "A_log": (di, d_state),
        "D": (di,),
        "out_proj.weight": (d_model, di),
    }
    if conv_bias:
        shapes["conv1d.bias"] = (di,)
    if bias:
        shapes["in_proj.bias"], shapes["out_proj.bias"] = (2 * di,), (d_model,)
    return shapes


@pytest.mark.parametrize("kw", [{}, dict(d_state=8, d_conv=3, expand=1.5, bias=True, conv_bias=False), dict(dt_rank=5)])
def test_parameter_names_shapes_and_count_are_mamba_ssms(kw):
    d_model = 40
    m = Mamba(d_model, **kw)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == expected_shapes(d_model, **kw)
    # the count from the formula: in_proj + conv + x_proj + dt_proj + A_log + D + out_proj
    di, n, k = int(kw.get("expand", 2) * d_model), kw.get("d_state", 16), kw.get("d_conv", 4)
    r = kw.get("dt_rank", math.ceil(d_model / 16))
    bias, conv_bias = kw.get("bias", False), kw.get("conv_bias", True)
    count = (
        d_model * 2 * di
        + bias * 2 * di
        + di * k
        + conv_bias * di
        + di * (r + 2 * n)
        + r * di
        + di
        + di * n
        + di
        + di * d_model
        + bias * d_model
    )
    assert sum(p.numel() for p in m.parameters()) == count
    twin = Mamba(d_model, **kw)
    twin.load_state_dict(m.state_dict())  # interchangeable state_dicts
    x = torch.randn(2, 7, d_model)
    torch.testing.assert_close(twin(x), m(x), rtol=0, atol=0)


def test_initialisation_is_mamba_ones():
    m = Mamba(64, d_state=16, dt_min=0.002, dt_max=0.05, dt_scale=2.0)
    dt = F.softplus(m.dt_proj.bias.detach().double())
    assert dt.min() >= 0.002 * (1 - 1e-5) and dt.max() <= 0.05 * (1 + 1e-5)
    assert dt.max() / dt.min() > 5  # spread over the range, not one value
    s = 2.0 / math.sqrt(m.dt_rank)
    assert m.dt_proj.weight.abs().max() <= s and m.dt_proj.weight.abs().max() > 0.5 * s
    torch.testing.assert_close(m.A_log.detach().exp(), torch.arange(1, 17.0).repeat(128, 1))
    assert torch.equal(m.D.detach(), torch.ones(128))
    const = Mamba(64, dt_init="constant")
    assert torch.equal(const.dt_proj.weight.detach(), torch.full((128, 4), 0.5))
    floor = Mamba(16, dt_min=1e-6, dt_max=2e-6, dt_init_floor=1e-3)  # the floor lifts every step to 1e-3
    torch.testing.assert_close(F.softplus(floor.dt_proj.bias.detach()), torch.full((32,), 1e-3))


def oracle(m: Mamba, u: torch.Tensor) -> torch.Tensor:
    """The block step by step, in float64: the causal convolution over the last d_conv inputs, then the recurrence."""
    p = {k: v.detach().double() for k, v in m.state_dict().items()}
    b, L, _ = u.shape
    di, n, k, r = m.d_inner, m.d_state, m.d_conv, m.dt_rank
    xz = u.double() @ p["in_proj.weight"].T + p.get("in_proj.bias", 0)
    x_in, z = xz[..., :di], xz[..., di:]
    A = -torch.exp(p["A_log"])
    h = torch.zeros(b, di, n, dtype=torch.float64)
    outs = []
    for t in range(L):
        conv = p.get("conv1d.bias", torch.zeros(di)).expand(b, di).clone()
        for j in range(k):  # tap j reads x_{t - (k - 1) + j}
            s = t - (k - 1) + j
            if s >= 0:
                conv = conv + p["conv1d.weight"][:, 0, j] * x_in[:, s]
        x = F.silu(conv)
        dbl = x @ p["x_proj.weight"].T
        dt, Bt, Ct = dbl[:, :r], dbl[:, r : r + n], dbl[:, r + n :]
        delta = F.softplus(dt @ p["dt_proj.weight"].T + p["dt_proj.bias"])  # (b, di)
        h = torch.exp(delta[..., None] * A) * h + (delta * x)[..., None] * Bt[:, None, :]
        y = (h * Ct[:, None, :]).sum(-1) + p["D"] * x
        y = y * F.silu(z[:, t])
        outs.append(y @ p["out_proj.weight"].T + p.get("out_proj.bias", 0))
    return torch.stack(outs, dim=1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kw", [{}, dict(d_conv=2, bias=True, expand=1)])
def test_equals_the_step_by_step_recurrence(backend, kw):
    torch.manual_seed(1)
    m = Mamba(24, d_state=6, backend=backend, **kw).double()
    u = torch.randn(2, 33, 24, dtype=torch.float64)
    torch.testing.assert_close(m(u), oracle(m, u), atol=1e-10, rtol=1e-9)
    m32 = Mamba(24, d_state=6, backend=backend, **kw)
    m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    torch.testing.assert_close(m32(u.float()), oracle(m, u).float(), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strictly_causal(backend):
    m = Mamba(16, backend=backend)
    u = torch.randn(3, 64, 16)
    v = u.clone()
    v[:, 40:] = torch.randn(3, 24, 16) * 10
    a, b = m(u), m(v)
    assert torch.equal(a[:, :40], b[:, :40])  # bit-identical before the change
    assert not torch.allclose(a[:, 40:], b[:, 40:])


def test_gradients_reach_every_parameter():
    m = Mamba(8, d_state=4)
    m(torch.randn(2, 10, 8)).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())


def test_bad_arguments_and_inputs_are_one_clear_error():
    with pytest.raises(ConfigError, match="dt_init"):
        Mamba(8, dt_init="xavier")
    with pytest.raises(ConfigError, match="dt_min <= dt_max"):
        Mamba(8, dt_min=0.1, dt_max=0.01)
    with pytest.raises(ConfigError, match="dt_rank"):
        Mamba(8, dt_rank="big")
    with pytest.raises(ValueError, match=r"\(batch, L, 8\); got \(2, 8\)"):
        Mamba(8)(torch.randn(2, 8))
    with pytest.raises(TypeError, match="inference_params must be an InferenceParams"):
        Mamba(8, layer_idx=0)(torch.randn(1, 3, 8), inference_params=object())


# ------------------------------------------------------------------------------------------ decoding


DECODE_CASES = [dict(), dict(d_conv=2, bias=True, expand=1), dict(conv_bias=False, d_state=5)]


def _model(kw, backend="auto", seed=0):
    torch.manual_seed(seed)
    m = Mamba(16, d_state=kw.pop("d_state", 6), layer_idx=3, backend=backend, **kw).eval()
    with torch.no_grad():  # away from the initial values, so every parameter shows in the output
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


@pytest.mark.parametrize("kw", DECODE_CASES)
@pytest.mark.parametrize("L", [1, 3, 4, 9, 23])
def test_step_by_step_from_an_empty_cache_equals_the_forward_pass(kw, L):
    """float32, batch 3: one token at a time through step() from allocate_inference_cache's zero states gives the
    forward pass on the whole sequence (within 1e-5) and the float64 recurrence written above."""
    m = _model(dict(kw))
    u = torch.randn(3, L, 16)
    conv_state, ssm_state = m.allocate_inference_cache(3, max_seqlen=L)
    assert conv_state.shape == (3, m.d_inner, m.d_conv) and ssm_state.shape == (3, m.d_inner, m.d_state)
    assert not conv_state.any() and not ssm_state.any() and conv_state.dtype == ssm_state.dtype == torch.float32
    with torch.no_grad():
        steps = []
        for t in range(L):
            out, c, s = m.step(u[:, t : t + 1], conv_state, ssm_state)
            assert c is conv_state and s is ssm_state and out.shape == (3, 1, 16)
            steps.append(out)
        full = m(u)
    decoded = torch.cat(steps, dim=1)
    torch.testing.assert_close(decoded, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(decoded.double(), oracle(m, u), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kw", DECODE_CASES)
@pytest.mark.parametrize("prompt, total", [(1, 12), (3, 12), (4, 12), (9, 12), (12, 20)])
def test_prompt_then_decode_equals_the_forward_pass(backend, kw, prompt, total):
    """mamba-ssm's generation loop: the prompt through forward(inference_params) at offset 0 (filling the caches),
    then one token per call with the offset advanced; the outputs are the forward pass over the whole sequence."""
    from neurodyn.nn import InferenceParams

    m = _model(dict(kw), backend=backend, seed=1)
    u = torch.randn(2, total, 16)
    params = InferenceParams(max_seqlen=total, max_batch_size=2)
    with torch.no_grad():
        outs = [m(u[:, :prompt], inference_params=params)]
        params.seqlen_offset += prompt
        conv_state, ssm_state = params.key_value_memory_dict[3]
        assert conv_state.shape == (2, m.d_inner, m.d_conv) and ssm_state.shape == (2, m.d_inner, m.d_state)
        for t in range(prompt, total):
            outs.append(m(u[:, t : t + 1], inference_params=params))
            params.seqlen_offset += 1
        full = m(u)
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=1e-5)


def test_several_tokens_after_the_prompt_are_decoded_in_turn_and_reset_starts_over():
    from neurodyn.nn import InferenceParams

    m = _model({}, seed=2)
    u = torch.randn(2, 10, 16)
    params = InferenceParams(max_seqlen=10, max_batch_size=2)
    with torch.no_grad():
        head = m(u[:, :4], inference_params=params)
        params.seqlen_offset = 4
        tail = m(u[:, 4:], inference_params=params)  # six tokens at once, past the prompt
        full = m(u)
        torch.testing.assert_close(torch.cat([head, tail], dim=1), full, atol=1e-5, rtol=1e-5)
        v = torch.randn(2, 6, 16)
        params.reset(6, 2)  # a new sequence: the next prompt rewrites the states
        assert params.seqlen_offset == 0
        again = m(v, inference_params=params)
    torch.testing.assert_close(again, m(v), atol=1e-6, rtol=1e-6)


def test_decoding_errors_are_one_sentence():
    from neurodyn.nn import InferenceParams

    m = Mamba(8, d_state=4)
    with pytest.raises(ValueError, match=r"under its layer_idx .* Mamba\(\.\.\., layer_idx=i\)"):
        m(torch.randn(1, 3, 8), inference_params=InferenceParams(3, 1))
    m = Mamba(8, d_state=4, layer_idx=0)
    conv_state, ssm_state = m.allocate_inference_cache(2, 5)
    with pytest.raises(ValueError, match=r"decodes one token, hidden_states of shape \(batch, 1, 8\); got \(2, 2, 8\)"):
        m.step(torch.randn(2, 2, 8), conv_state, ssm_state)
    with pytest.raises(ValueError, match=r"ssm_state of shape \(3, 16, 4\) .*; got \(2, 16, 4\)"):
        m.step(torch.randn(3, 1, 8), *m.allocate_inference_cache(3, 5)[:1], ssm_state)
    params = InferenceParams(5, 2)
    m(torch.randn(2, 3, 8), inference_params=params)
    params.seqlen_offset = 3
    with pytest.raises(ValueError, match="holds states of 2 sequences for layer 0 and hidden_states has 1"):
        m(torch.randn(1, 1, 8), inference_params=params)
    half = m.allocate_inference_cache(2, 5, dtype=torch.float64)
    assert all(s.dtype == torch.float64 for s in half)
