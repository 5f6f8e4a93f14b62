"""Command line: ``neurodyn generate | convert | train | evaluate | predict | compare | bench | build-kernels | info``.

Examples::

    neurodyn generate fno/darcy --scale cpu          # the data of a preset
    neurodyn generate darcy --n 100 resolution=64    # a generator directly, options as key=value
    neurodyn convert X_TRAIN.ts --out train.h5       # a file you have (PDE or time series) into a store
    neurodyn train fno/darcy --scale cpu model.width=64 train.epochs=50
    torchrun --nproc_per_node 2 -m neurodyn train fno/darcy --scale cpu
    neurodyn evaluate runs/fno-darcy-cpu --data test32.h5
    neurodyn compare fno/darcy lamo/darcy geomano/darcy --budget 60s --seeds 0 1
    neurodyn bench step-speed --scale cpu            # a speed benchmark (see `neurodyn bench --list`)
    neurodyn info
    neurodyn info fno/darcy --scale tiny             # a preset's resolved config, as YAML

``generate`` makes data (a preset's, or a generator's); ``convert`` is the one way a real file enters the store.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ConfigError, NeurodynError


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _device(args: argparse.Namespace) -> str:
    """``--device`` checked against this machine (one sentence for a GPU it lacks), or the default."""
    from .checkpoint_io import check_device

    return str(check_device(args.device)) if args.device else default_device()


def _parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard expects i/n such as 0/4, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {text}: expected 0 <= i < n")
    return i, n


def _key_values(words: Sequence[str], what: str) -> dict:
    """``["a=1", "b=[2,3]"]`` -> ``{"a": 1, "b": [2, 3]}`` (values parsed as YAML)."""
    from .config_types import plain_value

    out = {}
    for word in words:
        if "=" not in word:
            raise ConfigError(f"{what} {word!r} is not of the form key=value")
        key, value = word.split("=", 1)
        out[key] = plain_value(value, f"{what} {word!r}")
    return out


def _values_may_start_with_dash(argv: Sequence[str], options: Sequence[str]) -> list[str]:
    """``--budget -5s`` -> ``--budget=-5s``, so that a value that looks like an option reaches the option's own
    check (argparse would say only "expected one argument")."""
    out, words = [], list(argv)
    i = 0
    while i < len(words):
        if (
            words[i] in options
            and i + 1 < len(words)
            and words[i + 1].startswith("-")
            and len(words[i + 1]) > 1
            and not words[i + 1].startswith("--")
        ):
            out.append(f"{words[i]}={words[i + 1]}")
            i += 2
            continue
        out.append(words[i])
        i += 1
    return out


def _seeds_apart(argv: Sequence[str]) -> list[str]:
    """``--seeds 0 1 2 fno/darcy`` -> ``--seeds=0 --seeds=1 --seeds=2 fno/darcy``: the integers after ``--seeds`` are
    its values, and the words after them stay the models (argparse would take them as seeds too)."""
    out, words, i = [], list(argv), 0
    while i < len(words):
        if words[i] != "--seeds":
            out.append(words[i])
            i += 1
            continue
        i += 1
        start = i
        while i < len(words) and re.fullmatch(r"-?\d+", words[i]):
            out.append(f"--seeds={words[i]}")
            i += 1
        if i == start:
            out.append("--seeds")  # no integer follows: argparse says what --seeds expects
    return out


def cmd_convert(args: argparse.Namespace) -> int:
    """``convert FILE``: a public file (FNO .mat, PDEBench / The Well HDF5, neuraloperator .pt, Geo-FNO folder), a
    user's time series (UEA .ts, long-format CSV / Parquet, .npz) or point clouds, or a raw file of the sequence
    papers (``kind=person-activity | mnist | pronostia | xjtu``) into the store; key=value words are reader
    options (``kind=`` names the format)."""
    from .data.formats.convert import conversion_summary, convert_to_store

    options = _key_values(args.overrides, "reader option")
    kind = options.pop("kind", None)
    if args.n is not None:
        if args.n < 1:
            raise ConfigError(f"--n is the number of samples to convert and must be >= 1; got {args.n}")
        options.setdefault("max_samples", args.n)
    # a bar on a terminal, a line per stage in a log (neurodyn.progress); --no-progress: only the result
    path = convert_to_store(
        args.file,
        out=args.out,
        kind=kind,
        chunk_size=args.chunk_size,
        progress=False if args.no_progress else None,
        **options,
    )
    print(conversion_summary(path))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .data.assembly import data_options, stored_samples
    from .data.generators import available_generators, get_generator
    from .experiments import available_presets, load_experiment

    if args.n is not None and args.n < 1:
        raise ConfigError(f"--n is the number of samples to make and must be >= 1; got {args.n}")
    if args.target in available_presets():
        cfg = load_experiment(
            args.target, args.scale, [f"data.{o}" if not o.startswith("data.") else o for o in args.overrides]
        )
        d = cfg["data"]
        if "generator" not in d:
            raise ConfigError(f"preset {args.target} reads an existing file ({d.get('path')}); nothing to generate")
        gen, options = get_generator(d["generator"]), data_options(d)
        n = args.n if args.n is not None else stored_samples(d)
        seed = d.get("seed", 0) if args.seed is None else args.seed
    elif args.target in available_generators():
        gen = get_generator(args.target)
        options = {k.removeprefix("data."): v for k, v in _key_values(args.overrides, "generator option").items()}
        n, seed = (100 if args.n is None else args.n), args.seed or 0
    else:
        from .errors import unknown_name

        raise unknown_name("preset or generator", args.target, available_presets() + available_generators())
    gcfg = gen.make_config(**options)
    path = gen.run(
        gcfg,
        n,
        seed=seed,
        path=args.out,
        device=_device(args),
        chunk_size=args.chunk_size,
        shard=args.shard,
        progress=False if args.no_progress else None,
    )
    if path is None:
        print(f"shard {args.shard[0]}/{args.shard[1]} done; the file is assembled when every shard has finished")
    else:
        print(path)
    return 0


def _run_dir(args: argparse.Namespace, cfg: dict) -> Path:
    from .train.run_folder import run_folder

    name = args.run_name if args.run_name is not None else f"{cfg['preset'].replace('/', '-')}-{cfg['scale']}"
    return run_folder(args.runs_dir, name)


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    from .experiments import load_experiment
    from .train.distributed import barrier, init_from_env
    from .train.experiment import check_config, run_experiment
    from .train.run_folder import fresh_or_kept

    cfg = load_experiment(args.preset, args.scale, args.overrides)
    run_dir = _run_dir(args, cfg)
    device = torch.device(_device(args))
    check_config(cfg, device)  # a bad key or value is reported before --fresh removes anything or a run is compared
    dist = init_from_env(device)
    if device.type == "cuda" and dist.enabled:
        device = torch.device("cuda", dist.local_rank)
        torch.cuda.set_device(device)
    try:
        # run_experiment refuses to resume a folder trained with another config
        with fresh_or_kept(run_dir, fresh=args.fresh, is_main=dist.is_main):
            # --quiet: no bar, no header or epoch lines; --no-progress: no bar, the lines stay
            progress = False if args.quiet else "lines" if args.no_progress else None
            final = run_experiment(cfg, run_dir, device=device, resume=not args.fresh, dist=dist, progress=progress)
            if dist.enabled:  # every rank finishes together: a rank that exits while another still writes its
                barrier()  # summary can abort in gloo's threads ("terminate called without an active exception")
    finally:
        if dist.enabled:  # leaving gloo's threads running at exit can abort the process
            import torch.distributed

            torch.distributed.destroy_process_group()
    if dist.is_main:
        from .plots import write_run_plots

        plots = write_run_plots(run_dir, device=device)
        if final:
            print(f"\ntest metrics ({cfg['preset']}, scale {cfg['scale']}; defined in summary.md):")
            # numbers only (per-step curves are in metrics.jsonl and rollout_error.png), no band the grid lacks
            print(format_metric_table({"test": final}, indent="  "))
        else:
            print("\nno test split and no test files: nothing was evaluated (see `neurodyn evaluate RUN --data FILE`)")
        print(f"run folder: {run_dir} (summary.md, {', '.join(plots)}, metrics.jsonl)")
    return 0


WHICH_HELP = (
    "the checkpoint: last (the final model), best (the best validation epoch) or auto (the default: best "
    "when the validation split has at least 50 cases, else last; the choice is told on stderr)"
)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .train.runs import evaluate_sets

    which, why = _which(args)
    results = evaluate_sets(
        args.run,
        files=args.data or None,
        device=_device(args),
        which=which,
        progress=False if args.no_progress else None,
    )
    _tell_choice("evaluate", which, why)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(format_metric_table(results))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from .train.predict import write_predictions

    which, why = _which(args)
    path, metrics = write_predictions(
        args.run,
        args.data,
        args.out,
        which=which,
        device=_device(args),
        overwrite=args.overwrite,
        progress=False if args.no_progress else None,
    )
    _tell_choice("predict", which, why)
    print(f"predictions of {args.data} written to {path}")
    if metrics:
        print(format_metric_table({"predicted": metrics}))
    return 0


def _which(args: argparse.Namespace) -> tuple[str, str]:
    """``--which`` resolved (``auto``: :func:`neurodyn.train.predict.choose_checkpoint`) and why (empty unless
    ``auto`` chose)."""
    from .train.predict import choose_checkpoint

    if Path(args.run).is_file():
        if args.which is not None:
            raise ConfigError(
                f"--which {args.which} picks a checkpoint of a run folder, and {args.run} is a "
                "checkpoint file itself; drop --which, or give the run folder"
            )
        return "last", ""
    if args.which not in (None, "auto"):
        return args.which, ""
    return choose_checkpoint(args.run)


def _tell_choice(command: str, which: str, why: str) -> None:
    """The checkpoint ``--which auto`` chose and why, one line on stderr once the command succeeded (a failure's
    stderr stays its one error line)."""
    if why:
        print(f"{command}: {which}.pt ({why})", file=sys.stderr)


def format_metric_table(results: dict[str, dict], indent: str = "") -> str:
    """Metrics as rows, evaluation sets as columns (one column: the plain ``name  value`` list): the numbers
    :func:`~neurodyn.train.metrics.shown_metrics` keeps (no Fourier band a grid lacks, ``nrmse`` not beside the
    ``rel_l2`` it equals); a metric one set lacks (a band its grid has no mode in) is ``n/a`` in that column."""
    from .train.metrics import shown_metrics

    names = list(results)
    shown = {n: shown_metrics(results[n])[0] for n in names}
    keys = list(dict.fromkeys(k for n in names for k in shown[n]))  # every set's, in order, once
    if len(names) == 1:
        return "\n".join(f"{indent}{k:>12s}  {results[names[0]][k]:.5g}" for k in keys)
    cell = lambda n, k: f"{results[n][k]:11.5g}" if k in shown[n] else f"{'n/a':>11s}"  # noqa: E731
    lines = [f"{indent}{'':>12s}  " + "  ".join(f"{n:>11s}" for n in names)]
    lines += [f"{indent}{k:>12s}  " + "  ".join(cell(n, k) for n in names) for k in keys]
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    import torch

    from .compare import compare, parse_budget

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.epochs is None and args.budget is None:
        raise ConfigError("compare needs a budget: --budget 60s (equal wall-clock) or --epochs N (equal epochs)")
    budget = parse_budget(args.budget) if args.budget is not None else None
    first = args.presets[0].split(";")[0].split("=")[-1]
    out = args.out or Path(args.runs_dir) / "compare" / f"{first.replace('/', '-')}-{args.scale}"
    # as train's: --quiet nothing, --no-progress no bar (the lines stay)
    progress = False if args.quiet else "lines" if args.no_progress else None
    compare(
        args.presets,
        out,
        args.scale,
        seeds=args.seeds or [0],
        epochs=args.epochs,
        budget_seconds=budget,
        data_from=args.data_from,
        overrides=args.overrides,
        device=_device(args),
        progress=progress,
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from . import bench

    if args.list or not args.name:
        names = bench.available()
        width = max(map(len, names))
        for name in names:
            print(f"{name:>{width}s}  {bench.BENCHMARKS[name].description}")
        return 0
    return bench.run(args.name, args.scale, args.bench_args)


def cmd_build_kernels(args: argparse.Namespace) -> int:
    """Compile the fused CPU kernels now (into their content-keyed cache), so no later run waits for them."""
    from .ops import cpu_kernel

    if cpu_kernel.disabled_by_env():
        print("NEURODYN_NO_CPP_EXT is set: the pure-PyTorch kernels are used; nothing to build")
        return 0
    ops = cpu_kernel.get()
    if ops is None:  # get() has printed why (no compiler, no ninja, a build error) and what to do
        print("the fused CPU kernels are not available; every model runs on the pure-PyTorch path", file=sys.stderr)
        return 0 if args.allow_missing else 1
    print(f"fused CPU kernels ready in {cpu_kernel.build_dir()}")
    return 0


INFO_LISTS = ("all", "models", "generators", "datasets", "presets", "data")


def _print_preset_config(preset: str, scale: str, overrides: Sequence[str]) -> int:
    """``neurodyn info PRESET``: the config a ``train`` of it at ``scale`` (with the overrides) would run, as YAML."""
    import yaml

    from .experiments import load_experiment

    cfg = load_experiment(preset, scale, list(overrides))
    print(yaml.safe_dump(cfg, sort_keys=False).rstrip())
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from .data.generators import available_generators
    from .data.store import StoredDataset, data_root, stored_files
    from .experiments import available_presets
    from .models import available

    what = args.what
    if what in INFO_LISTS and args.overrides:
        raise ConfigError(
            f"key=value overrides ({' '.join(args.overrides)}) apply to a preset's config: "
            "neurodyn info PRESET [--scale S] key=value ..."
        )
    if what not in INFO_LISTS:
        if what not in available_presets():
            from .errors import unknown_name

            raise unknown_name("info topic or preset", what, list(INFO_LISTS) + available_presets())
        return _print_preset_config(what, args.scale, args.overrides)
    if what in ("all", "models"):
        print("models:     " + ", ".join(available()))
    if what in ("all", "generators", "datasets"):
        print("generators: " + ", ".join(available_generators()))
    if what in ("all", "presets"):
        print("presets:    " + ", ".join(available_presets()) + "   (scales: tiny, cpu, paper)")
    if what in ("all", "data"):
        files = list(stored_files())
        print(f"generated data under {data_root()}: " + ("none yet" if not files else ""))
        for f in files:
            try:
                s = StoredDataset(f, verify=False)
                print(
                    f"  {f}  [{s.attrs['generator']} v{s.attrs.get('generator_version')}, {s.n_samples} samples, "
                    f"{', '.join(f'{k}{s.shapes[k][1:]}' for k in sorted(s.shapes) if k.startswith('fields/'))}]"
                )
            except NeurodynError as exc:
                print(f"  {f}  (unreadable: {exc})")
    return 0


def _add_generate(sub) -> None:
    g = sub.add_parser(
        "generate",
        help="generate a dataset into the store ($NEURODYN_DATA)",
        epilog="Further key=value arguments set generator options (data.key=value for presets). "
        "A file you have enters through `neurodyn convert FILE`.",
    )
    g.add_argument(
        "target",
        help="a preset (e.g. fno/darcy), a dataset file of presets (e.g. data/darcy) or a generator name (e.g. darcy)",
    )
    g.add_argument("--scale", default="cpu", help="preset scale: tiny | cpu | paper (default cpu)")
    g.add_argument("--n", type=int, default=None, help="number of samples (default: the preset's splits, or 100)")
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--out", default=None, help="output file (default: under $NEURODYN_DATA)")
    g.add_argument("--shard", type=_parse_shard, default=(0, 1), help="make only shard i of n (i/n)")
    g.add_argument("--chunk-size", type=int, default=None)
    g.add_argument("--device", default=None)
    g.add_argument("--no-progress", action="store_true")
    g.set_defaults(func=cmd_generate)


def _add_convert(sub) -> None:
    v = sub.add_parser(
        "convert",
        help="convert a file you have into the store (the one way a real file enters)",
        epilog="Further key=value arguments are reader options, e.g. stride=5 kind=airfoil, or "
        "id=sensor label=activity (docs/your-own-time-series.md); kind= names the format "
        "(kind=person-activity | mnist | pronostia | xjtu for the sequence papers' raw files).",
    )
    v.add_argument(
        "file",
        help="a public dataset file or Geo-FNO folder, or your time series (UEA .ts, long-format "
        ".csv / .parquet, .npz) or point clouds",
    )
    v.add_argument("--out", default=None, help="output store file (default: $NEURODYN_DATA/imported/<name>.h5)")
    v.add_argument("--n", type=int, default=None, help="convert only the first N samples (reader option max_samples)")
    v.add_argument("--chunk-size", type=int, default=None)
    v.add_argument("--no-progress", action="store_true")
    v.set_defaults(func=cmd_convert)


def _add_trained_run(p: argparse.ArgumentParser, func) -> None:
    """What ``evaluate`` and ``predict`` both take: the run, which of its checkpoints, the device."""
    p.add_argument("run", help="run folder or checkpoint file")
    p.add_argument("--which", default=None, choices=("auto", "last", "best"), help=WHICH_HELP)
    p.add_argument("--device", default=None)
    p.add_argument("--no-progress", action="store_true", help="no progress bar or lines (on stderr); only the result")
    p.set_defaults(func=func)


def _add_train_evaluate_predict(sub) -> None:
    t = sub.add_parser(
        "train",
        help="train a preset; re-running the same command resumes it",
        epilog="Further key.path=value arguments override the preset, e.g. model.width=64 train.epochs=20.",
    )
    t.add_argument("preset", help="e.g. fno/darcy (see `neurodyn info presets`)")
    t.add_argument("--scale", default="cpu", help="tiny | cpu | paper (default cpu)")
    t.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    t.add_argument("--runs-dir", default="runs")
    t.add_argument("--run-name", default=None, help="default: <preset>-<scale>")
    t.add_argument("--fresh", action="store_true", help="delete an existing run folder of that name first")
    t.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar; the run header and one line per epoch are still printed",
    )
    t.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar, no header and no epoch lines; the test metrics at the end are still printed",
    )
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("evaluate", help="evaluate a run's checkpoint on its test split, its test files, or given files")
    _add_trained_run(e, cmd_evaluate)
    e.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="FILE",
        help="a store file to evaluate on (repeatable; e.g. the same problem at another resolution); "
        "default: the run's test split and its data.test_path files",
    )
    e.add_argument("--json", action="store_true")

    pr = sub.add_parser("predict", help="predict a store file with a trained run (physical units) into an HDF5 file")
    _add_trained_run(pr, cmd_predict)
    pr.add_argument("--data", required=True, metavar="FILE", help="a store file with the run's input fields")
    pr.add_argument("--out", required=True, metavar="PRED.h5", help="output HDF5 file (dataset 'pred')")
    pr.add_argument(
        "--overwrite", action="store_true", help="replace --out when it exists (never the input, nor a run's files)"
    )


def _add_compare(sub) -> None:
    c = sub.add_parser(
        "compare",
        help="train several presets' models on one dataset at one budget and tabulate",
        epilog="Further key.path=value arguments, anywhere on the line, apply to every preset "
        "(data.* to the shared data, e.g. data.test_path=...); a word whose part before '=' "
        "has a dot is such an override, any other word a compared model.",
    )
    c.add_argument(
        "presets",
        nargs="+",
        help="presets whose models are compared, e.g. fno/darcy lamo/darcy; LABEL=PRESET;key=value "
        "compares one preset under other settings, e.g. 'nac-paper=nac/sequence;model.compat=paper'",
    )
    c.add_argument("--scale", default="cpu", help="tiny | cpu | paper (default cpu)")
    c.add_argument("--budget", default=None, help="equal wall-clock: training time per model, e.g. 60s, 5m")
    c.add_argument("--epochs", type=int, default=None, help="equal epochs instead of equal time")
    c.add_argument("--seeds", type=int, nargs="+", action="extend", default=None, help="seeds per model (default 0)")
    c.add_argument(
        "--data-from", default=None, help="the preset whose task and data all models use (default: the first)"
    )
    c.add_argument("--out", default=None, help="output folder (default: <runs-dir>/compare/<first preset>-<scale>)")
    c.add_argument("--runs-dir", default="runs")
    c.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    c.add_argument("--device", default=None)
    c.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars; the trainings' header and epoch lines are still printed",
    )
    c.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bars and no training lines; the results and the table are still printed",
    )
    c.set_defaults(func=cmd_compare)


def _add_bench_kernels_info(sub) -> None:
    b = sub.add_parser(
        "bench",
        help="run a speed benchmark (tables printed, raw measurements under bench-results/)",
        epilog="Arguments after NAME that neurodyn does not know go to the benchmark.",
    )
    b.add_argument("name", nargs="?", default=None, help="benchmark name (omit or --list to list them)")
    b.add_argument("--scale", default="cpu", help="tiny | cpu | paper (default cpu)")
    b.add_argument("--list", action="store_true", help="list the benchmarks")
    b.set_defaults(func=cmd_bench)

    k = sub.add_parser("build-kernels", help="compile the fused CPU kernels now (otherwise on first use)")
    k.add_argument(
        "--allow-missing",
        action="store_true",
        help="exit 0 when they cannot be built (no compiler): the pure-PyTorch path is used",
    )
    k.set_defaults(func=cmd_build_kernels)

    i = sub.add_parser(
        "info",
        help="list models, generators, presets and generated data; or a preset's resolved "
        "config (neurodyn info fno/darcy --scale tiny)",
    )
    i.add_argument(
        "what",
        nargs="?",
        default="all",
        help=f"{' | '.join(INFO_LISTS)} | a preset name (its config at --scale, as YAML)",
    )
    i.add_argument("--scale", default="cpu", help="the scale of a preset's config: tiny | cpu | paper (default cpu)")
    i.set_defaults(func=cmd_info)


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = argparse.ArgumentParser(
        prog="neurodyn", description="Neural-dynamics operators: generate data, train, evaluate."
    )
    p.add_argument("--version", action="version", version=f"neurodyn {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_add_generate, _add_convert, _add_train_evaluate_predict, _add_compare, _add_bench_kernels_info):
        add(sub)
    return p


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as one line (``neurodyn: warning: ...``), not Python's two with the source line."""
    return f"neurodyn: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    warnings.formatwarning = _one_line_warning
    parser = build_parser()
    argv = _values_may_start_with_dash(
        list(sys.argv[1:] if argv is None else argv),
        ("--budget", "--epochs", "--n", "--seed", "--chunk-size", "--run-name"),
    )
    moved = []
    if argv and argv[0] == "compare":  # overrides may stand anywhere, even between the models or after --seeds
        from .compare import is_override

        moved = [w for w in argv[1:] if is_override(w)]
        argv = _seeds_apart([w for w in argv if w not in moved])
    args, extra = parser.parse_known_args(argv)
    extra = moved + extra
    if args.command == "bench":  # everything neurodyn does not know belongs to the benchmark script
        args.bench_args, extra = extra, []
    else:  # key=value overrides may stand anywhere among the options
        stray = [a for a in extra if "=" not in a or a.startswith("-")]
        if stray or (extra and args.command not in ("train", "generate", "convert", "compare", "info")):
            parser.error(f"unrecognized arguments: {' '.join(stray or extra)} (overrides are key.path=value)")
    args.overrides = extra
    try:
        return args.func(args)
    except NeurodynError as exc:
        print(f"neurodyn {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        if str(exc):  # what the interrupted step kept or discarded
            print(f"neurodyn {args.command}: interrupted; {exc}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
