"""Every shell command of README.md and docs/*.md runs, as written, at the tiny scale.

The commands are the lines of the fenced ``bash`` / ``sh`` / ``shell`` blocks (a trailing ``\\`` joins lines,
``# ...`` comments are dropped). A ``neurodyn`` command runs through ``neurodyn.cli.main`` and must exit 0; any
other command (``make``, ``python``, ``torchrun``, ``pip``, ...) must have an entry in ``NOT_RUN`` with the reason
it is not run here, so a new command in the docs is either run or explained.

What the test changes, and nothing else (the tiny-scale rule):

* ``--scale cpu`` / ``--scale paper`` become ``--scale tiny``; a ``train`` or ``compare`` without ``--scale``, and a
  ``generate`` of a preset, get ``--scale tiny``;
* ``generate --n N`` makes 4 samples;
* ``train`` gets ``train.epochs=1`` appended (the last override wins); ``compare --epochs N`` becomes
  ``--epochs 1``, ``--budget T`` becomes ``--budget 2s`` and ``--seeds ...`` becomes ``--seeds 0``;
* a run folder the docs name after the cpu scale (``runs/<preset>-cpu``) is the tiny run ``runs/<preset>-tiny``;
* the files a block uses and no command of it writes (``train16.h5``, a FNO ``.mat`` file, neuraloperator's car
  point clouds, UEA ``.ts`` files, a CSV) are written by the test, small, before the block runs (``FILES``);
* a block that uses ``runs/demo`` starts from the run ``make demo`` trains (at the tiny scale).

Each fenced block runs in its own empty folder (with its own ``$NEURODYN_DATA``), its commands in document order:
a block is one example, and a later command may use what an earlier one made (``train`` then ``evaluate``). The
whole file takes about a minute on one core (marked slow: ``make test`` runs it, ``make test-fast`` does not).
"""

from __future__ import annotations

import os
import re
import shlex
import time
from pathlib import Path

import numpy as np
import pytest

from neurodyn.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

NOT_RUN = {
    "make demo": "about three minutes (install included); its training is `neurodyn train fno/darcy`, run below",
    "make test": "runs this test suite",
    "make test-fast": "runs this test suite",
    "make lint": "needs the checkout's .venv (make install); CI's lint job runs it",
    "make docs": "builds the documentation site (mkdocs); CI runs it",
    "make lab-test": "runs the laboratory's tests; CI runs them",
    ".venv/bin/python -m pytest --device cuda": "needs a GPU",
    "torchrun": "two training processes; DistributedDataParallel is tested in tests/train/test_ddp_models.py",
    "pip download": "downloads from PyPI; the test writes the .ts files instead",
    "unzip": "needs the downloaded wheel; the test writes the .ts files it holds",
}


# ------------------------------------------------------------------------------------------ reading the docs


def fenced_blocks(path: Path) -> list[tuple[int, list[tuple[int, str]]]]:
    """The shell blocks of a Markdown file: ``[(first line, [(line, command), ...]), ...]``."""
    blocks, current, start, pending, pending_line = [], None, 0, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"\s*```(\w*)", line)
        if fence and current is None:
            if fence.group(1) in ("bash", "sh", "shell"):
                current, start = [], number
            else:
                current, start = False, number  # another language: skipped to its closing fence
            continue
        if fence:
            if current:
                blocks.append((start, current))
            current = None
            continue
        if current is None or current is False:  # prose, or a block of another language
            continue
        if line.rstrip().endswith("\\"):
            pending, pending_line = pending + line.rstrip()[:-1] + " ", pending_line or number
            continue
        whole = pending + line
        if shlex.split(whole, comments=True):  # not a comment-only line
            current.append((pending_line or number, whole))
        pending, pending_line = "", 0
    return blocks


def commands():
    out = []
    for doc in DOCS:
        for start, block in fenced_blocks(doc):
            for i, (line, _) in enumerate(block):
                out.append(pytest.param(doc, start, i, id=f"{doc.relative_to(ROOT)}:{line}"))
    return out


# ------------------------------------------------------------------------------------------ the tiny-scale rule


def tiny(argv: list[str]) -> list[str]:
    """``neurodyn ...`` words (without ``neurodyn``) under the module docstring's tiny-scale rule."""
    words, out, i = list(argv), [], 0
    command = words[0] if words else ""
    while i < len(words):
        w = words[i]
        if w == "--scale":
            out += ["--scale", "tiny"]
            i += 2
        elif w == "--epochs" and command == "compare":
            out += ["--epochs", "1"]
            i += 2
        elif w == "--budget":
            out += ["--budget", "2s"]
            i += 2
        elif w == "--n" and command == "generate":
            out += ["--n", "4"]
            i += 2
        elif w == "--seeds":
            out += ["--seeds", "0"]
            i += 1
            while i < len(words) and words[i].isdigit():
                i += 1
        else:
            out.append(re.sub(r"^(runs/[\w-]+)-cpu$", r"\1-tiny", w))
            i += 1
    from neurodyn.experiments import available_presets

    preset_generate = command == "generate" and len(out) > 1 and out[1] in available_presets()
    if "--scale" not in out and (command in ("train", "compare") or preset_generate):
        out += ["--scale", "tiny"]
    if command == "train":
        out.append("train.epochs=1")
    return out


# ------------------------------------------------------------------------------------------ the files the docs use


def _generate(*argv: str) -> None:
    assert main(["generate", *argv, "--no-progress"]) == 0


def _darcy(name: str, n: int, resolution: int) -> None:
    _generate("darcy", "--n", str(n), f"resolution={resolution}", f"solve_resolution={resolution}", "--out", name)


def _fno_mat(name: str) -> None:
    import scipy.io

    rng = np.random.default_rng(0)
    coeff = np.where(rng.standard_normal((3, 21, 21)) > 0, 12.0, 3.0)
    scipy.io.savemat(name, {"coeff": coeff, "sol": rng.standard_normal((3, 21, 21))})


def _uea(
    name: str, n: int, length: int = 20, dims: int = 6, classes=("standing", "running", "walking", "badminton")
) -> None:
    """A BasicMotions-shaped UEA file: ``dims`` channels, equal length, the classes in turn."""
    rng = np.random.default_rng(len(name) + n)
    lines = [
        "@problemName BasicMotions",
        "@timeStamps false",
        "@missing false",
        "@univariate false",
        f"@dimensions {dims}",
        "@equalLength true",
        f"@seriesLength {length}",
        f"@classLabel true {' '.join(classes)}",
        "@data",
    ]
    for k in range(n):
        label = classes[k % len(classes)]
        dims_text = [",".join(f"{v:.4f}" for v in rng.standard_normal(length) + k % len(classes)) for _ in range(dims)]
        lines.append(":".join(dims_text) + f":{label}")
    Path(name).parent.mkdir(parents=True, exist_ok=True)
    Path(name).write_text("\n".join(lines) + "\n")


def _csv(name: str) -> None:
    rng = np.random.default_rng(0)
    rows = ["recording,ts,ax,ay,az,activity"]
    for r in range(6):
        for t in range(8):
            ax, ay, az = rng.standard_normal(3)
            rows.append(f"r{r},{t * 0.1:.1f},{ax:.3f},{ay:.3f},{az:.3f},{'walking' if r % 2 else 'sitting'}")
    Path(name).write_text("\n".join(rows) + "\n")


def _person_activity(name: str) -> None:
    """UCI's person-activity layout: recording, tag, 100-ns ticks, date, x, y, z, activity (two activities)."""
    tags = ["010-000-024-033", "010-000-030-096", "020-000-033-111", "020-000-032-221"]
    rows = [
        f"A0{rec},{tags[i % 4]},{633790226051280329 + 2_110_000 * i},27.05.2009 14:03:25:127,{i % 5}.0,{rec}.0,"
        f"{i % 3}.0,{['walking', 'lying'][(i // 10) % 2]}"
        for rec in range(8)
        for i in range(130)
    ]
    Path(name).write_text("\n".join(rows) + "\n")


def _car_point_clouds(name: str, n: int) -> None:
    """neuraloperator's car files as they hold them: a torch list of per-sample dicts, ``vertices (P, 3)`` and one
    pressure per point stored as ``press (1, P)``, clouds of different sizes, and keys the conversion does not use."""
    import torch

    g = torch.Generator().manual_seed(0)
    samples = []
    for k in range(n):
        points = 40 + 3 * k
        vertices = torch.randn(points, 3, generator=g)
        samples.append(
            {
                "vertices": vertices,
                "press": torch.sin(vertices.sum(1))[None],
                "info": {"velocity": torch.tensor([20.0])},
                "length": torch.tensor(4.2),
            }
        )
    torch.save(samples, name)


def _sequence_store(name: str, n: int) -> None:
    _uea(name + ".ts", n)
    assert main(["convert", name + ".ts", "--out", name, "--no-progress"]) == 0


# file name -> how the test writes it (in the block's folder, before the block runs)
FILES = {
    "darcy64.h5": lambda: _darcy("darcy64.h5", 2, 64),
    "darcy128.h5": lambda: _darcy("darcy128.h5", 2, 128),
    "piececonst_r421_N1024_smooth1.mat": lambda: _fno_mat("piececonst_r421_N1024_smooth1.mat"),
    "mini_car.pt": lambda: _car_point_clouds("mini_car.pt", 12),
    "X_TRAIN.ts": lambda: _uea("X_TRAIN.ts", 24),
    "X_TEST.ts": lambda: _uea("X_TEST.ts", 8),
    "train16.h5": lambda: _darcy("train16.h5", 1000, 16),
    "test16.h5": lambda: _darcy("test16.h5", 4, 16),
    "test32.h5": lambda: _darcy("test32.h5", 4, 32),
    "train.h5": lambda: _sequence_store("train.h5", 24),
    "test.h5": lambda: _sequence_store("test.h5", 8),
    "all.h5": lambda: _sequence_store("all.h5", 140),
    "log.csv": lambda: _csv("log.csv"),
    "ConfLongDemo_JSI.txt": lambda: _person_activity("ConfLongDemo_JSI.txt"),
    "uea/BasicMotions_TRAIN.ts": lambda: _uea("uea/BasicMotions_TRAIN.ts", 16),
    "uea/BasicMotions_TEST.ts": lambda: _uea("uea/BasicMotions_TEST.ts", 8),
    "stores/GunPoint_TRAIN.h5": lambda: _sequence_store("stores/GunPoint_TRAIN.h5", 24),
    "stores/GunPoint_TEST.h5": lambda: _sequence_store("stores/GunPoint_TEST.h5", 8),
}


# ------------------------------------------------------------------------------------------ running a block


class Block:
    """One fenced block's folder and the results of its commands run so far (in order)."""

    def __init__(self, root: Path, commands: list[tuple[int, str]]):
        self.root, self.commands, self.results = root, commands, []
        self.root.mkdir(parents=True)
        text = " ".join(c for _, c in commands)
        written = {m for _, c in commands for m in re.findall(r"--out\s+(\S+)", c)}
        self.files = [
            f for f in FILES if f not in written and re.search(rf"(^|[\s=,{{:]){re.escape(f)}($|[\s,}}])", text)
        ]
        self.demo = "runs/demo" in text
        self.prepared = False

    def _in_folder(self, fn):
        old_cwd, old_data = os.getcwd(), os.environ.get("NEURODYN_DATA")
        os.chdir(self.root)
        os.environ["NEURODYN_DATA"] = str(self.root / "data")
        try:
            return fn()
        finally:
            os.chdir(old_cwd)
            if old_data is None:
                os.environ.pop("NEURODYN_DATA", None)
            else:
                os.environ["NEURODYN_DATA"] = old_data

    def run_until(self, index: int):
        if not self.prepared:
            self.prepared = True
            for f in self.files:
                self._in_folder(FILES[f])
            if self.demo:  # what `make demo` leaves (its training command, at the tiny scale)
                self._in_folder(
                    lambda: main(
                        ["train", "fno/darcy", "--scale", "tiny", "--run-name", "demo", "--quiet", "train.epochs=1"]
                    )
                )
        while len(self.results) <= index:
            text = self.commands[len(self.results)][1]
            self.results.append(self._in_folder(lambda text=text: run_command(text)))
        return self.results[index]


def not_run_reason(text: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if text.strip().startswith(prefix)), None)


def run_command(text: str):
    """``("skip", reason)`` or ``(exit code, seconds, argv)``."""
    argv = shlex.split(text, comments=True)
    if argv[0] != "neurodyn":
        why = not_run_reason(text)
        return ("skip", why) if why else ("unknown", argv[0])
    argv = tiny(argv[1:])
    t0 = time.perf_counter()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    return code, time.perf_counter() - t0, argv


_BLOCKS: dict[tuple[Path, int], Block] = {}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return tmp_path_factory.mktemp("doc-commands")


@pytest.mark.slow  # about 50 s in all: trainings, comparisons and conversions
@pytest.mark.parametrize("doc, start, index", commands())
def test_doc_command_runs(doc, start, index, workspace, capsys):
    key = (doc, start)
    if key not in _BLOCKS:
        blocks = dict(fenced_blocks(doc))
        _BLOCKS[key] = Block(workspace / f"{doc.stem}-{start}", blocks[start])
    result = _BLOCKS[key].run_until(index)
    text = _BLOCKS[key].commands[index][1]
    if result[0] == "skip":
        pytest.skip(result[1])
    assert result[0] != "unknown", (
        f"{text!r}: a command the docs show that this test neither runs (only `neurodyn` "
        "commands are run) nor explains; add it to NOT_RUN with the reason"
    )
    code, seconds, argv = result
    assert code == 0, (
        f"{doc.name}: {text!r} (run as `neurodyn {' '.join(argv)}`) exited {code}:\n{capsys.readouterr().err[-2000:]}"
    )


def test_the_commands_are_found():
    """The reader of the docs finds the commands (a continuation line joined, a comment dropped)."""
    readme = dict(fenced_blocks(ROOT / "README.md"))
    flat = [c for block in readme.values() for _, c in block]
    assert any(c.startswith("neurodyn compare fno/darcy lamo/darcy geomano/darcy") for c in flat)
    joined = next(c for c in flat if c.startswith("neurodyn train fno/darcy data.path=train16.h5"))
    assert "data.test_path={test16: test16.h5, test32: test32.h5}" in shlex.split(joined, comments=True)
    assert tiny(["train", "fno/darcy", "--scale", "cpu", "model.width=64", "train.epochs=30"]) == [
        "train",
        "fno/darcy",
        "--scale",
        "tiny",
        "model.width=64",
        "train.epochs=30",
        "train.epochs=1",
    ]
    assert tiny(["compare", "a/b", "--seeds", "0", "1", "2", "--budget", "2m", "data.path=x"]) == [
        "compare",
        "a/b",
        "--seeds",
        "0",
        "--budget",
        "2s",
        "data.path=x",
        "--scale",
        "tiny",
    ]
    assert tiny(["evaluate", "runs/fno-darcy-cpu"]) == ["evaluate", "runs/fno-darcy-tiny"]


def test_a_broken_command_fails(tmp_path, monkeypatch):
    """What a doc example with a typo gives: a non-zero exit, which fails its test above."""
    monkeypatch.chdir(tmp_path)
    code, _, argv = run_command("neurodyn train fno/darcyy --scale cpu")
    assert code == 2 and argv[:2] == ["train", "fno/darcyy"]
    assert run_command("make install")[0] == "unknown"
