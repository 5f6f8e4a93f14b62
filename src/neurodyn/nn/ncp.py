"""NCP-wired sparse cells: the repurposed NCPCell of NAC (Razzaq et al., Algorithm 1).

The wiring itself comes from the ``ncps`` package (``ncps.wirings.AutoNCP``, Lechner & Hasani); this
module only turns a built wiring into binary masks and evaluates Algorithm 1 with them::

    M_rec = |A_rec|,  M_in = |A_in|                     (binary masks of the wiring)
    u~    = u * w_in + b_in                             (elementwise input affine)
    x_t   = alpha( x_{t-1} (W_rec * M_rec) + u~ (W_in * M_in) + b ) * mask_act
    y_t   = x_t[I_out] * w_out + b_out                  (elementwise output affine)

Neuron groups. ``ncps`` numbers its state neurons ``[motor | command | inter]``; its *sensory*
neurons are the input features and are not state units. A cell names its groups with the ncps layer
names ``"inter"``, ``"command"``, ``"motor"`` (the paper's N_i, N_c, N_m; the paper's sensory layer
N_s is the input). The NAC sensory gate (paper eq. 13) reads the ncps inter layer: the neurons that
receive the input synapses, which the paper sizes as "60 % of the units" and calls sensory neurons.

A cell can hold ``n_cells`` independent copies (same masks, own weights) evaluated in one batched
call; NAC uses that for per-head backbones.

Initialisation (the paper gives none). ``init="glorot"`` is the authors' released default: W_in
Glorot-uniform, W_rec orthogonal over the full square. Both are scaled for a dense matrix, but the masks
keep only a few synapses per neuron, so every layer of the wiring shrinks the signal by about
``sqrt(fan_in_kept / fan_in_dense)``: through NAC's three-layer backbone the output varies ~10x less
than the input and phi, omega start almost constant (the NAC results page). ``init="fan_in"`` (default)
draws each kept synapse from ``N(0, gain^2 / n_j)`` with ``n_j`` the number of synapses neuron ``j`` actually
receives (LeCun init on the sparse graph, separately for the input and recurrent matrices), so a
layer preserves the variance of its input. Always b = 0, w_in = w_out = 1, b_in = b_out = 0. Masked
weights are multiplied by 0 in every forward pass, so they receive zero gradient and never influence
the output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError, check_choice, optional_import
from ..ops.activations import tanh
from ..ops.ncp_mlp import fused_available, ncp_mlp

GROUPS = ("inter", "command", "motor")
ACTIVATIONS = ("linear", "tanh", "relu", "sigmoid")
INITS = ("fan_in", "glorot")


def units_sensory(d_model: int) -> int:
    """Paper §4: ``ceil((d_model - 0.5) / 0.6)`` units, so that AutoNCP's inter layer has ``d_model`` neurons."""
    return -(-(10 * d_model - 5) // 6)


def units_backbone(d_model: int) -> int:
    """Paper §4: ``d_model + floor(d_model / 0.6)`` backbone units."""
    return d_model + (10 * d_model) // 6


def _ncps():
    return optional_import("ncps.wirings", "NAC's NCP wirings", "`pip install ncps` (or `pip install neurodyn[ncps]`)")


def build_autoncp(units: int, output_size: int, in_features: int, sparsity: float, seed: int = 22222):
    """A built ``ncps.wirings.AutoNCP`` wiring (validated here so that errors name NAC's fields)."""
    if not 0.1 <= sparsity <= 1.0:
        raise ConfigError(f"NCP sparsity must be in [0.1, 1.0] (ncps AutoNCP's sparsity_level), got {sparsity}")
    if output_size >= units - 2:
        raise ConfigError(
            f"an NCP wiring of {units} units cannot have {output_size} motor neurons "
            "(AutoNCP needs output_size < units - 2)"
        )
    if in_features < 1:
        raise ConfigError(f"an NCP wiring needs at least one input feature, got {in_features}")
    wiring = _ncps().AutoNCP(units, output_size, sparsity_level=sparsity, seed=seed)
    wiring.build(in_features)
    return wiring


def wiring_groups(wiring) -> dict[str, list[int]]:
    """State-neuron ids of each ncps layer: ``{"inter": [...], "command": [...], "motor": [...]}``."""
    return {g: [int(i) for i in range(wiring.units) if wiring.get_type_of_neuron(i) == g] for g in GROUPS}


def _activation(name: str):
    check_choice("NCP activation", name, ACTIVATIONS)
    return {"linear": lambda x: x, "tanh": tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}[name]


class NCPCell(nn.Module):
    """Algorithm 1 (repurposed NCPCell) over a built ncps wiring.

    ``input_group``: the group whose columns of the input mask are used (ncps routes inputs to its
    inter layer only, so with ``dense_input=False`` only ``"inter"`` receives input). ``output_group``:
    the neurons read as ``y``. ``disabled``: groups whose state is forced to 0 (``mask_act``).
    ``dense_input=True`` replaces ``|A_in|`` by a dense mask over the input group's columns (the
    authors' released code); ``False`` follows Algorithm 1. ``fused``: :meth:`forward` runs its updates as
    one fused op (:func:`neurodyn.ops.ncp_mlp.ncp_mlp`, same values to rounding) when the input is a float CPU
    tensor and the C++ kernel is built, or a CUDA tensor and ``triton`` imports (the Triton kernels); otherwise,
    and with ``fused=False``, as batched matmuls.
    """

    def __init__(
        self,
        wiring,
        input_group: str = "inter",
        output_group: str = "motor",
        disabled: Sequence[str] = (),
        activation: str = "linear",
        dense_input: bool = False,
        n_cells: int = 1,
        init: str = "fan_in",
        gain: float = 1.0,
        fused: bool = True,
    ):
        super().__init__()
        check_choice("NCP init", init, INITS)
        for g in (input_group, output_group, *disabled):
            check_choice("NCP group", g, GROUPS)
        if output_group in disabled:
            raise ConfigError(f"NCP output group {output_group!r} cannot also be disabled")
        groups = wiring_groups(wiring)
        self.groups = groups
        self.units, self.in_features = int(wiring.units), int(wiring.input_dim)
        self.activation_name = activation
        self.act = _activation(activation)
        self.n_cells = int(n_cells)
        self.fused = bool(fused)  # forward's updates on the compiled CPU kernel when available (ops.ncp_mlp)
        m_rec = torch.as_tensor(abs(wiring.adjacency_matrix), dtype=torch.float32)
        if dense_input:
            m_in = torch.zeros(self.in_features, self.units)
            m_in[:, groups[input_group]] = 1.0
        else:
            m_in = torch.as_tensor(abs(wiring.sensory_adjacency_matrix), dtype=torch.float32)
            outside = torch.ones(self.units, dtype=torch.bool)
            outside[groups[input_group]] = False
            m_in[:, outside] = 0.0
        act_mask = torch.ones(self.units)
        for g in disabled:
            act_mask[groups[g]] = 0.0
        self.register_buffer("mask_in", m_in)
        self.register_buffer("mask_rec", m_rec)
        self.register_buffer("mask_act", act_mask)
        self.register_buffer("out_index", torch.tensor(sorted(groups[output_group]), dtype=torch.long))
        self.out_features = len(groups[output_group])
        if self.out_features == 0:
            raise ConfigError(f"the NCP wiring has no {output_group!r} neurons to read")
        n, i, u, o = self.n_cells, self.in_features, self.units, self.out_features
        self.w_in = nn.Parameter(torch.ones(n, i))
        self.b_in = nn.Parameter(torch.zeros(n, i))
        self.W_in = nn.Parameter(torch.empty(n, i, u))
        self.W_rec = nn.Parameter(torch.empty(n, u, u))
        self.bias = nn.Parameter(torch.zeros(n, u))
        self.w_out = nn.Parameter(torch.ones(n, o))
        self.b_out = nn.Parameter(torch.zeros(n, o))
        self.init_name = init
        if init == "glorot":
            for c in range(n):
                nn.init.xavier_uniform_(self.W_in.data[c])
                nn.init.orthogonal_(self.W_rec.data[c])
        else:
            for w, m in ((self.W_in, m_in), (self.W_rec, m_rec)):
                fan = (m != 0).sum(0).clamp_min(1).to(torch.float32)  # synapses each neuron receives
                w.data.normal_().mul_(gain / fan.sqrt())
        self.register_load_state_dict_post_hook(self._rebuild_plans)  # the masks may come from a checkpoint
        active = act_mask.bool()
        # rows and columns of active neurons: does any active neuron feed another one?
        self.feedforward_only = bool(m_rec[active][:, active].sum() == 0)
        if self.feedforward_only:
            # the recurrent term is exactly zero (no active neuron feeds an active one): W_rec gets no gradient, so it
            # is a buffer, not a parameter (DistributedDataParallel refuses parameters without gradients; the state
            # dict keeps the key, so checkpoints load either way)
            w_rec = self.W_rec.detach()
            del self.W_rec
            self.register_buffer("W_rec", w_rec)

    # ------------------------------------------------------------------------------------------
    # With n_cells == 1 tensors are (..., k); with several cells they are (n_cells, ..., k).
    def _mm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if self.n_cells == 1:
            return x @ w[0]
        lead = x.shape[1:-1]
        out = torch.bmm(x.reshape(self.n_cells, -1, x.shape[-1]), w)
        return out.reshape(self.n_cells, *lead, w.shape[-1])

    def _vec(self, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.n_cells == 1:
            return v[0]
        return v.reshape(self.n_cells, *([1] * (x.dim() - 2)), v.shape[-1])

    def input_drive(self, u: torch.Tensor) -> torch.Tensor:
        """``s = (u * w_in + b_in)(W_in * M_in)``."""
        return self._mm(u * self._vec(self.w_in, u) + self._vec(self.b_in, u), self.W_in * self.mask_in)

    def step(self, drive: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """One neuron update ``x_t = alpha(r_t + s_t + b) * mask_act`` from the input drive ``s_t``."""
        pre = drive + self._vec(self.bias, drive)
        if state is not None:
            pre = pre + self._mm(state, self.W_rec * self.mask_rec)
        return self.act(pre) * self.mask_act

    def readout(self, state: torch.Tensor) -> torch.Tensor:
        """``y = x[I_out] * w_out + b_out``."""
        y = state.index_select(-1, self.out_index)
        return y * self._vec(self.w_out, y) + self._vec(self.b_out, y)

    def forward(self, u: torch.Tensor, unfolds: int = 1, head: tuple[torch.Tensor, torch.Tensor] | None = None):
        """Output after ``unfolds`` updates from the zero state with the input ``u`` held fixed.

        ``u: (..., in_features)``, or ``(n_cells, ..., in_features)`` for several cells. With
        ``unfolds=1`` only neurons that receive input synapses can depend on ``u``. Each update
        computes only the neurons that can still reach the output neurons by the last update (a
        pruning that does not change the result; :meth:`forward_unpruned` computes every neuron).
        ``head = (W (n_cells, in_features, o), b (n_cells, o))``: also return the linear read ``u W + b`` of the raw
        input, ``(y, u W + b)`` (NAC's time gate; on the fused kernel it costs no extra pass over ``u``).
        """
        self._check(u)
        unfolds = max(1, int(unfolds))
        plan = self._plan(unfolds)
        w_in = self.W_in * self.mask_in
        w_rec = self.W_rec * self.mask_rec
        if self.fused and fused_available(u):
            y, read = self._fused_layers(u, unfolds, w_in, w_rec, head)
            y = y * self._vec(self.w_out, y) + self._vec(self.b_out, y)
            return y if head is None else (y, read)
        uu = u * self._vec(self.w_in, u) + self._vec(self.b_in, u)
        state, prev = None, None
        for cols, all_active, _ in plan:
            pre = self._affine(uu, w_in.index_select(2, cols), self.bias.index_select(1, cols), per_cell=True)
            if state is not None:
                pre = self._affine(state, w_rec.index_select(1, prev).index_select(2, cols), pre, per_cell=False)
            state = self.act(pre)
            if not all_active:
                state = state * self.mask_act[cols]
            prev = cols
        y = state  # the last plan entry is the output group, in the same (ascending) order as out_index
        y = y * self._vec(self.w_out, y) + self._vec(self.b_out, y)
        return y if head is None else (y, self._mm(u, head[0]) + self._vec(head[1], u))

    def _fused_layers(self, u: torch.Tensor, unfolds: int, w_in: torch.Tensor, w_rec: torch.Tensor, head=None):
        """The plan's updates as one :func:`neurodyn.ops.ncp_mlp.ncp_mlp` call (same values as the loop in
        :meth:`forward`), the sensory scaling ``u * w_in + b_in`` and the optional ``head`` inside it; ``u`` is the
        raw input, ``(..., in)`` or ``(n_cells, ..., in)``. Returns ``(y, head output or None)``."""
        lead = u.shape[:-1] if self.n_cells == 1 else u.shape[1:-1]
        x = u.reshape(self.n_cells, -1, u.shape[-1])
        wi, b, wr, prev = [], [], [], None
        for cols, _, has_input in self._plan(unfolds):
            wi.append(w_in.index_select(2, cols) if has_input else None)
            b.append(self.bias.index_select(1, cols))
            wr.append(None if prev is None else w_rec.index_select(1, prev).index_select(2, cols))
            prev = cols
        p_in, p_rec, m = self._plan_wiring(unfolds)
        out = ncp_mlp(
            x,
            wi,
            b,
            wr,
            m,
            self.activation_name,
            pattern_in=p_in,
            pattern_rec=p_rec,
            in_scale=self.w_in,
            in_shift=self.b_in,
            head=head,
        )
        y, read = out if head is not None else (out, None)
        shape = lambda t: t.reshape(*(() if self.n_cells == 1 else (self.n_cells,)), *lead, t.shape[-1])  # noqa: E731
        return shape(y), None if read is None else shape(read)

    def _plan_wiring(self, unfolds: int) -> tuple[list, list, list]:
        """Constant per plan, cached like it: each update's input and recurrent synapse patterns (the fused kernel
        loops over these only) and its neuron activity mask (all ones when every computed neuron is active)."""
        cache = self.__dict__.setdefault("_plan_wirings", {})
        key = (unfolds, self.mask_rec.device)
        if key not in cache:
            p_in, p_rec, m, prev = [], [], [], None
            for cols, _, has_input in self._plan(unfolds):
                p_in.append(self.mask_in.index_select(1, cols) if has_input else None)
                p_rec.append(None if prev is None else self.mask_rec.index_select(0, prev).index_select(1, cols))
                m.append(self.mask_act[cols])
                prev = cols
            cache[key] = (p_in, p_rec, m)
        return cache[key]

    def prepare(self, unfolds: int) -> None:
        """Build the plan of ``unfolds`` updates now (it is a function of the wiring masks alone), so that a traced
        forward (``torch.compile``, ``torch.export``) finds it made instead of computing data-dependent sizes
        (``torch.nonzero``); rebuilt after ``load_state_dict`` and on a change of device."""
        self.__dict__["_prepared"] = sorted(set(self.__dict__.get("_prepared", [])) | {int(unfolds)})
        self._rebuild_plans()

    def _rebuild_plans(self, *_unused) -> None:
        self.__dict__["_plans"], self.__dict__["_plan_wirings"] = {}, {}
        for unfolds in self.__dict__.get("_prepared", []):
            self._plan_wiring(unfolds)

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        self._rebuild_plans()  # .to(device): the cached index tensors follow the masks
        return out

    def _affine(self, x: torch.Tensor, w: torch.Tensor, add: torch.Tensor, per_cell: bool) -> torch.Tensor:
        """``add + x @ w`` per cell, fused; ``add`` is a per-cell vector (n_cells, k) or a tensor like the result."""
        lead = x.shape[:-1] if self.n_cells == 1 else x.shape[1:-1]
        # flatten, not reshape(-1, k): a plan entry can have no neurons (k = 0) when a group is disabled
        x2 = x.flatten(0, -2) if self.n_cells == 1 else x.flatten(1, -2)
        if per_cell:
            a2 = add[0] if self.n_cells == 1 else add[:, None, :]
        else:
            a2 = add.flatten(0, -2) if self.n_cells == 1 else add.flatten(1, -2)
        out = torch.addmm(a2, x2, w[0]) if self.n_cells == 1 else torch.baddbmm(a2, x2, w)
        return out.reshape(*(() if self.n_cells == 1 else (self.n_cells,)), *lead, w.shape[-1])

    def forward_unpruned(self, u: torch.Tensor, unfolds: int = 1) -> torch.Tensor:
        """``forward`` computing every neuron at every update (test oracle)."""
        self._check(u)
        drive = self.input_drive(u)
        state = None
        for _ in range(max(1, int(unfolds))):
            state = self.step(drive, state)
        return self.readout(state)

    def _plan(self, unfolds: int) -> list[tuple[torch.Tensor, bool, bool]]:
        """Per update: the neuron ids computed (those with a path to the output by the last one), whether all of
        them are active, and whether any of them has an input synapse (ncps: only inter neurons do)."""
        cache = self.__dict__.setdefault("_plans", {})
        key = (unfolds, self.mask_rec.device)
        if key not in cache:
            act = self.mask_act.bool()
            rec = (self.mask_rec != 0) & act[:, None] & act[None, :]
            need = torch.zeros(self.units, dtype=torch.bool, device=rec.device)
            need[self.out_index] = True
            plan = [need]
            for _ in range(unfolds - 1):
                need = rec[:, need].any(1)
                plan.append(need)
            cache[key] = [
                (torch.nonzero(n).flatten(), bool(self.mask_act[n].all()), bool(self.mask_in[:, n].any()))
                for n in reversed(plan)
            ]
        return cache[key]

    def scan(self, u: torch.Tensor) -> torch.Tensor:
        """Run the cell as an RNN over a sequence ``u: (B, T, in_features)`` from the zero state.

        Returns ``(B, T, out_features)``. When no active neuron feeds another active one (true of the
        NAC sensory gate: ncps has no inter->inter synapses and the other groups are disabled), the
        recurrent term is exactly zero and every step is computed at once.
        """
        if self.n_cells != 1:
            raise ConfigError("NCPCell.scan runs a single cell; build it with n_cells=1")
        self._check(u)
        drive = self.input_drive(u)
        if self.feedforward_only:
            return self.readout(self.step(drive, None))
        state, outs = None, []
        for t in range(u.shape[-2]):
            state = self.step(drive[..., t, :], state)
            outs.append(self.readout(state))
        return torch.stack(outs, dim=-2)

    def scan_stepwise(self, u: torch.Tensor) -> torch.Tensor:
        """The step-by-step recurrence of ``scan`` without the fast path (test oracle)."""
        drive = self.input_drive(u)
        state = torch.zeros(*u.shape[:-2], self.units, dtype=u.dtype, device=u.device)
        outs = []
        for t in range(u.shape[-2]):
            state = self.step(drive[..., t, :], state)
            outs.append(self.readout(state))
        return torch.stack(outs, dim=-2)

    def _check(self, u: torch.Tensor) -> None:
        if u.shape[-1] != self.in_features:
            raise ValueError(
                f"NCP cell expects {self.in_features} input features in the last axis, got shape {tuple(u.shape)}"
            )

    def effective_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The masked weights ``(W_in * M_in, W_rec * M_rec)`` actually used."""
        return self.W_in * self.mask_in, self.W_rec * self.mask_rec

    def extra_repr(self) -> str:
        return (
            f"in={self.in_features}, units={self.units}, out={self.out_features}, cells={self.n_cells}, "
            f"activation={self.activation_name}, synapses={int(self.mask_rec.sum())}+{int(self.mask_in.sum())}"
        )


def density(mask: torch.Tensor) -> float:
    return float(mask.float().mean()) if mask.numel() else math.nan
