"""The lazily built C++ extension: fallback switch, bounded and lock-safe builds, failure messages, the cache key,
exp accuracy.

The build-logic tests replace the compiler child (``_child_argv``) by a fast fake and the loader (``_load``) by a
stub, so they take seconds; the one real check (a second checkout reuses the build) uses the session's build.
Anything that could hang runs in a subprocess with a timeout.
"""

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

import neurodyn
from neurodyn.ops import cpu_kernel, resolve_backend, selective_scan

from .helpers import grads, rel_err, scan_inputs

COMPILING = "neurodyn: compiling the fused CPU kernels once (about a minute) into"


def test_env_var_forces_fallback(monkeypatch):
    monkeypatch.setenv("NEURODYN_NO_CPP_EXT", "1")
    assert cpu_kernel.get() is None
    assert resolve_backend("auto", torch.zeros(1, 1, 1)) == "torch"
    a = scan_inputs(1, 2, 9, 3)
    out = selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"])  # runs on the fallback
    assert out.shape == (1, 2, 9)
    with pytest.raises(RuntimeError, match="fused CPU kernel is unavailable"):
        selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"], backend="cpp")


def test_build_failure_warns_once_and_falls_back(monkeypatch):
    def broken():
        raise RuntimeError("no compiler here")

    monkeypatch.delenv("NEURODYN_NO_CPP_EXT", raising=False)
    monkeypatch.setattr(cpu_kernel, "_build", broken)
    monkeypatch.setattr(cpu_kernel, "_STATE", {})
    with pytest.warns(RuntimeWarning, match="no compiler here"):
        assert cpu_kernel.get() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpu_kernel.get() is None  # no second warning
    assert resolve_backend("auto", torch.zeros(1, 1, 1)) == "torch"


def test_build_directory_is_stable(monkeypatch):
    monkeypatch.delenv("NEURODYN_EXT_DIR", raising=False)
    d = cpu_kernel.build_dir()
    assert d == cpu_kernel.build_dir()
    assert torch.__version__.replace("+", "_") in str(d)


# ------------------------------------------------------------------------------------------------------------------
# the build logic, with a fake compiler child


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache directory and no kernel loaded yet in this process; returns the directory."""
    d = tmp_path / "ext"
    monkeypatch.setenv("NEURODYN_EXT_DIR", str(d))
    for var in ("NEURODYN_NO_CPP_EXT", "NEURODYN_EXT_BUILD_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cpu_kernel, "_STATE", {})
    return d


def fake_build(monkeypatch, code: str) -> None:
    """Make the build child run ``code`` (``sys.argv[1]`` is the build directory) and the loader return "loaded"."""
    monkeypatch.setattr(cpu_kernel, "_build_env", lambda: dict(os.environ))
    monkeypatch.setattr(cpu_kernel, "_child_argv", lambda d: [sys.executable, "-c", textwrap.dedent(code), str(d)])
    monkeypatch.setattr(cpu_kernel, "_load", lambda d: "loaded")


def neurodyn_warnings(record) -> list[str]:
    return [str(w.message) for w in record if str(w.message).startswith("neurodyn")]


def one_line_warning() -> str:
    """Call get(), expect None and exactly one neurodyn warning of one line; return it."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cpu_kernel.get() is None
    messages = neurodyn_warnings(record)
    assert len(messages) == 1, messages
    assert "\n" not in messages[0]
    return messages[0]


# a build that hangs the way a real one does: ninja running a "compiler" in a process group of its own
HANGING_NINJA = """
    import pathlib, subprocess, sys
    d = pathlib.Path(sys.argv[1])
    (d / "build.ninja").write_text("rule cc\\n  command = echo $$$$ > compiler.pid && exec sleep 60\\nbuild x.o: cc\\n")
    subprocess.run(["ninja"], cwd=d)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(shutil.which("ninja") is None or not Path("/proc").is_dir(), reason="needs ninja and /proc")
@pytest.mark.slow
def test_build_timeout_stops_the_build_and_falls_back_with_one_line(fresh, monkeypatch, capfd):
    fake_build(monkeypatch, HANGING_NINJA)
    monkeypatch.setenv("NEURODYN_EXT_BUILD_TIMEOUT", "5")
    t0 = time.monotonic()
    msg = one_line_warning()
    assert time.monotonic() - t0 < 30
    assert "did not finish within 5 s" in msg and "pure-PyTorch path" in msg and "NEURODYN_EXT_BUILD_TIMEOUT" in msg
    pid = int((fresh / "compiler.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the compilers ninja started must be stopped with the build"
    assert not (fresh / "built").exists()
    assert capfd.readouterr().err.count(COMPILING) == 1
    assert cpu_kernel.get() is None  # decided once per process


def test_wait_for_another_build_is_bounded(fresh, monkeypatch, capfd):
    """Another live process holds the build lock (here: another open file of this process): wait, say so once, and
    give up at the timeout."""
    fake_build(monkeypatch, "raise SystemExit(3)")  # never reached
    monkeypatch.setenv("NEURODYN_EXT_BUILD_TIMEOUT", "1.5")
    fresh.mkdir(parents=True)
    import fcntl

    with open(fresh / "build.lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        t0 = time.monotonic()
        msg = one_line_warning()
        assert 1.4 < time.monotonic() - t0 < 20
    assert "another process was still compiling" in msg and "after 1.5 s" in msg and "pure-PyTorch path" in msg
    err = capfd.readouterr().err
    assert err.count("neurodyn: waiting for another process compiling the fused CPU kernels in") == 1
    assert COMPILING not in err


def test_waiter_uses_the_build_it_waited_for(fresh, monkeypatch, capfd):
    fake_build(monkeypatch, "raise SystemExit(3)")  # the waiter must not compile
    fresh.mkdir(parents=True)
    import fcntl

    result = []
    with open(fresh / "build.lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: result.append(cpu_kernel.get()), daemon=True)
        waiter.start()
        time.sleep(0.5)
        (fresh / "neurodyn_scan_cpu.so").write_text("built by the other process")
        (fresh / "built").write_text(cpu_kernel._source_tag())
    waiter.join(timeout=30)
    assert result == ["loaded"]
    assert COMPILING not in capfd.readouterr().err


@pytest.mark.slow
def test_stale_torch_lock_does_not_hang(tmp_path):
    """A build killed mid-way left torch's ``lock`` file (no owner recorded); torch's build polls it forever. The
    next build removes it and finishes. The fake child waits on that file exactly as torch's build does."""
    d = tmp_path / "ext"
    d.mkdir()
    (d / "lock").write_text("")
    child = textwrap.dedent("""
        import pathlib, sys
        from torch.utils.file_baton import FileBaton
        d = pathlib.Path(sys.argv[1])
        baton = FileBaton(str(d / "lock"))
        if baton.try_acquire():
            (d / "neurodyn_scan_cpu.so").write_text("fake")
            baton.release()
        else:
            baton.wait()
    """)
    script = textwrap.dedent(f"""
        import sys
        import neurodyn.ops.cpu_kernel as k
        k._build_env = lambda: None
        k._child_argv = lambda d: [sys.executable, "-c", {child!r}, str(d)]
        k._load = lambda d: "loaded"
        print(k.get())
    """)
    env = {**os.environ, "NEURODYN_EXT_DIR": str(d), "PYTHONPATH": _package_root()}
    env.pop("NEURODYN_NO_CPP_EXT", None)
    try:
        res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("a leftover torch lock file made the kernel build hang")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "loaded"
    assert res.stderr.count(COMPILING) == 1
    assert not (d / "lock").exists() and (d / "built").exists()


def test_missing_compiler_gives_one_line_and_none(fresh, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CXX", raising=False)
    msg = one_line_warning()
    assert "no C++ compiler (c++ or g++) on PATH" in msg
    assert "pure-PyTorch path" in msg and "NEURODYN_NO_CPP_EXT=1" in msg
    assert not fresh.exists()  # nothing written


def test_missing_ninja_gives_one_line_and_none(fresh, monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "g++").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "g++").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CXX", raising=False)
    msg = one_line_warning()
    assert "ninja is not on PATH" in msg and "pure-PyTorch path" in msg and "NEURODYN_NO_CPP_EXT=1" in msg


@pytest.mark.parametrize(
    "code,reason",
    [
        (
            "print('src/ncp_cpu.cpp:9:1: error: expected unqualified-id'); print('ninja: build stopped: subcommand "
            "failed.'); raise SystemExit(1)",
            "(src/ncp_cpu.cpp:9:1: error: expected unqualified-id)",
        ),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "(the build process was killed by signal 9)"),
    ],
)
def test_build_error_names_the_cause_and_what_to_do(fresh, monkeypatch, code, reason):
    fake_build(monkeypatch, code)
    msg = one_line_warning()
    assert reason in msg and "ninja: build stopped" not in msg
    assert f"{fresh / 'build.log'}" in msg and "NEURODYN_NO_CPP_EXT=1" in msg and f"delete {fresh}" in msg
    assert not (fresh / "built").exists()


def test_bad_timeout_value_is_named(fresh, monkeypatch):
    fake_build(monkeypatch, "raise SystemExit(3)")
    monkeypatch.setenv("NEURODYN_EXT_BUILD_TIMEOUT", "soon")
    assert "NEURODYN_EXT_BUILD_TIMEOUT must be a positive number of seconds, got 'soon'" in one_line_warning()


def test_build_runs_on_copies_of_the_sources_in_the_build_directory(fresh, monkeypatch):
    """What the compiler sees does not depend on the checkout: copies inside the (content-keyed) directory."""
    real_argv = cpu_kernel._child_argv
    fake_build(monkeypatch, "import pathlib, sys; (pathlib.Path(sys.argv[1]) / 'neurodyn_scan_cpu.so').write_text('')")
    assert cpu_kernel.get() == "loaded"
    spec = real_argv(fresh)[-1]
    assert str(cpu_kernel._CSRC) not in spec and str(fresh / "src" / "selective_scan_cpu.cpp") in spec
    for f in (*cpu_kernel._SOURCES, *cpu_kernel._HEADERS):
        assert (fresh / "src" / f.name).read_bytes() == f.read_bytes()
    assert (fresh / "built").read_text() == cpu_kernel._source_tag()


def _package_root() -> str:
    """The directory holding the ``neurodyn`` package these tests import (the checkout's ``src``)."""
    return str(Path(neurodyn.__file__).resolve().parents[1])


def _copy_checkout(dst: Path) -> Path:
    shutil.copytree(Path(_package_root()) / "neurodyn", dst / "neurodyn", ignore=shutil.ignore_patterns("__pycache__"))
    return dst


@pytest.mark.slow
def test_cache_directory_is_the_same_for_two_copies_of_the_sources(tmp_path, monkeypatch):
    env = {k: v for k, v in os.environ.items() if k != "NEURODYN_EXT_DIR"}
    dirs = []
    for name in ("a", "b"):
        root = _copy_checkout(tmp_path / name)
        res = subprocess.run(
            [sys.executable, "-c", "import neurodyn.ops.cpu_kernel as k; print(k.__file__); print(k.build_dir())"],
            env={**env, "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        where, d = res.stdout.split()
        assert where.startswith(str(root))
        dirs.append(d)
    monkeypatch.delenv("NEURODYN_EXT_DIR", raising=False)
    assert dirs[0] == dirs[1] == str(cpu_kernel.build_dir())


@pytest.mark.needs_kernel
@pytest.mark.slow
def test_second_checkout_reuses_the_build(tmp_path):
    """A clone with identical sources loads the build this session made (no compile, the library untouched)."""
    so = cpu_kernel.build_dir() / "neurodyn_scan_cpu.so"
    before = so.stat().st_mtime_ns
    root = _copy_checkout(tmp_path / "clone")
    script = (
        "import neurodyn.ops.cpu_kernel as k; ext = k.get(); print(k.__file__); "
        "print(ext.exp_test(__import__('torch').zeros(3)).tolist())"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("NEURODYN_NO_CPP_EXT", None)
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    where, values = res.stdout.strip().splitlines()
    assert where.startswith(str(root)) and values == "[1.0, 1.0, 1.0]"
    assert COMPILING not in res.stderr
    assert so.stat().st_mtime_ns == before


@pytest.mark.needs_kernel
def test_concurrent_get_returns_one_module():
    mods = []
    threads = [threading.Thread(target=lambda: mods.append(cpu_kernel.get())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(m) for m in mods}) == 1 and mods[0] is not None


@pytest.mark.needs_kernel
@pytest.mark.parametrize("dtype,tol,lo", [(torch.float32, 3e-7, -87.0), (torch.float64, 1e-15, -700.0)])
def test_kernel_exp_is_accurate(dtype, tol, lo):
    x = torch.linspace(lo, 80.0, 100001, dtype=dtype)
    y = cpu_kernel.get().exp_test(x)
    assert ((y - torch.exp(x)).abs() / torch.exp(x)).max() < tol


@pytest.mark.needs_kernel
@pytest.mark.parametrize("n", [1, 8, 16, 20, 32, 40])
def test_all_state_sizes_match_torch_path(n):
    """Covers every template specialisation of the kernel (padded n = 8, 16, 32, generic)."""
    a = scan_inputs(2, 3, 150, n, with_h0=True)
    leaves = [v.requires_grad_(True) for v in a.values() if v is not None]
    outs = []
    for backend in ("torch", "cpp"):
        out, last = selective_scan(
            a["u"],
            a["delta"],
            a["A"],
            a["B"],
            a["C"],
            a["D"],
            a["z"],
            a["delta_bias"],
            True,
            True,
            initial_state=a["initial_state"],
            backend=backend,
        )
        outs.append((out, last, torch.autograd.grad(out.sum() + last.sum(), leaves)))
    assert rel_err(outs[1][0], outs[0][0]) < 1e-12 and rel_err(outs[1][1], outs[0][1]) < 1e-12
    for g1, g0 in zip(outs[1][2], outs[0][2]):
        assert rel_err(g1, g0) < 1e-12


@pytest.mark.needs_kernel
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("n", [5, 16])
def test_scalar_A_rows_match_reference(dtype, tol, n):
    """Rows whose states share one A take the one-exponential path; mixed with per-state rows, padded
    (n = 5) or not, forward and every gradient equal the sequential reference."""
    a = scan_inputs(2, 4, 97, n, dtype=dtype, with_h0=True)
    A = a["A"].clone()
    A[0] = A[0, 0]  # rows 0 and 2 scalar, 1 and 3 per state
    A[2] = -1.7
    a["A"] = A
    leaves = [v.requires_grad_(True) for v in a.values() if v is not None]
    res = []
    for backend in ("ref", "cpp"):
        out = selective_scan(
            a["u"],
            a["delta"],
            a["A"],
            a["B"],
            a["C"],
            a["D"],
            a["z"],
            a["delta_bias"],
            True,
            True,
            initial_state=a["initial_state"],
            backend=backend,
        )
        res.append((out, grads(out, leaves)))
    (o0, l0), g0 = res[0]
    (o1, l1), g1 = res[1]
    assert rel_err(o1, o0) < tol and rel_err(l1, l0) < tol
    for x, y in zip(g1, g0):
        assert rel_err(x, y) < tol
