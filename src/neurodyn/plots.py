"""Plots written into run folders: prediction panels and learning curves (PNG, matplotlib Agg).

Every figure of a run says what it shows: its title names the model, the run and the data file
(:func:`run_title`), its panels name the fields (the store's field names with what they are, where the generator
says: ``a (permeability)``, ``u (solution (pressure))``; a converted file's fields name the source arrays:
:func:`field_labels`) and its axes their quantities. :func:`save_figure` writes the drawn title and the panels'
titles and axis labels into the PNG's text chunks (``Title``, ``Description``), so a reader (or a test) finds them
without looking at the pixels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def figure_texts(fig) -> dict[str, str]:
    """What a figure says in words: ``Title`` (its suptitle, else its first panel's title) and ``Description`` (each
    panel's title, x label and y label, one panel a line, ``title | x | y``)."""
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    title = suptitle or next((ax.get_title() for ax in panels if ax.get_title()), "")
    lines = [" | ".join((ax.get_title(), ax.get_xlabel(), ax.get_ylabel())) for ax in panels]
    return {"Title": title, "Description": "\n".join(lines)}


def save_figure(fig, path: str | Path, dpi: int = 90, rect: tuple[float, float, float, float] | None = None) -> Path:
    """Lay out ``fig`` (within ``rect`` of the figure, leaving room for a note), write it to ``path`` (creating the
    folder; a PNG carries :func:`figure_texts` as its text chunks) and close it."""
    path = Path(path)
    fig.tight_layout(rect=rect)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = figure_texts(fig) if path.suffix.lower() == ".png" else None
    fig.savefig(path, dpi=dpi, metadata=metadata)
    plt.close(fig)
    return path


def _set_title(fig, title: str) -> None:
    if title:
        fig.suptitle(title, fontsize=10)


def plot_point_cloud_predictions(
    pos: torch.Tensor,
    y: torch.Tensor,
    pred: torch.Tensor,
    path: str | Path,
    channel: int = 0,
    mask: torch.Tensor | None = None,
    title: str = "",
    target: str = "target",
) -> Path:
    """Rows of target / prediction / |error| of a few point clouds, each point drawn at its coordinates (the first
    two of ``pos``) and coloured by the value. pos: (B, P, d), y and pred: (B, P, C); mask (B, P): real points
    (padding is not drawn). ``target``: the target field's name for the panels (e.g. ``u (von Mises stress)``)."""
    pos, y, pred = _np(pos), _np(y)[..., channel], _np(pred)[..., channel]
    keep = np.ones(y.shape, dtype=bool) if mask is None else mask.detach().cpu().numpy().astype(bool)
    n, d = pos.shape[0], pos.shape[-1]
    fig, axes = plt.subplots(n, 3, figsize=(11, 3.2 * n + 0.5), squeeze=False)
    for i in range(n):
        k = keep[i]
        px, py = pos[i, k, 0], pos[i, k, 1] if d > 1 else np.zeros(k.sum())
        err = np.abs(pred[i, k] - y[i, k])
        lo, hi = y[i, k].min(), y[i, k].max()
        rel = np.linalg.norm(err) / max(np.linalg.norm(y[i, k]), 1e-12)
        for ax, (vals, name, lim, cmap) in zip(
            axes[i],
            (
                (y[i, k], f"target {target}", (lo, hi), "viridis"),
                (pred[i, k], f"prediction of {target}", (lo, hi), "viridis"),
                (err, f"|error| of {target} (rel. L2 {rel:.3g})", None, "magma"),
            ),
        ):
            sc = ax.scatter(
                px,
                py,
                c=vals,
                s=6,
                cmap=cmap,
                vmin=None if lim is None else lim[0],
                vmax=None if lim is None else lim[1],
            )
            ax.set_title(f"{name}, {int(k.sum())} points", fontsize=9)
            ax.set_xlabel("coordinate 0"), ax.set_ylabel("coordinate 1" if d > 1 else "")
            ax.set_aspect("equal", adjustable="datalim")
            fig.colorbar(sc, ax=ax, fraction=0.046, pad=0.04)
    _set_title(fig, title)
    return save_figure(fig, path)


def plot_predictions(
    x: torch.Tensor,
    y: torch.Tensor,
    pred: torch.Tensor,
    path: str | Path,
    channel: int = 0,
    title: str = "",
    source: str = "input",
    target: str = "target",
) -> Path:
    """Rows of input / target / prediction / |error| for a few samples.

    x: (B, *spatial, C_in), y and pred: (B, *spatial, C_out); 2-D grids are drawn as images, 1-D as lines (point
    clouds: :func:`plot_point_cloud_predictions`). ``source`` / ``target``: the input's (its first channel is
    drawn) and the target's field names for the panels (e.g. ``a (permeability)``, ``u (solution)``).
    """
    x, y, pred = _np(x), _np(y), _np(pred)
    n = x.shape[0]
    spatial = y.ndim - 2
    path = Path(path)
    if spatial == 2:
        fig, axes = plt.subplots(n, 4, figsize=(12, 2.8 * n + 0.5), squeeze=False)
        for i in range(n):
            err = np.abs(pred[i, ..., channel] - y[i, ..., channel])
            lo, hi = y[i, ..., channel].min(), y[i, ..., channel].max()
            rel = np.linalg.norm(err) / max(np.linalg.norm(y[i, ..., channel]), 1e-12)
            panels = [
                (x[i, ..., 0], f"input {source}", None, "viridis"),
                (y[i, ..., channel], f"target {target}", (lo, hi), "viridis"),
                (pred[i, ..., channel], f"prediction of {target}", (lo, hi), "viridis"),
                (err, f"|error| of {target} (rel. L2 {rel:.3g})", None, "magma"),
            ]
            for ax, (img, name, lim, cmap) in zip(axes[i], panels):
                im = ax.imshow(
                    img.T,
                    origin="lower",
                    cmap=cmap,
                    vmin=None if lim is None else lim[0],
                    vmax=None if lim is None else lim[1],
                )
                ax.set_title(name, fontsize=8)
                ax.set_xticks([]), ax.set_yticks([])
                ax.set_xlabel("x (grid index)", fontsize=7), ax.set_ylabel("y (grid index)", fontsize=7)
                fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    elif spatial == 1:
        fig, axes = plt.subplots(n, 2, figsize=(10, 2.5 * n + 0.5), squeeze=False)
        for i in range(n):
            axes[i, 0].plot(x[i, :, 0], color="0.4", label=f"input {source}")
            axes[i, 0].plot(y[i, :, channel], label=f"target {target}")
            axes[i, 0].plot(pred[i, :, channel], "--", label=f"prediction of {target}")
            axes[i, 0].set_title(f"sample {i}", fontsize=9)
            axes[i, 1].plot(np.abs(pred[i, :, channel] - y[i, :, channel]), color="C3")
            axes[i, 1].set_title(f"|error| of {target}", fontsize=9)
            for ax in axes[i]:
                ax.set_xlabel("x (grid index)", fontsize=8)
            axes[i, 0].set_ylabel("value", fontsize=8), axes[i, 1].set_ylabel("|error|", fontsize=8)
        axes[0, 0].legend(fontsize=8)
    else:  # point clouds and 3-D fields: scatter of target vs prediction
        fig, ax = plt.subplots(figsize=(4, 4.4))
        ax.scatter(y[..., channel].ravel(), pred[..., channel].ravel(), s=1, alpha=0.3)
        lims = [y[..., channel].min(), y[..., channel].max()]
        ax.plot(lims, lims, "k--", lw=1)
        ax.set_xlabel(f"target {target}"), ax.set_ylabel(f"prediction of {target}")
        ax.set_title("prediction against target, every point", fontsize=9)
    _set_title(fig, title)
    return save_figure(fig, path)


def _integer_epochs(ax) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_learning_curve(
    history: Sequence[dict[str, Any]],
    path: str | Path,
    objective: str = "loss",
    metric: str = "rel_l2",
    title: str = "",
    same_quantity: bool = False,
    log: bool = True,
) -> Path:
    """The training objective (``objective``: the loss's name, the mean over each epoch's batches while it trains)
    and the validation metric ``metric`` (after each epoch) against the epoch (integer ticks).

    ``same_quantity``: the objective is the validation metric measured on the training batches (a steady task
    trained on ``rel_l2``), so both curves share one axis and their levels compare. Otherwise they are different
    quantities and each gets its own panel, with a line in the figure saying why they are not on one axis.
    ``log``: log-scaled values (error metrics; not accuracy)."""
    path = Path(path)
    epochs, losses = [h["epoch"] + 1 for h in history], [h["train_loss"] for h in history]
    ev = [(h["epoch"] + 1, h["val"][metric]) for h in history if "val" in h and metric in h.get("val", {})]
    name = {"rel_l2": "relative L2"}.get(metric, metric)
    if same_quantity:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        axes = [ax, ax]
    else:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharex=True)
    draw = (lambda ax: ax.semilogy) if log else (lambda ax: ax.plot)
    if epochs:
        train_label = (
            f"training {name} (objective, mean over each epoch's batches)"
            if same_quantity
            else f"training objective ({objective})"
        )
        draw(axes[0])(epochs, losses, "s-", ms=3, color="C0", label=train_label)
    if ev:
        draw(axes[1])(*zip(*ev), "o-", ms=3, color="C1", label=f"validation {name} (after each epoch)")
    for ax in set(axes):
        ax.set_xlabel("epoch")
        _integer_epochs(ax)
        ax.grid(True, which="both", alpha=0.3)
    if same_quantity:
        axes[0].set_ylabel(name)
        axes[0].set_title(f"training and validation {name}", fontsize=9)
        if epochs or ev:
            axes[0].legend(fontsize=8)
    else:
        axes[0].set_ylabel(f"training objective ({objective})")
        axes[0].set_title(f"training objective: {objective}", fontsize=9)
        axes[1].set_ylabel(f"validation {name}")
        axes[1].set_title(f"validation {name}" + ("" if ev else " (none: no validation split)"), fontsize=9)
        fig.text(
            0.5,
            0.005,
            f"Two panels: the training objective ({objective}, on the training batches as they are "
            f"trained) and the validation {name} (as the task evaluates) are different quantities, "
            "so their levels do not compare; read each curve's trend.",
            ha="center",
            va="bottom",
            fontsize=7.5,
            color="0.3",
        )
    _set_title(fig, title)
    return save_figure(fig, path, rect=None if same_quantity else (0, 0.04, 1, 1))


def plot_rollout_error(per_step: Sequence[float], path: str | Path, label: str = "rollout", title: str = "") -> Path:
    """Relative L2 error of each rollout step (mean over test trajectories), integer step ticks."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6, 4.3))
    ax.semilogy(np.arange(1, len(per_step) + 1), per_step, "o-", ms=3, label=label)
    ax.set_xlabel("rollout step"), ax.set_ylabel("relative L2 of the step (mean over trajectories)")
    ax.set_title("error against rollout step", fontsize=9)
    _integer_epochs(ax)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    _set_title(fig, title)
    return save_figure(fig, path)


def plot_rollout_curves(
    curves: dict[str, Sequence[float]],
    path: str | Path,
    title: str = "",
    baselines: Sequence[str] = (),
    log: bool = False,
) -> Path:
    """Per-step relative L2 of several models on one axis (one curve per name; ``baselines`` dashed)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, c in curves.items():
        ax.plot(np.arange(1, len(c) + 1), c, label=name, ls="--" if name in baselines else "-")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("rollout step"), ax.set_ylabel("relative L2"), ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    return save_figure(fig, path, dpi=120)


def plot_rollout_animation(
    truth: torch.Tensor,
    pred: torch.Tensor,
    path: str | Path,
    channel: int = 0,
    fps: int = 4,
    title: str = "",
    target: str = "target",
) -> Path:
    """GIF of target vs prediction vs error over a rollout; truth, pred: (T, *spatial, C), 1-D or 2-D. ``title``
    (the run and data) heads every frame, with the step; ``target`` names the field."""
    from matplotlib.animation import FuncAnimation, PillowWriter

    truth, pred = _np(truth)[..., channel], _np(pred)[..., channel]
    path = Path(path)
    lo, hi = truth.min(), truth.max()
    err_max = max(np.abs(pred - truth).max(), 1e-12)
    if truth.ndim == 3:
        fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
        ims = [
            ax.imshow(img.T, origin="lower", vmin=v0, vmax=v1, cmap=cm)
            for ax, img, v0, v1, cm in zip(
                axes,
                (truth[0], pred[0], np.abs(pred[0] - truth[0])),
                (lo, lo, 0),
                (hi, hi, err_max),
                ("viridis", "viridis", "magma"),
            )
        ]
        for ax, name in zip(axes, (f"target {target}", f"prediction of {target}", f"|error| of {target}")):
            ax.set_title(name, fontsize=9), ax.set_xticks([]), ax.set_yticks([])

        def update(k):
            for im, img in zip(ims, (truth[k], pred[k], np.abs(pred[k] - truth[k]))):
                im.set_data(img.T)
            fig.suptitle(f"{title}\nrollout step {k + 1}" if title else f"rollout step {k + 1}", fontsize=9)
            return ims
    else:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        (lt,) = ax.plot(truth[0], label=f"target {target}")
        (lp,) = ax.plot(pred[0], "--", label=f"prediction of {target}")
        ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)), ax.legend(fontsize=8)
        ax.set_xlabel("x (grid index)")

        def update(k):
            lt.set_ydata(truth[k]), lp.set_ydata(pred[k])
            ax.set_title(f"{title}\nrollout step {k + 1}" if title else f"rollout step {k + 1}", fontsize=9)
            return lt, lp

    anim = FuncAnimation(fig, update, frames=len(truth), blit=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------------
# The plots of a trained run folder
# --------------------------------------------------------------------------------------------------


def write_run_plots(run_dir: str | Path, device: str | torch.device = "cpu") -> list[str]:
    """Draw a trained run's plots into its folder from its last checkpoint and ``metrics.jsonl``, and link them
    from its ``summary.md`` (:func:`link_plots`); returns the names of the files written.

    One prediction plot per test set: ``predictions.png`` of the first (the test split, else the first test file)
    and ``predictions_<name>.png`` of each other test file. Steady: input / target / prediction / error (point
    clouds: over their coordinates); autoregressive: the last step of a rollout, plus ``rollout.gif`` and
    ``rollout_error.png`` of the first set; sequence: the confusion matrix (classification, class names on the
    axes) or prediction against target (regression). Always ``learning_curve.png`` (:func:`plot_learning_curve`).
    Every figure's title names the model, the run and the data (:func:`run_title`); the panels name the fields
    (:func:`field_labels`).
    """
    from .train.predict import load_run
    from .train.runs import read_history

    run_dir = Path(run_dir)
    run = load_run(run_dir, device=device)
    history = read_history(run_dir)
    sets = {name: dataset for name, dataset in run.test_sets(required=False).items() if len(dataset)}
    written = []
    for k, (name, dataset) in enumerate(sets.items()):
        out = run_dir / ("predictions.png" if k == 0 else f"predictions_{_file_name(name)}.png")
        label = "test split" if name == "test" else f"test file {name!r}"
        written += _plot_set(run, dataset, out, label, run_dir, first=k == 0, device=device)
    training_file = _store_name(run.cfg)
    curve_title = run_title(run, f"trained on {training_file}" if training_file else "")
    if getattr(run.task, "name", "") == "sequence":
        plot_sequence_learning_curve(
            history,
            run.task.monitor[0],
            run_dir / "learning_curve.png",
            objective="cross-entropy" if run.task.kind == "classification" else "MSE of normalised targets",
            title=curve_title,
        )
    else:
        loss = str(run.train_config.loss)
        # a steady task's objective is its loss of the predictions in the data's units, batch by batch: trained on
        # rel_l2, it is the validation metric measured on the training batches (the same quantity, one axis)
        same = loss == "rel_l2" and getattr(run.task, "name", "") == "steady"
        plot_learning_curve(
            history, run_dir / "learning_curve.png", objective=loss, title=curve_title, same_quantity=same
        )
    written.append("learning_curve.png")
    link_plots(run_dir, written)
    return written


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def _store_name(cfg: dict[str, Any]) -> str:
    """The file name of the run's training store (``data.path``, or the file its generator writes), or ""."""
    from .data.assembly import data_options, stored_samples
    from .data.generators import get_generator
    from .errors import NeurodynError

    data = cfg.get("data", {}) or {}
    if data.get("path"):
        return Path(str(data["path"])).name
    if not data.get("generator"):
        return ""
    try:
        gen = get_generator(data["generator"])
        return gen.default_path(
            gen.make_config(**data_options(data)), stored_samples(data), int(data.get("seed", 0))
        ).name
    except NeurodynError:  # a config of an older generator version: its name says enough
        return f"{data['generator']} data"


def run_title(run, data: str = "") -> str:
    """``<model> (<preset>), run <folder>: <data>``: the title of every figure of a run (``data``: what the figure
    shows, e.g. ``test split of darcy_r16.h5, first 4 samples``)."""
    model = run.cfg.get("model", {}).get("name", "model")
    preset = run.cfg.get("preset")
    head = f"{model}" + (f" ({preset})" if preset else "") + f", run {run.run_dir.name}"
    return f"{head}: {data}" if data else head


def field_labels(store) -> dict[str, str]:
    """``field name -> label`` of a store's fields for the plots: ``name (what it is)`` where the generator declares
    it (``Generator.field_labels``: ``a (permeability)``), a converted file's source array (``u (press in
    mini_car.pt)``), else the bare name."""
    from .data.generators import available_generators, get_generator

    names = [k.split("/", 1)[1] for k in getattr(store, "shapes", {}) if k.startswith("fields/")]
    generator = str(getattr(store, "attrs", {}).get("generator", ""))
    known: dict[str, str] = {}
    if generator in available_generators():
        known = {k: f"{k} ({v})" for k, v in get_generator(generator).field_labels.items()}
    elif generator.startswith("import:"):
        config = getattr(store, "config", {}) or {}
        keys = (config.get("info") or {}).get("source_keys") or {}
        source = (config.get("source") or [{}])[0].get("name", "the source file")
        known = {k: f"{k} ({v} in {source})" for k, v in keys.items() if isinstance(v, str) and v != k}
    return {name: known.get(name, name) for name in names}


def _dataset_labels(dataset) -> tuple[str, str, str]:
    """(input label, target label, file name) of a test set (a steady or windowed dataset over a store)."""
    store = getattr(dataset, "store", None)
    labels = field_labels(store) if store is not None else {}

    def names(attr: str) -> tuple:
        value = getattr(dataset, attr, None)  # a steady set's field names, else the windowed set's one field
        return tuple(value) if isinstance(value, (tuple, list)) else (getattr(dataset, "field", None),)

    inputs, targets = names("inputs"), names("targets")
    name = lambda fields: ", ".join(labels.get(f, f) for f in fields if isinstance(f, str)) or "field"  # noqa: E731
    source, target = name(inputs[:1]), name(targets[:1])
    path = getattr(store, "path", None)
    return source, target, Path(path).name if path is not None else ""


def _plot_set(run, dataset, out: Path, label: str, run_dir: Path, first: bool, device) -> list[str]:
    """The prediction plot(s) of one test set; returns the file names written."""
    from .train.rollout import to_frames
    from .train.runs import batches, read_test_metrics
    from .train.tasks import AutoregressiveTask

    task, model = run.task, run.model
    source, target, file = _dataset_labels(dataset)
    data = f"{label}" + (f" of {file}" if file and label == "test split" else f" ({file})" if file else "")
    if getattr(task, "name", "") == "sequence":
        classes = getattr(dataset, "classes", None)  # the test split's (the training store's) class names
        plot_sequence_predictions(
            task,
            model,
            batches(dataset, run.eval_batch_size, device),
            out,
            title=run_title(run, data),
            class_names=classes,
        )
        return [out.name]
    n_plot = run.train_config.logging.n_plot
    batch = next(batches(dataset, n_plot, device, count=n_plot))
    with torch.no_grad():
        pred = task.predict(model, batch)
    title = run_title(run, f"{data}, first {batch['y'].shape[0]} sample(s)")
    if not isinstance(task, AutoregressiveTask):
        if getattr(task, "grid", True) is False and batch.get("pos") is not None:
            plot_point_cloud_predictions(
                batch["pos"], batch["y"], pred, out, mask=batch.get("mask"), title=title, target=target
            )
        else:
            plot_predictions(batch["x"], batch["y"], pred, out, title=title, source=source, target=target)
        return [out.name]
    frames = [to_frames(t, task.channels, task.fac) for t in (batch["y"], pred)]
    history_frames = to_frames(batch["x"], task.channels, task.fac)
    plot_predictions(
        history_frames[:, -1],
        frames[0][:, -1],
        frames[1][:, -1],
        out,
        title=title + ", last step",
        source=f"{source}, last given frame",
        target=f"{target} at the last step",
    )
    written = [out.name]
    if first:
        plot_rollout_animation(
            frames[0][0],
            frames[1][0],
            run_dir / "rollout.gif",
            title=run_title(run, f"{data}, sample 0"),
            target=target,
        )
        written.append("rollout.gif")
        name = "test" if label == "test split" else label.split("'")[1]
        per_step = read_test_metrics(run_dir).get(name, {}).get("last", {}).get("rel_l2_per_step")
        if per_step:
            plot_rollout_error(per_step, run_dir / "rollout_error.png", title=run_title(run, data))
            written.append("rollout_error.png")
    return written


PLOTS_HEADER = "## Plots"


IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def linked_images(run_dir: str | Path) -> list[str]:
    """The image file names ``run_dir/summary.md`` links (``![...](name)``), in order; ``[]`` without a summary."""
    summary = Path(run_dir) / "summary.md"
    return IMAGE_LINK.findall(summary.read_text()) if summary.is_file() else []


def link_plots(run_dir: str | Path, names: Sequence[str]) -> None:
    """Replace the image links of ``run_dir/summary.md`` with links to the files ``names`` that exist there (a
    summary never links an image that was not written)."""
    summary = Path(run_dir) / "summary.md"
    if not summary.exists():
        return
    lines = summary.read_text().splitlines()
    if PLOTS_HEADER in lines:
        lines = lines[: lines.index(PLOTS_HEADER)]
    lines = [ln for ln in lines if not ln.startswith("![")]
    while lines and not lines[-1].strip():
        lines.pop()
    links = [f"![{Path(n).stem.replace('_', ' ')}]({n})" for n in names if (Path(run_dir) / n).is_file()]
    if links:
        lines += ["", PLOTS_HEADER, ""] + [x for link in links for x in (link, "")]
    summary.write_text("\n".join(lines).rstrip("\n") + "\n")


def plot_sequence_predictions(
    task, model: torch.nn.Module, batches, path: str | Path, title: str = "", class_names: Sequence[str] | None = None
) -> Path:
    """Confusion matrix (classification: row-normalised, counts written in the cells, ``class_names`` on the axes,
    else class indices) or prediction against target (regression, one panel per target) of a sequence task."""
    preds, ys = [], []
    model.eval()
    with torch.no_grad():
        for batch in batches:
            p, y = task.predict(model, batch), batch["y"]
            m = task._step_mask(batch)
            if m is not None:
                p, y = p[m], y[m]
            preds.append(p.cpu())
            ys.append(y.cpu())
    if not preds:
        raise ValueError(f"no samples to plot into {path}: the test set is empty")
    p, y = torch.cat(preds).float(), torch.cat(ys)
    if task.kind == "classification":
        k = p.shape[-1]
        names = list(class_names) if class_names is not None and len(class_names) == k else [str(i) for i in range(k)]
        cm = np.zeros((k, k))
        np.add.at(cm, (y.numpy(), p.argmax(-1).numpy()), 1)
        size = min(12.0, 3.5 + 0.45 * k)
        fig, ax = plt.subplots(figsize=(size + 1, size))
        im = ax.imshow(cm / cm.sum(1, keepdims=True).clip(min=1), cmap="Blues", vmin=0, vmax=1)
        if k <= 20:
            for i in range(k):
                for j in range(k):
                    if cm[i, j]:
                        ax.text(
                            j,
                            i,
                            f"{int(cm[i, j])}",
                            ha="center",
                            va="center",
                            fontsize=7,
                            color="white" if cm[i, j] / max(cm[i].sum(), 1) > 0.5 else "black",
                        )
        ax.set_xticks(range(k), names, rotation=45 if max(map(len, names)) > 3 else 0, ha="right", fontsize=8)
        ax.set_yticks(range(k), names, fontsize=8)
        ax.set_xlabel("predicted class"), ax.set_ylabel("true class")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="fraction of the true class")
        ax.set_title(f"{len(y)} samples, accuracy {(p.argmax(-1) == y).float().mean():.3f}", fontsize=9)
    else:
        p, y = p.reshape(len(p), -1), y.float().reshape(len(y), -1)
        n_t = min(p.shape[1], 4)
        fig, axes = plt.subplots(1, n_t, figsize=(4.2 * n_t, 4), squeeze=False)
        for j, ax in enumerate(axes[0]):
            ax.scatter(y[:, j].numpy(), p[:, j].numpy(), s=6, alpha=0.6)
            lo, hi = float(min(y[:, j].min(), p[:, j].min())), float(max(y[:, j].max(), p[:, j].max()))
            ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="prediction = target")
            ax.set_xlabel(f"true target {j}" if n_t > 1 else "true target")
            ax.set_ylabel("predicted target"), ax.legend(fontsize=7)
        axes[0, 0].set_title(f"{len(y)} values", fontsize=9)
    _set_title(fig, title)
    return save_figure(fig, path)


def plot_sequence_learning_curve(
    history: Sequence[dict[str, Any]], key: str, path: str | Path, objective: str = "loss", title: str = ""
) -> Path:
    """The training objective (``objective``) and the monitored validation metric ``key`` per epoch, in two panels
    (:func:`plot_learning_curve`: different quantities; accuracy is not log-scaled)."""
    return plot_learning_curve(
        history,
        path,
        objective=objective,
        metric=key,
        title=title,
        log=key not in ("accuracy", "balanced_accuracy", "r2"),
    )


def plot_seed_mean_curves(
    groups: dict[str, Sequence[Sequence[float]]], path: str | Path, ylabel: str, title: str = "", log: bool = False
) -> dict[str, np.ndarray]:
    """Per-epoch curves of several runs per label: the mean over each label's runs (cut to the shortest) on one
    axis, labelled with the run count. Returns ``label -> mean curve`` (labels without runs are skipped)."""
    means = {}
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for label, curves in groups.items():
        curves = [c for c in curves if len(c)]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        means[label] = np.mean([list(c)[:n] for c in curves], axis=0)
        seeds = f"{len(curves)} seed{'s' if len(curves) > 1 else ''}"
        ax.plot(np.arange(1, n + 1), means[label], label=f"{label} ({seeds})")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("epoch"), ax.set_ylabel(ylabel), ax.grid(True, which="both", alpha=0.3), ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)
    save_figure(fig, path, dpi=120)
    return means


def plot_error_vs_time(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """The validation metric against training seconds, one line per run (``curve_seconds`` / ``curve_rel_l2`` of
    :mod:`neurodyn.compare` records: the run's monitored metric, named by ``metric``), one colour per preset, and
    the budget (``budget``: ``"<B>s"`` a dashed line at B seconds, ``"<N>ep"`` named in the title). The axis names
    the metric; error metrics are log-scaled, accuracy is not."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colours: dict[str, Any] = {}
    for r in records:
        key = f"{r['model']} ({r['preset']})"
        first = key not in colours
        colours.setdefault(key, f"C{len(colours) % 10}")
        ax.plot(
            r["curve_seconds"], r["curve_rel_l2"], color=colours[key], marker=".", lw=1.2, label=key if first else None
        )
    metric = records[0].get("metric", "rel_l2") if records else "rel_l2"
    name = {"rel_l2": "relative L2", "rmse": "RMSE", "accuracy": "accuracy"}.get(metric, metric)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel(f"validation {name}" + (" (higher is better)" if metric == "accuracy" else " (lower is better)"))
    if metric != "accuracy" and any(v > 0 for r in records for v in r["curve_rel_l2"]):
        ax.set_yscale("log")
    budgets = sorted({str(r["budget"]) for r in records if r.get("budget")})
    seconds = [float(b[:-1]) for b in budgets if b.endswith("s") and b[:-1].replace(".", "", 1).isdigit()]
    for k, b in enumerate(seconds):
        ax.axvline(b, color="0.3", ls="--", lw=1, label=f"budget {b:g} s" if k == 0 or len(seconds) > 1 else None)
    epochs = [b[:-2] for b in budgets if b.endswith("ep")]
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    title = f"validation {name} against wall-clock training time"
    if epochs:
        title += f"\n(budget: {', '.join(epochs)} epoch{'s' if epochs != ['1'] else ''} per model)"
    ax.set_title(title, fontsize=10)
    return save_figure(fig, path)
