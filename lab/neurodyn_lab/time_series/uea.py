"""Every sequence model and the archive's simple baselines on real UEA/UCR archive files, regular and made irregular.

    # the files that ship inside the sktime wheel (nothing downloads at run time; fetch the wheel once):
    #   pip download sktime==1.2.0 --no-deps -d /tmp/wheels && unzip -q /tmp/wheels/sktime-*.whl \
    #       'sktime/datasets/data/*' -d /tmp/sktime && UEA=/tmp/sktime/sktime/datasets/data
    python -m neurodyn_lab run time_series/uea --uea-dir $UEA --seeds 0 1 2 --threads 1
    python -m neurodyn_lab run time_series/uea --report          # the tables of what is recorded

Every dataset's ``<NAME>_TRAIN.ts`` and ``<NAME>_TEST.ts`` are converted with ``neurodyn convert`` into
sequence stores (``--stores``), and every comparison is ``neurodyn.compare.compare`` (the same as
``neurodyn compare``) of the models in ``MODELS`` on them: the training file trains (``data.n_val`` = 20 % of it
validates: ``best.pt`` and NAC's paper/tuned choice are made on it), the test file is scored once at the end.
Two budgets: equal epochs (``--epochs``: the same cap of 400, the tuned presets'
recipe, each run stopping early on its own validation split as its preset says) and equal wall-clock (``--budget``
of training per model, epochs estimated from timed steps before training). Two variants: ``regular`` (the files as
they are) and ``irregular`` (``data.drop_steps=--drop`` of every sequence's steps dropped at random, the kept ones keep
their timestamps; the same draw for every model). Records: ``<out>/<dataset>-<variant>-<budget>/results.json``
(``--out``: ``lab/records/time_series/uea``; the runs train in ``lab/runs/time_series/uea/...``, untracked, and the
converted stores are named ``<stores>/NAME_TRAIN.h5`` in the records); a recorded run is not trained again, so the
driver resumes. The regular equal-epochs comparisons are also run on
``--draws`` other validation splits (``data.seed``; seed 0 each): 7-13 validation cases cannot rank models, so the
report adds floors chosen on the five splits together (repeated hold-out; the test numbers stay the comparison's).

The models: NAC (paper and tuned profiles), GRU, LSTM, CfC, LTC, MHA, ODE-RNN, and the fitted baselines (majority
class or training mean, 1-NN Euclidean, MiniRocket; one pass per seed, whatever the budget). The classification
files are BasicMotions, GunPoint, ItalyPowerDemand, ArrowHead and JapaneseVowels; Covid3Month is a regression file
(RMSE, with R^2 beside it). The report puts beside ours the published MiniRocket accuracies and the 1-nearest-
neighbour accuracy with Euclidean distance computed here on the same converted stores (equal-length sets) and, for
the univariate sets, the published 1-NN Euclidean / DTW accuracies of the UCR archive 2018's table. Our 1-NN ED
matching the published one checks that the conversion read the files exactly. The published 1-NN and MiniRocket
accuracies come from models fitted on every training case, so both are also fitted here on the whole training file
(``<dataset>-regular-wholetrain``: no validation split; nothing is chosen from them), and the floors compare our
MiniRocket with its published accuracy on that protocol (and, on the unequal-length JapaneseVowels, where the 1-NN
of the stores is not defined, take the harness's 1-NN fitted so as the reference).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from neurodyn_lab.comparisons import compare_recorded
from neurodyn_lab.paths import RUNS, records
from neurodyn_lab.records import write_json, write_text

OUT = records("time_series/uea")
STORES = RUNS / "time_series" / "uea_stores"  # the converted archive files (untracked; "<stores>" in the records)

DATASETS = ("BasicMotions", "GunPoint", "ItalyPowerDemand", "ArrowHead", "JapaneseVowels")
#: regression files of the archive (Monash / UEA regression archive): scored by RMSE, with R^2 beside it
REGRESSION = ("Covid3Month",)
#: the normalised convolutional front end (29 Nov): three 64-wide Conv1d of kernel 7, each batch-normalised over the
#: valid steps before its ReLU, and the mean over steps pooled (the FCN baseline's shape, Wang et al. 2017, narrower);
#: chosen among FRONT_END_CANDIDATES on validation accuracy only (--front-ends; :func:`front_end_table`)
CONV_FRONT = "model.conv_channels=[64,64,64];model.conv_kernel=7;model.conv_norm=batch;model.pool=mean"
_CONVS = "model.conv_channels=[64,64,64];model.conv_kernel=7;model.pool=mean"
#: the front ends compared (the same convs: batch norm, none, a per-step layer norm) behind the cores of
#: FRONT_END_CORES, on three validation splits (data.seed 0-2, seed 0) of FRONT_END_FILES
FRONT_END_CANDIDATES = {"batchnorm": CONV_FRONT, "plain": _CONVS, "layernorm": f"{_CONVS};model.conv_norm=layer"}
FRONT_END_CORES = {"gru": "gru/sequence", "nac": "nac/sequence;model.compat=tuned"}
FRONT_END_FILES = ("GunPoint", "ArrowHead", "ItalyPowerDemand")
#: the front end of every */sequence cpu preset until 29 Nov (nac and gru: CONV_FRONT since), which the entries
#: compared before pin. The same configs, but their resolved form now names conv_norm (and GRU's pool), so a resumed
#: run trains these three entries again under new run names; the recorded ones stay the evidence
ONE_CONV = "model.conv_channels=[32];model.conv_kernel=5;model.conv_norm=none"
#: label=preset;overrides (neurodyn compare's entries): NAC as the paper prints it, with our tuned choices, and with
#: the tuned choices behind the normalised conv front end; GRU behind it too (listed after the presets it extends, so
#: that a tie on validation keeps the earlier one)
MODELS = (
    f"nac-paper=nac/sequence;model.compat=paper;train.lr=0.001;{ONE_CONV};model.pool=mean",
    f"nac-tuned=nac/sequence;model.compat=tuned;{ONE_CONV};model.pool=last",
    f"gru/sequence;{ONE_CONV};model.pool=last",
    "lstm/sequence",
    "cfc/sequence",
    "ltc/sequence",
    "mha/sequence",
    "odernn/sequence",
    f"nac-conv=nac/sequence;model.compat=tuned;{CONV_FRONT}",
    f"gru-conv=gru/sequence;{CONV_FRONT}",
    "majority/sequence",
    "knn/sequence",
    "minirocket/sequence",
)
#: the fitted baselines (one pass, no epochs): trained once per seed, whatever the budget
BASELINES = ("majority/sequence", "knn/sequence", "minirocket/sequence")
#: the fitted baselines fitted again on the whole training file, no validation split: the published protocol of the
#: 1-NN and MiniRocket accuracies (theirs train on every training case; the comparisons hold 20 % out to validate)
WHOLE_TRAIN = ("knn/sequence", "minirocket/sequence")
#: published 1-NN test accuracies (1 - error rate) of the UCR archive 2018's table (ED; DTW with a full window) for
#: the univariate sets; none given for the multivariate ones (their published baselines differ in normalisation)
PUBLISHED = {
    "GunPoint": {"1-NN ED": 0.913, "1-NN DTW": 0.907},
    "ItalyPowerDemand": {"1-NN ED": 0.955, "1-NN DTW": 0.950},
    "ArrowHead": {"1-NN ED": 0.800, "1-NN DTW": 0.703},
}
#: MiniRocket's published test accuracy (Dempster, Schmidt and Webb 2021, KDD; the mean over the default split and
#: 29 resamples, their results_ucr109_mean table) for the univariate sets; the paper has no multivariate results
PUBLISHED_MINIROCKET = {"GunPoint": 0.992, "ItalyPowerDemand": 0.960, "ArrowHead": 0.881}
#: the same paper's accuracy on the archive's default train/test split alone (resample 0 of its
#: accuracy_ucr109_resamples table): the protocol of our whole-train fit exactly
PUBLISHED_MINIROCKET_DEFAULT_SPLIT = {"GunPoint": 0.993, "ItalyPowerDemand": 0.969, "ArrowHead": 0.863}
#: published deep baselines (Ismail Fawaz et al. 2019, "Deep learning for time series classification: a review",
#: DMKD; the mean of 10 runs; JapaneseVowels from their multivariate (Baydogan) table): ResNet / FCN
PUBLISHED_DEEP = {
    "GunPoint": (0.991, 1.000),
    "ItalyPowerDemand": (0.963, 0.961),
    "ArrowHead": (0.845, 0.843),
    "JapaneseVowels": (0.992, 0.993),
}


def default_uea_dir() -> Path | None:
    """The archive folder of an installed sktime (found without importing it), else None."""
    import importlib.util

    spec = importlib.util.find_spec("sktime")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def convert(uea_dir: Path, name: str, stores: Path, splits: tuple[str, ...] = ("TRAIN", "TEST")) -> list[Path]:
    """``neurodyn convert`` of the dataset's files of ``splits`` (skipped when the stores exist); their stores."""
    out = []
    for split in splits:
        src, dst = uea_dir / name / f"{name}_{split}.ts", stores / f"{name}_{split}.h5"
        if not src.exists():
            raise SystemExit(f"{src} does not exist: give --uea-dir, the folder holding {name}/{name}_{split}.ts")
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, "-m", "neurodyn", "convert", str(src), "--out", str(dst), "--no-progress"], check=True
            )
        out.append(dst)
    return out


def archive_folder(dirs: list[Path], name: str, split: str = "TRAIN", flag: str = "--archive") -> Path:
    """The first of the archive folders ``dirs`` holding ``<name>/<name>_<split>.ts``; one sentence naming the file and
    the command's ``flag`` otherwise."""
    for d in dirs:
        if (Path(d) / name / f"{name}_{split}.ts").exists():
            return Path(d)
    raise SystemExit(
        f"{name}/{name}_{split}.ts is in none of {[str(d) for d in dirs]}: give {flag} DIR ... "
        "(aeon's and sktime's datasets/data folders)"
    )


def read_cases(store: Path) -> dict[str, Any]:
    """The cases of a converted sequence store: ``x (N, T, C)``, ``t (N, T)``, ``mask (N, T)``, ``y`` and the
    class names (None for regression)."""
    import h5py

    with h5py.File(store, "r") as f:
        arrays = {k: f[f"fields/{k}"][()] for k in ("x", "t", "mask", "y")}
        info = json.loads(f.attrs["config"])["info"]
    arrays["classes"] = info.get("classes") if info.get("task") == "classification" else None
    return arrays


def write_cases(cases: dict[str, Any], ids: np.ndarray, out: Path) -> Path:
    """A sequence store of the cases ``ids`` (in that order) of :func:`read_cases`' ``cases``, with the same class
    list, through ``neurodyn convert``'s ``.npz`` reader; written atomically (a store is never half there)."""
    from neurodyn.data.formats.convert import convert_to_store

    ids = np.asarray(ids, dtype=int)
    out.parent.mkdir(parents=True, exist_ok=True)
    arrays = {k: cases[k][ids] for k in ("x", "t", "mask", "y")}
    x = arrays["x"].astype(np.float64)
    x[arrays["mask"] == 0] = np.nan  # padding is no step
    arrays["x"] = x
    if cases["classes"] is not None:
        arrays["classes"] = np.asarray(cases["classes"])
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src, part = Path(tmp) / f"{out.stem}.npz", Path(tmp) / out.name
        np.savez(src, **arrays)
        convert_to_store(src, part)
        part.replace(out)
    return out


def _read_store(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import h5py

    with h5py.File(path, "r") as f:
        return f["fields/x"][()], f["fields/mask"][()], f["fields/y"][()]


def one_nn_euclidean(train: Path, test: Path) -> float | None:
    """Test accuracy of the 1-nearest-neighbour classifier with Euclidean distance on the whole series (the
    archives' baseline); None for unequal-length sets (the distance is not defined there)."""
    x, m, y = _read_store(train)
    xt, mt, yt = _read_store(test)
    if not (m.all() and mt.all()) or x.shape[1:] != xt.shape[1:]:
        return None
    a, b = x.reshape(len(x), -1).astype(np.float64), xt.reshape(len(xt), -1).astype(np.float64)
    d = (b * b).sum(1)[:, None] - 2 * b @ a.T + (a * a).sum(1)[None]
    return float((y[d.argmin(1)] == yt).mean())


@functools.cache
def one_nn_of_stores(stores: Path, dataset: str) -> float | None:
    """:func:`one_nn_euclidean` of ``<stores>/<dataset>_TRAIN.h5`` against its ``_TEST.h5`` (None without the
    stores); computed once per dataset, however many tables cite it."""
    train = stores / f"{dataset}_TRAIN.h5"
    return one_nn_euclidean(train, stores / f"{dataset}_TEST.h5") if train.exists() else None


ONE_NN_RECORD = "one_nn_ed.json"


def one_nn_reference(args, dataset: str) -> float | None:
    """The 1-NN Euclidean test accuracy on the raw series of the converted stores: as :func:`whole_train` recorded it
    (``<dataset>-regular-wholetrain/one_nn_ed.json``, so the report is the same without the stores), else computed
    from ``--stores``; None for unequal lengths or without either."""
    record = store(args, dataset, "regular", WHOLE) / ONE_NN_RECORD
    if record.exists():
        return json.loads(record.read_text())["accuracy"]
    return one_nn_of_stores(Path(args.stores), dataset)


def data_overrides(train: Path, test: Path, n_val_cases: int) -> list[str]:
    """The overrides every comparison here gives: the train store, the test store, the validation cases."""
    return [f"data.path={train}", f"data.test_path={test}", f"data.n_val={n_val_cases}"]


def n_val(train: Path) -> int:
    """20 % of the training file (at least 4) validates."""
    x, _, _ = _read_store(train)
    return max(4, round(0.2 * len(x)))


def groups(args) -> list[tuple[str, str, str]]:
    budgets = ([f"{args.epochs}ep"] if args.epochs else []) + ([args.budget] if args.budget else [])
    return [(d, v, b) for b in budgets for v in args.variants for d in args.datasets]


def compare_store(args, entries: list[str], folder: Path, **kwargs) -> list[dict]:
    """:func:`neurodyn_lab.comparisons.compare_recorded` of ``entries`` into the records folder ``folder`` (cpu
    scale), the converted stores named ``<stores>`` in its records."""
    return compare_recorded(entries, folder, "cpu", placeholders={args.stores: "<stores>"}, **kwargs)


def run_all(args) -> None:
    from neurodyn.compare import parse_budget

    uea = _uea_dir(args)
    whole_train(args, uea)
    validation_draws(args, uea)
    refit_chosen(args, uea)
    for dataset, variant, budget in groups(args):
        train, test = convert(uea, dataset, Path(args.stores))
        overrides = data_overrides(train, test, n_val(train))
        if variant == "irregular":
            overrides.append(f"data.drop_steps={args.drop}")
        out = store(args, dataset, variant, budget)
        print(f"== {dataset} {variant} {budget}", flush=True)
        kwargs = {"epochs": int(budget[:-2])} if budget.endswith("ep") else {"budget_seconds": parse_budget(budget)}
        compare_store(args, list(MODELS), out, seeds=args.seeds, overrides=overrides, **kwargs)


def _uea_dir(args) -> Path:
    """The archive folder (``--uea-dir`` or sktime's); sets the torch threads (``--threads``) for what trains."""
    import torch

    torch.set_num_threads(args.threads)
    uea = Path(args.uea_dir) if args.uea_dir else default_uea_dir()
    if uea is None:
        raise SystemExit("no UEA folder: install sktime, or give --uea-dir (see the module docstring)")
    return uea


def whole_train(args, uea: Path) -> None:
    """``WHOLE_TRAIN`` fitted on every case of each regular classification file's training file (``data.n_val=0``),
    scored on its test file: the protocol of the published 1-NN and MiniRocket accuracies, which the floors compare
    with (nothing is chosen from these runs). Records: ``<out>/<dataset>-regular-wholetrain/results.json``."""
    if "regular" not in args.variants:
        return
    for dataset in (d for d in args.datasets if d not in REGRESSION):
        train, test = convert(uea, dataset, Path(args.stores))
        print(f"== {dataset} regular, fitted baselines on the whole train file", flush=True)
        folder = store(args, dataset, "regular", WHOLE)
        compare_store(
            args, list(WHOLE_TRAIN), folder, seeds=args.seeds, epochs=1, overrides=data_overrides(train, test, 0)
        )
        write_json(
            folder / ONE_NN_RECORD,
            {
                "accuracy": one_nn_euclidean(train, test),
                "train": train.name,
                "test": test.name,
                "what": "1-NN, Euclidean distance on the raw series of the whole train file (None: unequal lengths)",
            },
        )


def front_end_choice(args, uea: Path) -> None:
    """Every front end of ``FRONT_END_CANDIDATES`` behind every core of ``FRONT_END_CORES`` on three validation
    splits of each of ``FRONT_END_FILES`` (``data.seed`` 0-2, seed 0, at most ``--epochs`` with the presets' early
    stopping). Only the validation scores are read (:func:`front_end_table`). Records:
    ``<out>/frontend_<dataset>-draw<k>/results.json``."""
    entries = [
        f"{core}-{front}={preset};{FRONT_END_CANDIDATES[front]}"
        for core, preset in FRONT_END_CORES.items()
        for front in FRONT_END_CANDIDATES
    ]
    for dataset in FRONT_END_FILES:
        train, test = convert(uea, dataset, Path(args.stores))
        for draw in (0, 1, 2):
            print(f"== front ends, {dataset} validation split {draw}", flush=True)
            compare_store(
                args,
                entries,
                _front_end_folder(args, dataset, draw),
                seeds=[0],
                epochs=args.epochs,
                overrides=[*data_overrides(train, test, n_val(train)), f"data.seed={draw}"],
            )


def _prefix(args) -> str:
    """The comparisons' folder-name prefix inside ``--out``: ``--tag`` and an underscore, or nothing."""
    return f"{args.tag}_" if getattr(args, "tag", "") else ""


def _front_end_folder(args, dataset: str, draw: int) -> Path:
    return Path(args.out) / f"{_prefix(args)}frontend_{dataset}-draw{draw}"


def front_end_table(args) -> list[str]:
    """The front-end choice on validation: per core and front end, the mean over the recorded splits of the final
    model's and of the best validation accuracy per file (``n``: runs recorded), and the means over the files of
    both; no test number."""
    records = {
        dataset: [r for k in (0, 1, 2) for r in _read_records(_front_end_folder(args, dataset, k))]
        for dataset in FRONT_END_FILES
    }
    rows, seen, finals = [], False, {front: [] for front in FRONT_END_CANDIDATES}
    for core in FRONT_END_CORES:
        for front in FRONT_END_CANDIDATES:
            cells, scores = [], []
            for dataset in FRONT_END_FILES:
                runs = [r for r in records[dataset] if r["preset"] == f"{core}-{front}" and r.get("curve_rel_l2")]
                seen |= bool(runs)
                score = validation_score(runs, higher=True)
                cells.append(f"{score[0]:.3f} / {score[1]:.3f} ({len(runs)})" if score else "-")
                scores += [score] if score else []
            means = " / ".join(f"{statistics.mean(s[i] for s in scores):.3f}" for i in (0, 1)) if scores else "-"
            rows.append(f"| {core} | {front} | " + " | ".join(cells) + f" | {means} |")
            finals[front] += [s[0] for s in scores]
    if not seen:
        return []
    mean_final = {front: statistics.mean(v) for front, v in finals.items() if v}
    best = max(mean_final, key=mean_final.get)
    chosen = next(front for front, text in FRONT_END_CANDIDATES.items() if text == CONV_FRONT)
    return [
        "### The conv front end, chosen on validation (final model / best validation accuracy, mean over the "
        "recorded splits; seed 0; no test file read)",
        "",
        "| core | front end | " + " | ".join(FRONT_END_FILES) + " | mean over the files |",
        "| --- | --- |" + " ---: |" * (len(FRONT_END_FILES) + 1),
        *rows,
        "",
        "One front end for every core: the mean over both cores and the files of the final model's validation "
        "accuracy: " + ", ".join(f"{front} {v:.3f}" for front, v in mean_final.items()) + f"; highest: {best}. "
        f"Chosen for the comparisons (`nac-conv`, `gru-conv`): {chosen}, `{CONV_FRONT}`.",
        "",
    ]


def _read_records(folder: Path) -> list[dict]:
    path = folder / "results.json"
    return json.loads(path.read_text()) if path.exists() else []


#: the "budget" part of the whole-train records' folder name
WHOLE = "wholetrain"


def validation_draws(args, uea: Path) -> None:
    """The equal-epochs comparison of each regular file again on other validation splits (``data.seed=k`` for k in
    ``--draws``: which 20 % of the train file validates; seed 0 only), so the floors can choose on five splits
    together instead of one of 7-13 cases (:func:`floors_table` with ``draws``). Records:
    ``<out>/<dataset>-regular-<epochs>ep-draw<k>/results.json``; their test scores are not reported."""
    if "regular" not in args.variants or not args.epochs:
        return
    for draw in args.draws:
        for dataset in args.datasets:
            train, test = convert(uea, dataset, Path(args.stores))
            budget = draw_budget(f"{args.epochs}ep", draw)
            print(f"== {dataset} regular {budget}", flush=True)
            compare_store(
                args,
                list(MODELS),
                store(args, dataset, "regular", budget),
                seeds=[0],
                epochs=args.epochs,
                overrides=[*data_overrides(train, test, n_val(train)), f"data.seed={draw}"],
            )


def store(args, dataset: str, variant: str, budget: str) -> Path:
    """The records folder of one comparison, ``<dataset>-<variant>-<budget>`` inside the report's folder ``--out``
    (``time_series/uea``: the presets tuned on validation; ``time_series/uea_25nov``: the 25 Nov runs of the presets
    before), its name prefixed by ``--tag_`` when a tag is given."""
    return Path(args.out) / f"{_prefix(args)}{dataset}-{variant}-{budget}"


def _mean_std(values: list[float], fmt: str = ".3f") -> str:
    """``mean ± std`` over seeds (``fmt``: ``.3f`` for accuracies, ``RMSE_FMT`` for the regression file's RMSE)."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:{fmt}} (1 seed)"
    return f"{statistics.mean(values):{fmt}} ± {statistics.stdev(values):{fmt}}"


#: RMSE in the targets' units (Covid3Month: about 0.045, seeds' spread about 0.001): three decimals would tie models
RMSE_FMT = ".5f"


def _label(entry: str) -> str:
    """The label ``neurodyn compare`` records for an entry (``neurodyn.compare.parse_entry``'s)."""
    from neurodyn.compare import parse_entry

    return parse_entry(entry)[0]


def _comparison_records(args, dataset: str, variant: str, budget: str) -> list[dict]:
    """The records of one comparison (``[]`` until it has any)."""
    return _read_records(store(args, dataset, variant, budget))


def _records(args, cols, budget) -> dict:
    return {(d, v): _comparison_records(args, d, v, budget) for d, v in cols}


def _model_rows(recs, cols, budget, cell) -> list[str]:
    """One row per model: ``cell(records of one column)`` per column, then the median seconds per epoch."""
    lines = []
    for entry in MODELS:
        label = _label(entry)
        cells, speeds = [], []
        for key in cols:
            rs = [r for r in recs[key] if r["preset"] == label]
            fitted = entry in BASELINES
            cells.append(
                cell(rs)
                + (
                    f" [{statistics.mean(r['epochs'] for r in rs):.0f} ep]"
                    if rs and not fitted and not budget.endswith("ep")
                    else ""
                )
            )
            speeds += [r["seconds_per_epoch"] for r in rs if not fitted]
        speed = f"{statistics.median(speeds):.2f}" if speeds else "-"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {speed} |")
    return lines


def _test_values(rs: list[dict], key: str | None = None) -> list[float]:
    """The one test file's main metric per record, or its metric ``key`` (e.g. ``r2``)."""
    if key is None:
        return [v for r in rs for v in r["sets"].values() if v is not None]
    return [m[key] for r in rs for m in r.get("set_metrics", {}).values() if key in m]


def _classification_table(args, budget: str, datasets: list[str]) -> list[str]:
    cols = [(d, v) for d in datasets for v in args.variants]
    recs = _records(args, cols, budget)
    if not any(recs.values()):
        return []
    lines = [
        f"### Test accuracy, {budget} per model (mean ± std over seeds; validation: 20 % of the train file)",
        "",
        "| model | " + " | ".join(f"{d} {v}" for d, v in cols) + " | s/epoch (median) |",
        "| --- |" + " ---: |" * (len(cols) + 1),
    ]
    lines += _model_rows(recs, cols, budget, lambda rs: _mean_std(_test_values(rs)))
    lines.append(
        "| NAC, the profile chosen on validation | " + " | ".join(_nac_choice(recs[key]) for key in cols) + " | - |"
    )
    ours = {d: one_nn_reference(args, d) for d in datasets}
    lines.append(
        "| 1-NN ED, ours (same stores, whole train file) | "
        + " | ".join(f"{ours[d]:.3f}" if ours[d] is not None and v == "regular" else "-" for d, v in cols)
        + " | - |"
    )
    whole = _records(args, cols, WHOLE)
    for label in WHOLE_TRAIN:
        lines.append(
            f"| {_label(label)}, ours on the whole train file (no validation split; the published protocol) "
            "| "
            + " | ".join(_mean_std(_test_values([r for r in whole[key] if r["preset"] == label])) for key in cols)
            + " | - |"
        )
    for ref in ("1-NN ED", "1-NN DTW"):
        lines.append(
            f"| {ref}, published (UCR archive 2018) | "
            + " | ".join(f"{PUBLISHED.get(d, {}).get(ref, '-')}" if v == "regular" else "-" for d, v in cols)
            + " | - |"
        )
    for what, table in (
        ("mean of 30 resamples", PUBLISHED_MINIROCKET),
        ("the default split", PUBLISHED_MINIROCKET_DEFAULT_SPLIT),
    ):
        lines.append(
            f"| MiniRocket, published, {what} (Dempster et al. 2021) | "
            + " | ".join(f"{table.get(d, '-')}" if v == "regular" else "-" for d, v in cols)
            + " | - |"
        )
    for i, name in enumerate(("ResNet", "FCN")):
        lines.append(
            f"| {name}, published (Ismail Fawaz et al. 2019) | "
            + " | ".join(
                f"{PUBLISHED_DEEP[d][i]:.3f}" if d in PUBLISHED_DEEP and v == "regular" else "-" for d, v in cols
            )
            + " | - |"
        )
    return lines + [""]


def _nac_choice(records: list[dict]) -> str:
    """Test accuracy (mean ± std over seeds) of the NAC profile chosen on validation (:func:`chosen_on_validation`)."""
    label = chosen_on_validation(records, NAC_PROFILES, higher=True)
    if label is None:
        return "-"
    return f"{_mean_std(_test_values([r for r in records if r['preset'] == label]))} ({label.removeprefix('nac-')})"


def _regression_table(args, budget: str, datasets: list[str]) -> list[str]:
    cols = [(d, v) for d in datasets for v in args.variants]
    recs = _records(args, cols, budget)
    if not any(recs.values()):
        return []
    lines = [
        f"### Regression: test RMSE / R^2, {budget} per model (mean over seeds; `majority` predicts the training mean)",
        "",
        "| model | " + " | ".join(f"{d} {v}" for d, v in cols) + " | s/epoch (median) |",
        "| --- |" + " ---: |" * (len(cols) + 1),
    ]

    def cell(rs):
        rmse, r2 = _test_values(rs), _test_values(rs, "r2")
        if not rmse:
            return "-"
        return _mean_std(rmse, RMSE_FMT) + (f" / R^2 {statistics.mean(r2):.3f}" if r2 else "")

    return lines + _model_rows(recs, cols, budget, cell) + [""]


def validation_score(rs: list[dict], higher: bool) -> tuple[float, float] | None:
    """The mean over seeds of each run's last validation metric, that of the final model (the model every
    comparison scores on its test file: early stopping ends on an evaluation), and of its best one (accuracy: max;
    RMSE: min; the tie-break); None without any. The best of a curve of 20-80 evaluations on a few cases is the
    luckiest of them, and not the model tested: ranking on it (this driver before 29 Nov, evening) favoured the
    noisiest runs."""
    curves = [r["curve_rel_l2"] for r in rs if r.get("curve_rel_l2")]
    if not curves:
        return None
    return statistics.mean(c[-1] for c in curves), statistics.mean((max if higher else min)(c) for c in curves)


def chosen_on_validation(records: list[dict], labels: list[str], higher: bool) -> str | None:
    """Of ``labels``, the one with the best :func:`validation_score` (the final model's validation metric, then the
    best one; then the first listed); None if none has runs. The test file never takes part."""
    return chosen_on_draws([records], labels, higher)


def chosen_on_draws(draws: list[list[dict]], labels: list[str], higher: bool) -> str | None:
    """:func:`chosen_on_validation` over several validation splits: ``draws`` holds one list of records per split
    (``data.seed`` draws which training cases validate); each label's :func:`validation_score` is averaged over the
    splits, and only labels with runs in every split take part. More validation cases than one small split holds,
    the training file's cases each validating in some draws (repeated hold-out)."""
    sign = 1 if higher else -1
    scored = []
    for i, label in enumerate(labels):
        scores = [validation_score([r for r in recs if r["preset"] == label], higher) for recs in draws]
        if scores and None not in scores:
            scored.append(
                (sign * statistics.mean(s[0] for s in scores), sign * statistics.mean(s[1] for s in scores), -i, label)
            )
    return max(scored)[3] if scored else None


NAC_PROFILES = ["nac-paper", "nac-tuned", "nac-conv"]


def draw_budget(budget: str, draw: int) -> str:
    """The "budget" part of the folder of validation draw ``draw`` (``data.seed=draw``) of a comparison."""
    return f"{budget}-draw{draw}"


def choices(
    args, dataset: str, budget: str, draws: list[int] | None = None
) -> tuple[list[dict], list[list[dict]], dict[str, str | None]] | None:
    """The regular comparison of ``dataset`` at ``budget`` (its records), its validation splits (the comparison's
    and those of ``draws``) and the labels chosen on them together (:func:`chosen_on_draws`): the best model of the
    harness, the best neural one and the better NAC profile (a regression file: the best model only). None while a
    draw misses a model of the comparison (not run, or running) or nothing is recorded."""
    recs = _comparison_records(args, dataset, "regular", budget)
    splits = [recs] + [_comparison_records(args, dataset, "regular", draw_budget(budget, k)) for k in (draws or [])]
    if not recs or any({r["preset"] for r in recs} - {r["preset"] for r in draw} for draw in splits[1:]):
        return None
    labels = [_label(e) for e in MODELS]
    if dataset in REGRESSION:
        return recs, splits, {"best": chosen_on_draws(splits, labels, higher=False)}
    neural = [_label(e) for e in MODELS if e not in BASELINES]
    return (
        recs,
        splits,
        {
            "best": chosen_on_draws(splits, labels, True),
            "neural": chosen_on_draws(splits, neural, True),
            "nac": chosen_on_draws(splits, NAC_PROFILES, True),
        },
    )


def best_epoch(record: dict, higher: bool) -> int:
    """The epoch of a run's best validation score (the first of equal ones, as ``best.pt`` keeps it). The validation
    split is evaluated every ``epochs / len(curve)`` epochs, the last time at the run's last epoch (early stopping
    stops on an evaluation; the equal-epochs cap is a multiple of the interval)."""
    curve = record["curve_rel_l2"]
    best = (max if higher else min)(curve)
    return round((curve.index(best) + 1) * record["epochs"] / len(curve))


#: how many epochs a refit trains (:func:`refit_epochs`): ``best``, the epoch of the best validation score (where
#: ``best.pt`` was saved); ``trained``, the epochs the compared runs trained (early stopping's end: the final model,
#: which the comparisons score). ``best`` was run first; ``trained`` was added after its test scores were seen
REFIT_RULES = ("best", "trained")


def refit_epochs(splits: list[list[dict]], label: str, higher: bool, rule: str = "best") -> int:
    """The epochs a refit of ``label`` trains: the mean over its runs in every validation split of
    :func:`best_epoch` (``rule="best"``) or of the epochs they trained (``"trained"``); at least 1."""
    runs = [r for recs in splits for r in recs if r["preset"] == label and r.get("curve_rel_l2")]
    each = (best_epoch(r, higher) if rule == "best" else r["epochs"] for r in runs)
    return max(1, round(statistics.mean(each)))


def refit_chosen(args, uea: Path) -> None:
    """Each regular file's neural presets chosen on the validation splits (:func:`choices` with ``--draws``) trained
    again on every case of the training file (``data.n_val=0``, no early stopping) for the epochs at which their
    validation peaked and for the epochs the compared runs trained (:func:`refit_epochs`, ``REFIT_RULES``), seeds
    ``--seeds``, and scored on the test file once: the protocol of
    the published accuracies (every training case trains), with everything chosen before on validation. The fitted
    baselines' refits are :func:`whole_train`'s; a regression file adds the training mean of its whole train file.
    Records: ``<out>/<dataset>-regular-refit/results.json`` (budget ``<E>ep``); nothing is chosen from them."""
    from neurodyn.compare import comparison_table

    if "regular" not in args.variants or not args.epochs:
        return
    entries = {_label(e): e for e in MODELS}
    for dataset in args.datasets:
        got = choices(args, dataset, f"{args.epochs}ep", args.draws)
        if got is None:
            continue
        _, splits, chosen = got
        train, test = convert(uea, dataset, Path(args.stores))
        folder, whole = store(args, dataset, "regular", REFIT), data_overrides(train, test, 0)
        for label in dict.fromkeys(label for label in chosen.values() if label and entries[label] not in BASELINES):
            for rule in REFIT_RULES:  # the same number of epochs twice is one set of runs (compare resumes)
                epochs = refit_epochs(splits, label, dataset not in REGRESSION, rule)
                print(
                    f"== {dataset} regular, {label} refitted on the whole train file for {epochs} epochs ({rule})",
                    flush=True,
                )
                compare_store(
                    args,
                    [entries[label]],
                    folder,
                    seeds=args.seeds,
                    epochs=epochs,
                    overrides=[*whole, "train.early_stop=0"],
                )
        if dataset in REGRESSION:  # whole_train fits no regression file: the training mean (and a chosen baseline)
            fitted = dict.fromkeys(["majority/sequence", *(c for c in chosen.values() if entries.get(c) in BASELINES)])
            compare_store(args, list(fitted), folder, seeds=args.seeds, epochs=1, overrides=whole)
        if records := _read_records(folder):  # compare.md of every refit of the file, not only the last call's
            write_text(
                folder / "compare.md",
                comparison_table(
                    records, title=f"{dataset}: the presets chosen on validation, refitted on the whole train file"
                ),
            )


#: the "budget" part of the folder of the refits (:func:`refit_chosen`)
REFIT = "refit"


def _refit_test(args, dataset: str, splits: list[list[dict]], rule: str):
    """``label -> records`` of the refits of ``dataset``: a neural preset's runs of exactly the epochs
    :func:`refit_epochs` gives now by ``rule``; a fitted baseline's fit on the whole train file (:func:`whole_train`'s
    for a classification file, :func:`refit_chosen`'s for a regression file)."""
    refits = _comparison_records(args, dataset, "regular", REFIT)
    whole = _comparison_records(args, dataset, "regular", WHOLE)
    higher = dataset not in REGRESSION

    def runs(label: str) -> list[dict]:
        if label in BASELINES:
            return [r for r in (whole if higher and label in WHOLE_TRAIN else refits) if r["preset"] == label]
        want = f"{refit_epochs(splits, label, higher, rule)}ep"
        return [r for r in refits if r["preset"] == label and r["budget"] == want]

    return runs


def floors_table(args, budget: str, draws: list[int] | None = None, refit: str | None = None) -> list[str]:
    """Floors on the regular files, every choice made on validation: the best model of the harness, the best neural
    one and the better NAC profile against 1-NN Euclidean, our MiniRocket against its published accuracy (fitted on
    the whole train file as the published one is, from :func:`whole_train`'s records when there are any); on the
    regression files the best model's RMSE against the training mean's (``majority``). With ``draws`` the choices
    are made on the comparison's validation split and those draws together (:func:`choices`; a file is left out
    until every draw is recorded); the test numbers are the comparison's (3 seeds), or with ``refit`` (a rule of
    ``REFIT_RULES``) those of the chosen presets refitted on the whole train file (:func:`refit_chosen`; a file
    waits for every refit)."""
    rows = []
    verdicts: dict[str, list[bool]] = {"best": [], "neural": [], "nac": [], "rocket": []}  # classification files
    for d in args.datasets:
        got = choices(args, d, budget, draws)
        if got is None:
            continue
        recs, splits, chosen = got
        if refit:
            runs_of = _refit_test(args, d, splits, refit)
            mean = {"majority/sequence"} if d in REGRESSION else set()  # a regression file's whole-file training mean
            wanted = {label for label in chosen.values() if label} | mean
        else:

            def runs_of(label, recs=recs):
                return [r for r in recs if r["preset"] == label]

            wanted = {_label(e) for e in MODELS}
        test = {label: statistics.mean(vals) for label in wanted if (vals := _test_values(runs_of(label)))}
        if refit and set(test) != wanted:
            continue  # a chosen preset not refitted yet
        if d in REGRESSION:
            best = chosen["best"]
            mean_rmse, r2 = test.get("majority/sequence"), _test_values(runs_of(best), "r2")
            ok = mean_rmse is not None and test.get(best) is not None and test[best] <= mean_rmse
            rows.append(
                f"| {d} (RMSE) | training mean {_fmt(mean_rmse, RMSE_FMT)} | {best}: "
                f"{_fmt(test.get(best), RMSE_FMT)}"
                f"{f', R^2 {statistics.mean(r2):.3f}' if r2 else ''} | {'yes' if ok else 'no'} | - | - | - | - "
                "| - |"
            )
            continue
        whole = _comparison_records(args, d, "regular", WHOLE)
        whole_nn, whole_rocket = (_test_values([r for r in whole if r["preset"] == p]) for p in WHOLE_TRAIN)
        nn, nn_note = one_nn_reference(args, d), ""
        if nn is None:  # unequal lengths or no stores: the harness's 1-NN, on the whole train file where recorded
            nn, nn_note = (
                (statistics.mean(whole_nn), " (harness 1-NN, whole train file)")
                if whole_nn
                else (test.get("knn/sequence"), " (harness 1-NN)")
            )
        cells = []
        for key, label in chosen.items():
            verdict = "-"
            if nn is not None and test.get(label) is not None:
                verdicts[key].append(test[label] >= nn)
                verdict = "yes" if verdicts[key][-1] else "no"
            cells.append(f"{label}: {_fmt(test.get(label))} | {verdict}")
        rocket, published = (
            statistics.mean(whole_rocket) if whole_rocket else test.get("minirocket/sequence"),
            PUBLISHED_MINIROCKET.get(d),
        )
        if rocket is not None and published is not None:
            verdicts["rocket"].append(abs(rocket - published) <= 0.03)
            cells.append(
                f"{_fmt(rocket)}{' (whole train file)' if whole_rocket else ''} vs {published:.3f}: "
                f"{'yes' if verdicts['rocket'][-1] else 'no'}"
            )
        else:
            cells.append(f"{_fmt(rocket)} (none published)" if rocket is not None else "-")
        rows.append(f"| {d} | {_fmt(nn)}{nn_note} | " + " | ".join(cells) + " |")
    if not rows:
        return []

    def count(key):
        return f"{sum(verdicts[key])} of {len(verdicts[key])}"

    how = (
        f"chosen on {len(draws) + 1} validation splits of the train file together (data.seed 0 and draws "
        f"{', '.join(map(str, draws))}, seed 0 each)"
        if draws
        else "chosen on validation"
    )
    epochs = {"best": "the epoch of their best validation score", "trained": "the epochs their compared runs trained"}
    tests = (
        f"the chosen neural presets refitted on the whole train file for {epochs.get(refit)} (mean over their "
        "runs), the fitted baselines fitted on it; test means over seeds"
        if refit
        else "test means over seeds"
    )
    return [
        f"### Floors, {budget}, regular files (every model and profile {how}; {tests})",
        "",
        "| file | 1-NN ED (test) | best model on validation: test | at or above 1-NN | best neural "
        "model on validation: test | at or above 1-NN | NAC profile on validation: test | at or above 1-NN | "
        "MiniRocket vs published (fitted on the whole train file where recorded), within 3 points |",
        "| --- | ---: | --- | :---: | --- | :---: | --- | :---: | --- |",
        *rows,
        "",
        f"Counts (classification files): best model at or above 1-NN on {count('best')}; best neural model on "
        f"{count('neural')}; NAC on {count('nac')}; MiniRocket within 3 points of the published accuracy on "
        f"{count('rocket')}.",
        "",
    ]


def _fmt(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else f"{value:{fmt}}"


def report(args) -> str:
    """One table per budget and task: classification accuracy (mean ± std over seeds) per dataset and variant with
    the 1-NN and MiniRocket references; regression RMSE with R^2; seconds per epoch of the trained models."""
    lines = []
    classes = [d for d in args.datasets if d not in REGRESSION]
    regress = [d for d in args.datasets if d in REGRESSION]
    for budget in sorted({b for _, _, b in groups(args)}, key=lambda b: not b.endswith("ep")):
        lines += _classification_table(args, budget, classes) if classes else []
        lines += _regression_table(args, budget, regress) if regress else []
        lines += floors_table(args, budget)
        if budget.endswith("ep") and args.draws:
            lines += floors_table(args, budget, args.draws)
            for rule in REFIT_RULES:
                lines += floors_table(args, budget, args.draws, refit=rule)
    return "\n".join(lines + front_end_table(args))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uea-dir", default=None, help="folder holding <NAME>/<NAME>_TRAIN.ts (default: sktime's)")
    ap.add_argument("--datasets", nargs="*", default=[*DATASETS, *REGRESSION])
    ap.add_argument("--variants", nargs="*", default=["regular", "irregular"], choices=["regular", "irregular"])
    ap.add_argument("--drop", type=float, default=0.5, help="fraction of steps dropped in the irregular variant")
    ap.add_argument("--epochs", type=int, default=400, help="equal-epochs budget, a cap (0: none)")
    ap.add_argument("--budget", default="30s", help="equal wall-clock budget per model ('' for none)")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument(
        "--draws",
        nargs="*",
        type=int,
        default=[1, 2, 3, 4],
        help="other validation splits (data.seed) of the regular equal-epochs comparisons, seed 0 each",
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stores", default=str(STORES), help="where the archive files are converted to (untracked)")
    ap.add_argument(
        "--out",
        default="time_series/uea",
        help="the claim (lab/records/<out>) or folder of the report and of the comparisons' records",
    )
    ap.add_argument("--tag", default="", help="prefix of the comparisons' folders inside --out")
    ap.add_argument("--report", action="store_true")
    ap.add_argument(
        "--front-ends",
        action="store_true",
        help="only the front-end choice on validation (FRONT_END_CANDIDATES), then the report",
    )
    args = ap.parse_args(argv)
    args.out = str(records(args.out))
    if args.front_ends:
        return run_and_report(args, lambda a: front_end_choice(a, _uea_dir(a)), report)
    return run_and_report(args, run_all, report)


def run_and_report(args, run_all, report) -> int:
    """Train what ``run_all(args)`` trains (unless ``--report``), then print ``report(args)`` and write it to
    ``<--out>/report.md`` (this driver's and ``uea_tuning.py``'s)."""
    if not args.report:
        run_all(args)
    text = report(args)
    print(text)
    write_text(Path(args.out) / "report.md", text)
    return 0


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run time_series/uea`` entry point (the presets' cpu scale; ``scale`` is not used)."""
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
