"""CHONN Fig. 4c-d, Darcy flow: CHONN-UNet against U-Net and FNO under one training protocol; the PDEBench-style
table of :mod:`neurodyn.train.metrics` plus RelL1, and the relative gain over the stronger baseline.

    python -m neurodyn_lab run chonn/darcy --scale cpu --seeds 0 1
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurodyn.train.metrics import poisson_metrics
from neurodyn.train.runs import TrainedRun, predict, read_history
from neurodyn_lab.chonn.common import header, model_table, plot_relative_gain, relative_gains, run_specs, write_tables
from neurodyn_lab.paths import records

DEFAULT_OUT = "chonn/darcy"


DARCY_MODELS = {"chonn_unet": "chonn_unet/darcy", "unet": "unet/darcy", "fno": "fno/darcy"}
DARCY_METRICS = (
    "rel_l2",
    "rel_l1_pct",
    "rmse",
    "nrmse",
    "max_err",
    "crmse",
    "brmse",
    "frmse_low",
    "frmse_mid",
    "frmse_high",
)
# one protocol for the three models at cpu scale (overrides every preset's own training section)
DARCY_PROTOCOL = {
    "cpu": [
        "train.epochs=4",
        "train.batch_size=20",
        "train.optimizer=adamw",
        "train.schedule.name=onecycle",
        "train.lr=2e-3",
        "train.weight_decay=1e-4",
        "train.loss=rel_l2",
        "data.n_train=1000",
        "data.n_test=200",
    ],
    "tiny": ["train.epochs=1"],
    "paper": [],
}
DARCY_MODEL_OVERRIDES = {
    "cpu": {
        "chonn_unet": ["model.init_features=8"],
        "unet": ["model.init_features=8"],
        "fno": ["model.width=32", "model.modes=[12,12]"],
    }
}


def run_darcy_benchmark(
    scale: str = "cpu",
    seeds: Sequence[int] = (0, 1),
    out_dir: Path | None = None,
    models: Sequence[str] = tuple(DARCY_MODELS),
    overrides: Sequence[str] = (),
    train: bool = True,
) -> list[dict[str, Any]]:
    """CHONN-UNet vs U-Net vs FNO on Darcy with one protocol; PDEBench-style metrics + RelL1."""
    from neurodyn.train.metrics import evaluate_fields

    jobs = [
        (
            name,
            name,
            DARCY_MODELS[name],
            [*DARCY_PROTOCOL.get(scale, []), *DARCY_MODEL_OVERRIDES.get(scale, {}).get(name, [])],
            {"model": name},
        )
        for name in models
    ]

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        pred, true = predict(r.task, r.model, r.split("test"), 20)
        return {
            **evaluate_fields(pred, true),
            "rel_l1_pct": poisson_metrics(pred, true)["rel_l1_pct"],
            "train_loss_curve": [h["train_loss"] for h in read_history(r.run_dir)],
        }

    return run_specs(
        "chonn-darcy",
        jobs,
        evaluate,
        lambda rec: f"rel_l2 {rec['rel_l2']:.4g}",
        scale,
        seeds,
        records(out_dir or DEFAULT_OUT),
        overrides,
        train,
    )


def report_darcy(results, out_dir: Path, scale: str, seeds: Sequence[int]) -> str:
    lines = header("Darcy flow (Fig. 4c-d)", scale, seeds, f"`python -m neurodyn_lab run chonn/darcy --scale {scale}`")
    table, means = model_table(results, "model", DARCY_METRICS, list(DARCY_MODELS))
    lines += table
    if "chonn_unet" in means and len(means) > 1:
        gains = relative_gains(
            means["chonn_unet"], {k: v for k, v in means.items() if k != "chonn_unet"}, DARCY_METRICS
        )
        plot_relative_gain(gains, out_dir / "darcy_gain.png", "Darcy: CHONN-UNet vs stronger of U-Net / FNO")
        lines += [
            "",
            "Relative gain of CHONN-UNet over the stronger baseline per metric: "
            + ", ".join(f"{k} {100 * v[0]:+.1f} % (vs {v[1]})" for k, v in gains.items()),
            "",
            "![darcy gain](darcy_gain.png)",
        ]
    return write_tables(out_dir, lines)
