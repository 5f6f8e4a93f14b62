"""Compile the fused CPU kernels (``src/neurodyn/ops/csrc/*.cpp``) against the headers of other torch releases.

    python benchmarks/tools/check_kernel_headers.py                       # the installed torch only
    python benchmarks/tools/check_kernel_headers.py --torch 2.4.1 2.11.0  # + those releases' headers (downloaded)
    python benchmarks/tools/check_kernel_headers.py --headers DIR ...     # + already extracted ``torch/include`` trees

pyproject admits every torch >= 2.4, but a machine builds the kernels against one torch only. This script checks the
others without installing them: for each ``--torch`` version it fetches the wheel with pip (``pip download --no-deps
--only-binary=:all:``; PyPI's Linux wheels are CUDA builds of about 1 GB, fetched one at a time), extracts only
``torch/include/**`` into ``--cache`` (default ``/tmp/neurodyn-torch-headers/<version>``; a version found there is not
fetched again) and deletes the wheel. Then every source is compiled with ``g++ -fsyntax-only`` (``$CXX`` if set), the
flags ``neurodyn.ops.cpu_kernel`` builds with and the include directories and defines of torch's ``cpp_extension``,
once per C++ standard in ``--std`` (default ``c++17 c++20``: torch's ``cpp_extension`` passes ``-std=c++17`` up to
2.11 and ``-std=c++20`` from 2.12).

Prints one line per (torch, standard, source) with the first compiler error, if any; exits 1 when one fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from neurodyn.ops import cpu_kernel

DEFAULT_CACHE = Path(tempfile.gettempdir()) / "neurodyn-torch-headers"
# torch.utils.cpp_extension's defines for a CPU extension (the name is the one cpu_kernel loads)
DEFINES = ["-DTORCH_EXTENSION_NAME=neurodyn_scan_cpu", "-DTORCH_API_INCLUDE_EXTENSION_H"]


def fetch_headers(version: str, cache: Path) -> Path:
    """``<cache>/<version>/torch/include``, fetched from the torch wheel of ``version`` if not there yet."""
    include = cache / version / "torch" / "include"
    if include.is_dir():
        return include
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--quiet",
                f"torch=={version}",
                "-d",
                tmp,
            ],
            check=True,
        )
        wheel = next(Path(tmp).glob("torch-*.whl"))
        staged = Path(tmp) / "extracted"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(staged, [m for m in z.namelist() if m.startswith("torch/include/")])
        wheel.unlink()  # before the copy: one wheel on disk at a time
        (cache / version).mkdir(parents=True, exist_ok=True)
        shutil.move(str(staged / "torch"), str(cache / version / "torch"))
    return include


def installed_headers() -> Path:
    """The ``torch/include`` of the torch this Python imports."""
    import torch

    return Path(torch.__file__).parent / "include"


def compile_flags(include: Path, std: str) -> list[str]:
    """The g++ flags of a syntax-only build of one source against ``include`` (a ``torch/include`` directory)."""
    flags = [f for f in cpu_kernel._CFLAGS if f != "-O3"]  # optimisation does not change what compiles
    return [
        "-fsyntax-only",
        f"-std={std}",
        *flags,
        *DEFINES,
        "-isystem",
        str(include),
        "-isystem",
        str(include / "torch" / "csrc" / "api" / "include"),
    ]


def first_error(output: str) -> str:
    """The first ``error:`` line of a compiler's output (else its last line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or ["failed"])[0][:200]


def check(label: str, include: Path, stds: list[str], cxx: str) -> list[tuple[str, str, str, str]]:
    """``(torch, std, source, "ok" or the first error)`` of every source under every standard."""
    rows = []
    for std in stds:
        for source in cpu_kernel._SOURCES:
            proc = subprocess.run(
                [cxx, *compile_flags(include, std), str(source)], capture_output=True, text=True, cwd=source.parent
            )
            rows.append((label, std, source.name, "ok" if proc.returncode == 0 else first_error(proc.stderr)))
            print(f"torch {label:>8s}  -std={std}  {source.name:<24s}  {rows[-1][3]}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--torch", nargs="*", default=[], metavar="VERSION", help="torch releases whose headers to fetch")
    p.add_argument(
        "--headers",
        nargs="*",
        default=[],
        metavar="DIR",
        help="extracted torch/include directories (or folders holding torch/include)",
    )
    p.add_argument("--std", nargs="+", default=["c++17", "c++20"], help="C++ standards to compile under")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where fetched headers are kept")
    p.add_argument("--no-installed", action="store_true", help="skip the installed torch's headers")
    args = p.parse_args(argv)
    cxx = os.environ.get("CXX", "").strip() or "g++"
    if not shutil.which(cxx.split()[0]):
        print(f"no C++ compiler {cxx!r} on PATH (set CXX)", file=sys.stderr)
        return 2
    targets: list[tuple[str, Path]] = []
    if not args.no_installed:
        import torch

        targets.append((torch.__version__.split("+")[0], installed_headers()))
    for d in map(Path, args.headers):
        include = d / "torch" / "include" if (d / "torch" / "include").is_dir() else d
        if not (include / "ATen").is_dir():
            print(f"{d} holds no torch headers (expected ATen/ under it or under torch/include)", file=sys.stderr)
            return 2
        targets.append((d.name, include))
    args.cache.mkdir(parents=True, exist_ok=True)
    for version in args.torch:
        targets.append((version, fetch_headers(version, args.cache)))
    rows = [row for label, include in targets for row in check(label, include, args.std, cxx)]
    failed = [r for r in rows if r[3] != "ok"]
    print(
        f"{len(rows) - len(failed)} of {len(rows)} compiled "
        f"(torch {', '.join(label for label, _ in targets)}; -std {', '.join(args.std)})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
