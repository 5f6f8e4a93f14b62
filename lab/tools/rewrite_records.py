#!/usr/bin/env python3
"""Rewrite the records of the old layout (``benchmarks/results/<experiment>/``) into the laboratory's
(``lab/records/<paper>/<claim>/``). Run once, from the repository root, with the library on the path:

    PYTHONPATH=src:lab python lab/tools/rewrite_records.py [--old benchmarks/results] [--new lab/records] [--dry-run]

What it does to every record (the numbers the pages cite are copied as they are):

* folders: :data:`CLAIMS` names the claim of every experiment folder (the UEA/UCR comparisons nest in their report's
  claim: ``uea_tuned_<file>-<variant>-<budget>`` -> ``time_series/uea/<file>-<variant>-<budget>``);
* one record per run: a run's ``run_result.json`` (the worker's copy) is merged into its ``result.json`` (its
  ``final`` and ``test_at_best`` metric dictionaries join the record; the config it held is the run's
  ``config.yaml``), an experiment's ``results.json`` that repeats its ``runs/<run>/result.json`` one for one is
  dropped, and ``nac_repro.jsonl`` becomes ``results.json``;
* configs in today's layout: every ``config.yaml``'s model section goes through the library's
  ``upgrade_config`` (keys of older layouts moved), and every ``model.<key>=`` override of a record is spelled as
  today (``model.ssm_heads=4`` -> ``model.ssm.heads=4``). This script is the only lab code that calls those
  compatibility functions, and only this once;
* paths: relative to the repository; a folder outside it is a placeholder (``<stores>/`` for the converted UEA/UCR
  files); no citation of the old layout (``benchmarks/results/X`` -> ``lab/records/<claim>``, pages ->
  ``lab/pages/``, drivers -> their lab modules, ``neurodyn bench NAME`` of a lab experiment ->
  ``python -m neurodyn_lab run <claim>``);
* size: compact JSON (no indentation; the pages read records through code); the UEA comparisons' validation-time
  curves (``curve_seconds``, drawn only in ``error_vs_time.png``) to the millisecond; plots re-encoded with a
  256-colour palette; the 25 Nov UEA comparisons' ``error_vs_time.png`` left out (the later comparisons' were never
  tracked).

It refuses to write a record that still names an absolute path or the old layout, and prints what it dropped.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

#: old experiment folder -> claim (``<paper>/<claim>``)
CLAIMS = {
    "chonn_order_v3": "chonn/order",
    "chonn_order_long_v3": "chonn/order_60ep",
    "protocol_chonn_order": "chonn/order_protocol",
    "protocol_chonn_fig3a": "chonn/fig3a_protocol",
    "protocol_chonn_fig3c": "chonn/fig3c_protocol",
    "chonn_merge_select": "chonn/merge_select",
    **{
        f"chonn_merge_order_{m}": f"chonn/merge_order_{m}"
        for m in ("mean", "norm", "per_direction", "skip_scale", "sum")
    },
    **{f"chonn_merge_poisson_{m}": f"chonn/merge_poisson_{m}" for m in ("mean", "sum")},
    **{f"chonn_poisson_v3_{m}": f"chonn/poisson_{m}" for m in ("clip", "norm", "rms", "cascade")},
    "chonn_poisson_long_v3": "chonn/poisson_long",
    "chonn_darcy_v2": "chonn/darcy",
    "chonn_darcy_long_v2": "chonn/darcy_long",
    "chonn_rollout_v2": "chonn/rollout",
    "chonn_rollout_ns40_v2": "chonn/rollout_ns40",
    "chonn_speed": "chonn/speed",
    "geomano_compare": "geomano/table1",
    "geomano_ablation": "geomano/table3",
    "geomano_kernel": "geomano/kernel",
    "geomano_val": "geomano/paper_vs_ours",
    "protocol_geomano_lamo_equal": "geomano/lamo_equal_protocol",
    "lamo_i19": "lamo/darcy_heads",
    "lamo_i19_s1": "lamo/darcy_heads",
    "lamo_i19_s2": "lamo/darcy_heads",
    "lamo_ns_i19": "lamo/ns_heads",
    "lamo_scaling": "lamo/scaling",
    "protocol_lamo_config_darcy": "lamo/darcy_config_protocol",
    "nac_repro": "nac/table1",
    "nac_runtime": "nac/table5",
    "operators_darcy": "operators/darcy",
    "operators_elasticity": "operators/elasticity",
    "operators_pipe": "operators/pipe",
    "resolution_transfer": "operators/resolution_transfer",
    "resolution_transfer_lamo_tokens": "operators/resolution_transfer_tokens",
    "ns_resolution": "operators/ns_resolution",
    "protocol_transolver_tuning": "operators/transolver_tuning_protocol",
    "protocol_darcy_50": "operators/darcy_50ep_protocol",
    "protocol_ns4": "operators/ns4_protocol",
    "protocol_ns4_paper_configs": "operators/ns4_paper_configs_protocol",
    "stssm_tables": "stssm/tables",
    "stssm_speed": "stssm/speed",
    "protocol_stssm_ks": "stssm/table1_protocol",
    "protocol_stssm_table5_32": "stssm/table5_protocol",
    "step_speed": "speed/step_speed",
    "compile_speed": "speed/compile_speed",
    "head_scan_speed": "speed/head_scan_speed",
    "lamo_i17d": "speed/accuracy_lamo",
    "geomano_i17": "speed/accuracy_geomano",
    "stssm_i17": "speed/accuracy_stssm",
    "uea_tuned": "time_series/uea",
    "uea_sequences": "time_series/uea_25nov",
    "uea_tuning": "time_series/uea_tuning",
}
PAGES = ("lamo", "geomano", "stssm", "chonn", "nac", "operators", "speed", "protocol")
#: old driver file (under benchmarks/) -> its lab module
DRIVERS = {
    "chonn_experiments": "chonn.experiments",
    "chonn_speed": "chonn.speed",
    "geomano_ablation": "geomano.table3",
    "geomano_compare": "geomano.table1",
    "geomano_kernel": "geomano.kernel",
    "lamo_scaling": "lamo.scaling",
    "nac_repro": "nac.table1",
    "nac_runtime": "nac.table5",
    "tools/nac_profile": "nac.profile",
    "ns_resolution": "operators.ns_resolution",
    "operators_darcy": "operators.darcy",
    "resolution_transfer": "operators.resolution_transfer",
    "protocol": "protocol",
    "stssm_speed": "stssm.speed",
    "stssm_tables": "stssm.tables",
    "uea_sequences": "time_series.uea",
    "uea_tuning": "time_series.uea_tuning",
}
#: the library's speed benchmarks (they stay in the library): script -> ``neurodyn bench`` name
LIBRARY_BENCH = {
    "step_speed": "step-speed",
    "compile_speed": "compile-speed",
    "head_scan_speed": "head-scan-speed",
    "scan": "scan",
    "gpu": "gpu",
    "generators": "generators",
    "fno_speed": "fno-speed",
}
#: ``neurodyn bench NAME`` of the experiments now in the lab -> ``python -m neurodyn_lab run NAME``
LAB_COMMANDS = {
    "nac_runtime": "nac/table5",
    "nac_repro": "nac/table1",
    "geomano-ablation": "geomano/table3",
    "resolution-transfer": "operators/resolution_transfer",
    "chonn-order": "chonn/order",
    "chonn-poisson": "chonn/poisson",
    "chonn-darcy": "chonn/darcy",
    "chonn-rollout": "chonn/rollout",
    "chonn-speed": "chonn/speed",
    "ns-resolution": "operators/ns_resolution",
    "protocol": "protocol",
    "geomano-compare": "geomano/table1",
    "geomano-kernel": "geomano/kernel",
    "lamo-scaling": "lamo/scaling",
    "operators-darcy": "operators/darcy",
    "uea-sequences": "time_series/uea",
    "uea-tuning": "time_series/uea_tuning",
    "stssm-speed": "stssm/speed",
    "stssm-table1": "stssm/table1",
    "stssm-table5": "stssm/table5",
}
#: folders outside the repository the records named -> placeholder
OUTSIDE = {
    "/work/uea_stores/": "<stores>/",
    "/work/main/runs/bench/uea/stores/": "<stores>/",
    "/tmp/neurodyn_nac_repro/": "<runs>/",
}
MACHINE = re.compile(r"(?:^|[\s=(\[,;:'\"])(?:/[\w.-]+/|~/|[A-Za-z]:[\\/])")


def claim_of(old: str) -> str | None:
    """The claim of old experiment folder ``old`` (None: not rewritten)."""
    if old in CLAIMS:
        return CLAIMS[old]
    m = re.fullmatch(r"uea_tuned_(.+)", old)
    if m:
        return f"time_series/uea/{m.group(1)}"  # frontend_<file>-draw<k> and <file>-<variant>-<budget>
    m = re.fullmatch(r"uea_(.+-.+)", old)
    if m:
        return f"time_series/uea_25nov/{m.group(1)}"
    return None


def _replacements(olds: list[str]) -> list[tuple[re.Pattern, str]]:
    subs: list[tuple[str, str]] = []
    for old in sorted(olds, key=len, reverse=True):  # lamo_i19_s1 before lamo_i19
        if claim_of(old):
            subs.append((rf"benchmarks/results/{re.escape(old)}(?![\w-])", f"lab/records/{claim_of(old)}"))
    subs += [(rf"benchmarks/results/{p}\.md", f"lab/pages/{p}.md") for p in PAGES]
    subs += [
        (r"benchmarks/results/chonn_merge_order_<merge>", "lab/records/chonn/merge_order_<merge>"),
        (r"benchmarks/results/", "lab/records/"),
        (r"benchmarks/RESULTS\.md", "lab/RESULTS.md"),
        (r"benchmarks/README\.md", "lab/README.md"),
    ]
    for script, name in LIBRARY_BENCH.items():
        subs.append((rf"(?:\S*python3?\s+)?benchmarks/{script}\.py", f"neurodyn bench {name}"))
    for script, module in DRIVERS.items():
        subs.append((rf"(\S*python3?)\s+benchmarks/{script}\.py", rf"\1 -m neurodyn_lab.{module}"))
        subs.append((rf"benchmarks/{script}\.py", f"lab/neurodyn_lab/{module.replace('.', '/')}.py"))
    for name, new in sorted(LAB_COMMANDS.items(), key=lambda kv: len(kv[0]), reverse=True):
        subs.append(
            (rf"(?:\S*python3?\s+-m\s+)?neurodyn bench {re.escape(name)}(?![\w-])", f"python -m neurodyn_lab run {new}")
        )
    for old in sorted(olds, key=len, reverse=True):  # a report's table cell naming its old folder: | protocol_ns4 |
        if claim_of(old):
            subs.append((rf"(?<=\| ){re.escape(old)}(?= \|)", claim_of(old)))
    subs += [(r"PYTHONPATH=\$PWD/src ", "")]
    subs += [(re.escape(prefix), placeholder) for prefix, placeholder in OUTSIDE.items()]
    subs += [(re.escape(f"{ROOT}/"), ""), (r"/work/main/", "")]
    return [(re.compile(a), b) for a, b in subs]


class Rewriter:
    def __init__(self, old_root: Path, new_root: Path, dry_run: bool):
        self.old_root, self.new_root, self.dry_run = old_root, new_root, dry_run
        self.subs = _replacements([p.name for p in old_root.iterdir() if p.is_dir()])
        self.dropped: list[str] = []
        self.written = 0

    # -- strings, configs ---------------------------------------------------------------------------------------
    def text(self, s: str) -> str:
        for pattern, new in self.subs:
            s = pattern.sub(new, s)
        return s

    def value(self, v):
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return self.text(v) if isinstance(v, str) else v

    @staticmethod
    def model_name(rec: dict) -> str | None:
        """The model a record trained (for its override keys): its ``model`` when that is a registered model, else
        its preset's (or the ``@model=`` / ``model_from`` preset's)."""
        from neurodyn.experiments import load_experiment
        from neurodyn.models import available

        if rec.get("model") in available():
            return rec["model"]
        swap = [o.split("=", 1)[1] for o in rec.get("overrides", []) if isinstance(o, str) and o.startswith("@model=")]
        preset = rec.get("model_from") or (swap[0] if swap else None) or rec.get("data_from") or rec.get("preset")
        try:
            return load_experiment(preset, "cpu")["model"]["name"] if isinstance(preset, str) else None
        except Exception:  # noqa: BLE001 - a label that is no preset: no model known, overrides kept
            return None

    @staticmethod
    def override(name: str, text: str) -> str:
        """``model.<key>=value`` spelled in today's layout (the library's ``move_fields``)."""
        from neurodyn.models.registry import move_fields

        key, sep, value = text.partition("=")
        if not sep or not key.startswith("model."):
            return text
        parts = key.split(".")[1:]
        nested: dict = {}
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
        moved = move_fields(name, nested)

        def leaves(d, prefix=()):
            for k, v in d.items():
                yield from (leaves(v, (*prefix, k)) if isinstance(v, dict) else [((*prefix, k), v)])

        ((path, _),) = list(leaves(moved))
        return f"model.{'.'.join(path)}={value}"

    def record(self, rec):
        if not isinstance(rec, dict):
            return rec
        rec = self.value(rec)
        ovs = rec.get("overrides")
        if isinstance(ovs, list) and any(isinstance(o, str) and o.startswith("model.") for o in ovs):
            name = self.model_name(rec)
            if name:
                rec["overrides"] = [self.override(name, o) if isinstance(o, str) else o for o in ovs]
        sets = rec.get("set")  # nac_repro's --set overrides: NAC model keys
        if isinstance(sets, list) and "variant" in rec and any(str(o).startswith("model.") for o in sets):
            rec["set"] = [self.override("nac", o) if isinstance(o, str) else o for o in sets]
        if isinstance(rec.get("curve_seconds"), list):
            rec["curve_seconds"] = [round(x, 3) if isinstance(x, float) else x for x in rec["curve_seconds"]]
        return rec

    def config(self, text: str) -> str:
        from neurodyn.models import make_config
        from neurodyn.models.registry import upgrade_config

        cfg = self.value(yaml.safe_load(text))
        model = cfg.get("model")
        if isinstance(model, dict) and isinstance(model.get("name"), str):
            name = model["name"]
            rest = upgrade_config(name, {k: v for k, v in model.items() if k != "name"})
            make_config(name, rest)  # today's layout: the library builds it without any shim
            cfg["model"] = {"name": name, **rest}
        return yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)

    # -- writing -------------------------------------------------------------------------------------------------
    def check(self, where: Path, text: str) -> None:
        bad = [m.group(0) for m in MACHINE.finditer(text)]
        if bad or "benchmarks/" in text:
            raise SystemExit(f"{where}: still names {bad[:3] or 'benchmarks/'}")

    def write(self, path: Path, data: bytes | str) -> None:
        if isinstance(data, str):
            if path.suffix in (".json", ".jsonl", ".yaml", ".md"):
                self.check(path, data)
            data = data.encode()
        self.written += 1
        if self.dry_run:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            raise SystemExit(f"{path} is written twice: two experiments map onto one file")
        path.write_bytes(data)

    @staticmethod
    def dumps(value) -> str:
        return json.dumps(value, separators=(",", ":"), allow_nan=True) + "\n"

    def png(self, src: Path) -> bytes:
        """A plot re-encoded with an adaptive 256-colour palette (the larger of the two kept out: never bigger)."""
        import io

        from PIL import Image

        with Image.open(src) as img:
            out = io.BytesIO()
            img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, "PNG", optimize=True)
        data = src.read_bytes()
        return out.getvalue() if len(out.getvalue()) < len(data) else data

    # -- one experiment folder -----------------------------------------------------------------------------------
    def experiment(self, old: Path) -> None:
        claim = claim_of(old.name)
        if claim is None:
            raise SystemExit(f"{old.name}: no claim for this experiment folder (add it to CLAIMS)")
        new = self.new_root / claim
        runs = sorted((old / "runs").glob("*/result.json")) if (old / "runs").is_dir() else []
        store = old / "results.json"
        drop_store = False
        if store.exists() and runs:
            listed = json.loads(store.read_text())
            loose = {f.parent.name: json.loads(f.read_text()) for f in runs}
            drop_store = len(listed) == len(loose) and all(loose.get(r.get("run")) == r for r in listed)
            if not drop_store:
                raise SystemExit(f"{store}: does not repeat runs/*/result.json one for one; decide by hand")
            self.dropped.append(f"{old.name}/results.json (the same {len(listed)} records as its runs/*/result.json)")
        for f in sorted(p for p in old.rglob("*") if p.is_file()):
            rel = f.relative_to(old)
            dest = new / rel
            if f == store and drop_store:
                continue
            if f.name == "run_result.json":
                continue  # merged into its result.json below
            if f.suffix == ".png":
                if (
                    re.fullmatch(r"uea_.+-.+", old.name)
                    and not old.name.startswith("uea_tuned")
                    and f.name == "error_vs_time.png"
                ):
                    self.dropped.append(f"{old.name}/{f.name} (a plot of the 25 Nov comparison; no page links it)")
                    continue
                self.write(dest, self.png(f))
            elif f.name == "result.json":
                rec = self.record(json.loads(f.read_text()))
                twin = f.parent / "run_result.json"
                if twin.exists():
                    self.merge(rec, json.loads(twin.read_text()), f.parent)
                    self.dropped.append(f"{old.name}/{rel.parent}/run_result.json (merged into result.json)")
                self.write(dest, self.dumps(rec))
            elif f.suffix == ".jsonl" and f.name != "metrics.jsonl":  # nac_repro.jsonl: a list of records
                recs = [self.record(json.loads(x)) for x in f.read_text().splitlines() if x.strip()]
                self.write(dest.with_name("results.json"), self.dumps(recs))
                self.dropped.append(f"{old.name}/{f.name} (now results.json, the same {len(recs)} records)")
            elif f.name == "metrics.jsonl":
                lines = [
                    json.dumps(json.loads(x), separators=(",", ":")) for x in f.read_text().splitlines() if x.strip()
                ]
                self.write(dest, "\n".join(lines) + "\n")
            elif f.suffix == ".json":
                data = json.loads(f.read_text())
                data = [self.record(r) for r in data] if isinstance(data, list) else self.record(data)
                self.write(dest, self.dumps(data))
            elif f.name == "config.yaml":
                self.write(dest, self.config(f.read_text()))
            elif f.suffix == ".md":
                self.write(dest, self.text(f.read_text()))
            else:
                raise SystemExit(f"{f}: no rule for this kind of file")

    def merge(self, rec: dict, worker: dict, run: Path) -> None:
        """Fold a run's ``run_result.json`` (the worker's copy of its :class:`RunResult`) into its record: the full
        test metrics of the final and of the best-validation model; the rest repeats the record or its config."""
        for key in ("final", "test_at_best"):
            if worker.get(key) and key not in rec:
                rec[key] = worker[key]
        for key, mine in (("epochs", "epochs"), ("params", "params"), ("train_seconds", "train_seconds")):
            if key in worker and mine in rec and worker[key] != rec[mine]:
                raise SystemExit(f"{run}: run_result.json and result.json disagree on {key}")
        cfg = worker.get("cfg")
        stored = run / "config.yaml"
        if cfg and stored.exists():
            have = yaml.safe_load(self.config(stored.read_text()))
            want = yaml.safe_load(self.config(yaml.safe_dump(cfg)))
            if {k: v for k, v in have.items() if k != "description"} != {
                k: v for k, v in want.items() if k != "description"
            }:
                raise SystemExit(f"{run}: the config of run_result.json is not the run's config.yaml")

    def run(self) -> None:
        for old in sorted(p for p in self.old_root.iterdir() if p.is_dir()):
            self.experiment(old)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--new", type=Path, default=ROOT / "lab" / "records")
    ap.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    a = ap.parse_args(argv)
    r = Rewriter(a.old, a.new, a.dry_run)
    r.run()
    print(f"{r.written} files {'checked' if a.dry_run else 'written'} under {a.new}")
    print("dropped:\n" + "\n".join(f"  {d}" for d in r.dropped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
