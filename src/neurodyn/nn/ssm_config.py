"""The selective-scan options of the state-space models, nested as ``model.ssm`` in their configs, and their
validation (the one place it happens: the layers build these configs from their arguments too).

``SSMConfig`` holds the sizes every selective state-space layer means the same way: :class:`LatentSSMConfig`
(LaMO's :class:`~neurodyn.nn.mamba.LatentSSM`), :class:`GeoMambaSSMConfig` (GeoMaNO's
:class:`~neurodyn.nn.geomamba.GeoMambaKernel`) and :class:`KirchhoffSSMConfig` (the Kirchhoff cells of CHONN's
:class:`~neurodyn.nn.kirchhoff.CascadedKirchhoffBlock`) add each mechanism's own scan options, under the same
name where they mean the same thing (``combine``: how the scan directions are merged; ``act``;
``discretization``; ``dt_rank``; ``dt_range``; ``backend``). Each model config declares ``ssm: <section> =
field(default_factory=...)`` with its own defaults; ``neurodyn.models.build`` fills the section from a nested
mapping (``model.ssm.heads=4``) and refuses a section's key given at the top level, naming where it belongs.

The scan directions stay in the model configs (``directions`` / ``scan``): their vocabulary and their "auto"
depend on the model's token layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import ConfigError, check_choice

__all__ = [
    "SSMConfig",
    "LatentSSMConfig",
    "GeoMambaSSMConfig",
    "KirchhoffSSMConfig",
    "LAYOUTS",
    "CONVS",
    "NORMS",
    "ACTS",
    "CORRECTIONS",
    "FORMS",
    "R_ORDERS",
    "MERGES",
    "BLOCK_COEF_NORMS",
]

# LatentSSM
LAYOUTS = ("x_proj", "fused", "hydra")
CONVS = ("auto", "causal", "same", "none")
NORMS = ("none", "layernorm", "rmsnorm")
ACTS = ("silu", "gelu")
# GeoMambaKernel
CORRECTIONS = ("none", "fixed", "learnable")
FORMS = ("cbx", "eq9", "alg2")
R_ORDERS = ("paper", "vmamba", "directions")
# CascadedKirchhoffBlock
MERGES = ("mean", "sum", "norm")
BLOCK_COEF_NORMS = ("none", "rms", "cascade")  # "cascade": rms in the cells fed by another cell (r >= 2)


def _check_range(name: str, value) -> None:
    """``value`` is a positive ``(low, high)`` pair with ``low <= high``."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else ()
    if (
        len(pair) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
        or not 0 < float(pair[0]) <= float(pair[1])
    ):
        raise ConfigError(f"ssm.{name} must be a positive (low, high) pair with low <= high; got {value!r}.")


@dataclass
class SSMConfig:
    """The sizes every selective scan shares (``model.ssm``).

    Attributes:
        d_state (int, 16): N, states per inner channel (``h_t in R^N``).
        expand (float, 1.0): inner width ``D_inner = expand * d_model`` of the scan.
        d_conv (int, 3): kernel size of the depthwise convolution before the scan.
    """

    d_state: int = 16
    expand: float = 1.0
    d_conv: int = 3

    BACKENDS: ClassVar[tuple] = ()  # the scan kernels a subclass accepts in ``backend`` (if it has the field)

    def __post_init__(self):
        if int(self.d_state) < 1:
            raise ConfigError(f"ssm.d_state must be >= 1, got {self.d_state!r}.")
        if float(self.expand) <= 0:
            raise ConfigError(f"ssm.expand must be > 0, got {self.expand!r}.")
        if self.BACKENDS:
            check_choice("ssm.backend", self.backend, self.BACKENDS)


@dataclass
class LatentSSMConfig(SSMConfig):
    """LaMO's scan (:class:`neurodyn.nn.mamba.LatentSSM`; its module docstring explains every option).

    Attributes:
        d_state (int, 64): N, states per inner channel (LaMO Table 6: 64).
        expand (float, 2.0): inner width ``d_inner = expand * d_model`` (Table 2's best: 2).
        d_conv (int, 3): depthwise convolution kernel (< 2: none; App. D.2: 3).
        heads (int, 4): SSM heads (Mamba-2: a step and a decay per head); must divide d_inner (Table 6: 1 or 4).
        groups (int, 1): groups of heads sharing B, C (Mamba-2's ngroups; kept as the authors' code has it, = 1).
        layout (str, "x_proj"): x_proj (Algorithm 1) | fused (Mamba-2 / bi-Mamba2 code) | hydra (Hydra code).
        conv (str, "auto"): causal (per direction) | same (shared, non-causal) | none | auto (same on grids and
            hydra, else causal).
        combine (str, "sum"): merge of the scan directions: sum (paper) | mean (bi-Mamba2 code).
        norm (str, "rmsnorm"): before the gate: rmsnorm (Mamba-2) | layernorm (grid code) | none (Algorithm 1).
        act (str, "silu"): conv and gate activation: silu (paper) | gelu (grid code).
        discretization (str, "euler"): euler (every Mamba kernel) | zoh (Eqs. 4-5; needs a_mode="head").
        a_mode (str, "head"): head (a scalar A per head, Mamba-2) | diag (a diagonal A per channel, Remark 2.1).
        a_init (str, "auto"): auto (uniform for a_mode=head, s4d_real for diag) | uniform | s4d_real (A_n = -n).
        dt_mode (str, "head"): head (a step per head) | channel (a step per channel, S6, Eq. 7; x_proj only).
        a_init_range (tuple, (1.0, 16.0)): -A ~ U[low, high] per head at initialisation ((1, 1): the grid code).
        dt_range (tuple, (1e-3, 1e-1)): softplus(dt_bias) log-uniform in [low, high] at initialisation.
        backend (str, "auto"): the scan kernel (``ops.head_scan`` / ``ops.selective_scan`` backends): auto (Triton
            on CUDA when ``triton`` imports, the fused CPU kernels on CPU) | triton (CUDA, or CPU under
            ``TRITON_INTERPRET=1``) | torch | cpp | ref | mamba (mamba-ssm's CUDA kernel, only when named).
    """

    # sizes
    d_state: int = 64
    expand: float = 2.0
    d_conv: int = 3
    heads: int = 4
    groups: int = 1
    # the mixer around the scan
    layout: str = "x_proj"
    conv: str = "auto"
    combine: str = "sum"
    norm: str = "rmsnorm"
    act: str = "silu"
    # the state's decay A and step Delta
    discretization: str = "euler"
    a_mode: str = "head"
    a_init: str = "auto"
    dt_mode: str = "head"
    a_init_range: tuple = (1.0, 16.0)
    dt_range: tuple = (1e-3, 1e-1)
    backend: str = "auto"

    BACKENDS: ClassVar[tuple] = ("auto", "triton", "torch", "cpp", "ref", "mamba")

    def __post_init__(self):
        super().__post_init__()
        for name, allowed in (
            ("layout", LAYOUTS),
            ("conv", CONVS),
            ("combine", ("sum", "mean")),
            ("norm", NORMS),
            ("act", ACTS),
            ("discretization", ("euler", "zoh")),
            ("a_mode", ("head", "diag")),
            ("a_init", ("auto", "uniform", "s4d_real")),
            ("dt_mode", ("head", "channel")),
        ):
            check_choice(f"ssm.{name}", getattr(self, name), allowed)
        if self.a_init == "s4d_real" and self.a_mode != "diag":
            raise ConfigError("ssm a_init='s4d_real' (A_n = -n per state) needs a_mode='diag'.")
        if self.dt_mode == "channel" and self.layout != "x_proj":
            raise ConfigError(
                f"ssm dt_mode='channel' (a Delta per channel through dt_proj) needs layout='x_proj', "
                f"got layout={self.layout!r}."
            )
        if self.discretization == "zoh" and self.a_mode != "head":
            raise ConfigError(
                "ssm discretization='zoh' needs a_mode='head' (a scalar A per head); exact ZOH with a "
                "diagonal A does not factor through the Euler kernel."
            )
        if self.layout == "hydra" and self.a_mode != "head":
            raise ConfigError("ssm layout='hydra' shares a scalar A per head between directions; use a_mode='head'.")
        if self.layout == "hydra" and self.conv == "causal" and int(self.d_conv) >= 2:
            raise ConfigError("ssm layout='hydra' uses one shared non-causal convolution (conv='same' or 'none').")
        if int(self.heads) < 1 or int(self.groups) < 1 or int(self.heads) % int(self.groups):
            raise ConfigError(f"ssm.heads = {self.heads} must be divisible by ssm.groups = {self.groups} (both >= 1).")
        if self.conv == "same" and int(self.d_conv) >= 2 and int(self.d_conv) % 2 == 0:
            raise ConfigError(f"ssm conv='same' needs an odd d_conv (centred kernel), got {self.d_conv}.")
        _check_range("a_init_range", self.a_init_range)
        _check_range("dt_range", self.dt_range)


@dataclass
class GeoMambaSSMConfig(SSMConfig):
    """GeoMaNO's kernel (:class:`neurodyn.nn.geomamba.GeoMambaKernel`; its module docstring explains every option).
    The defaults are the paper's Darcy readings (``neurodyn.models.geomano``); the kernel built directly keeps
    its own (``correction_form="cbx"``, ``gate="split"``, ``kind="1d"``).

    Attributes:
        d_state (int, 16): N, states per channel (Table 5: 16).
        expand (float, 1.0): ED / D (Algorithm 1: 1).
        d_conv (int, 3): depthwise k x k convolution (odd; <= 1: none).
        kind (str, "2d"): 2d (2DGeoMamba-SSM, Darcy) | 1d (vanilla GeoMamba-SSM, Navier-Stokes).
        dt_rank (int, 0): rank of the dt projection (0: ceil(D / 16), Mamba's).
        d_mode (str, "channel"): Mamba's skip D per channel | state (Remark 4.1) | none.
        combine (str, "sum"): merge of the scan directions: sum (VMamba's CrossMerge) | mean.
        gate (str, "shared"): shared (Algorithm 1: one Z feeds conv and gate) | split (VMamba's in_proj D -> 2 ED).
        norm_act (bool, True): act(LN(y)) before the gate (Algorithm 1 line 13); False: LN(y) (VMamba).
        act (str, "silu"): the kernel's activation (sigma, not defined in the paper: VMamba's SiLU) | gelu.
        correction (str, "fixed"): the geometric correction R: none | fixed (r_pattern) | learnable.
        r_pattern (str, "0011"): one 0/1 digit per direction (Table 3a's best for Darcy); quote it in YAML.
        r_order (str, "paper"): which direction digit k names: paper | vmamba | directions.
        r_init (str, "zeros"): learnable R starts at zeros (the plain kernel) | pattern.
        correction_form (str, "eq9"): eq9 (Eqs. 9-10) | alg2 (Algorithm 2 line 32) | cbx (ours).
        dt_range (tuple, (1e-3, 1e-1)): initial dt log-uniform in [low, high] (Mamba's).
        backend (str, "auto"): the scan kernel: auto (Triton on CUDA when ``triton`` imports, the fused CPU kernels
            on CPU) | triton (CUDA, or CPU under ``TRITON_INTERPRET=1``) | torch | cpp | ref (the sequential oracles;
            tests).
    """

    # the sizes d_state (16), expand (1.0) and d_conv (3) are SSMConfig's
    kind: str = "2d"
    dt_rank: int = 0
    d_mode: str = "channel"
    # the mixer around the scan
    combine: str = "sum"
    gate: str = "shared"
    norm_act: bool = True
    act: str = "silu"
    # the 2-D correction R (Eq. 9)
    correction: str = "fixed"
    r_pattern: str = "0011"
    r_order: str = "paper"
    r_init: str = "zeros"
    correction_form: str = "eq9"
    dt_range: tuple = (1e-3, 1e-1)
    backend: str = "auto"

    BACKENDS: ClassVar[tuple] = ("auto", "triton", "torch", "cpp", "ref")

    def __post_init__(self):
        super().__post_init__()
        check_choice("ssm.kind ('1d': vanilla GeoMamba-SSM, '2d': 2DGeoMamba-SSM)", self.kind, ("1d", "2d"))
        for name, allowed in (
            ("correction", CORRECTIONS),
            ("correction_form", FORMS),
            ("r_order", R_ORDERS),
            ("d_mode", ("channel", "state", "none")),
            ("combine", ("sum", "mean")),
            ("gate", ("split", "shared")),
            ("act", ACTS),
            ("r_init", ("zeros", "pattern")),
        ):
            check_choice(f"ssm.{name}", getattr(self, name), allowed)
        if int(self.dt_rank) < 0:
            raise ConfigError(f"ssm.dt_rank must be >= 0 (0: ceil(D / 16)), got {self.dt_rank!r}.")
        if int(self.d_conv) > 1 and int(self.d_conv) % 2 == 0:
            raise ConfigError(
                f"GeoMamba d_conv must be odd (a centred 2-D kernel) or <= 1 (no conv), got {self.d_conv}."
            )
        _check_range("dt_range", self.dt_range)


@dataclass
class KirchhoffSSMConfig(SSMConfig):
    """The Kirchhoff cells of CHONN's block (:class:`neurodyn.nn.kirchhoff.CascadedKirchhoffBlock`; its module
    docstring explains every option).

    Attributes:
        d_state (int, 16): N, states per channel of each cell (paper: 8 in 1-D, 16 on grids).
        expand (float, 1.0): inner width D = expand * d_model.
        d_conv (int, 3): the DSConv kernel (odd).
        discretization (str, "zoh"): zoh (Eq. 34, exact) | euler (Mamba's Delta b).
        dt_rank (str | int, "auto"): rank of the Delta projection ("auto": ceil(d_model / 16), Mamba's).
        combine (str, "mean"): merge of a cell's scan directions: mean (ours, unit gain per stage) | sum (VMamba's
            CrossMerge; the paper scale) | norm (a LayerNorm after every merge).
        selective (bool, True): Delta, b, c from the input (Eq. 33); False: time-invariant cells.
        coef_norm (str, "none"): none (Eq. 33) | cascade (cells 2..N from their RMS-normalised input) | rms (every
            cell).
        backend (str, "auto"): the cells' scan kernel (``ops.knc_scan``): auto (Triton on CUDA when ``triton``
            imports, the fused CPU kernel on CPU) | triton (CUDA, or CPU under ``TRITON_INTERPRET=1``) | torch | cpp |
            ref (the sequential oracle; tests).
    """

    discretization: str = "zoh"
    dt_rank: str | int = "auto"
    combine: str = "mean"
    selective: bool = True
    coef_norm: str = "none"
    backend: str = "auto"

    BACKENDS: ClassVar[tuple] = ("auto", "triton", "torch", "cpp", "ref")

    def __post_init__(self):
        super().__post_init__()
        check_choice("ssm.discretization", self.discretization, ("zoh", "euler"))
        check_choice("ssm.combine (how each cell's scan directions are merged)", self.combine, MERGES)
        check_choice("ssm.coef_norm", self.coef_norm, BLOCK_COEF_NORMS)
        if self.dt_rank not in ("auto", None) and (isinstance(self.dt_rank, bool) or int(self.dt_rank) < 1):
            raise ConfigError(f"ssm.dt_rank must be 'auto' or >= 1, got {self.dt_rank!r}.")
