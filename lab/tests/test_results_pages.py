"""The summary page shows what its records hold: numbers a row of lab/RESULTS.md cites are recomputed here
from the run records under lab/records/ (mean and sample std over seeds, CPU hours, validation choices) and
must appear, formatted as on the page, in that row; and every ``page.md#anchor`` link of the benchmark pages
points at a heading that exists.

Each check names a row by the start of its text, the records it reads and how the page formats the result. A
number edited on the page without its record, a record re-run without the page, a renamed heading or a test-selected
number put where the validation-selected one belongs fails here. Only reads records (no training).
"""

import json
import re
import statistics
from pathlib import Path

import pytest
import uea_rules

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab"
RESULTS = LAB / "records"
SUMMARY = LAB / "RESULTS.md"
ERRS = ("rel_l2_point", "rel_l2_spec", "rel_l2_der")  # the CHONN order benchmark's three errors (Fig. 3)


# ------------------------------------------------------------------------------------------------
# records


def runs(experiment: str, *names: str) -> list[dict]:
    """The ``result.json`` of ``<experiment>/runs/<name>`` for each name (all must exist)."""
    out = []
    for name in names:
        path = RESULTS / experiment / "runs" / name / "result.json"
        assert path.exists(), f"record missing: {path.relative_to(ROOT)}"
        out.append(json.loads(path.read_text()))
    return out


def seeds(experiment: str, stem: str, seeds=(0, 1, 2)) -> list[dict]:
    return runs(experiment, *(f"{stem}-s{s}" for s in seeds))


def every_record(experiment: str) -> list[dict]:
    """Every record of ``<experiment>``: its ``results.json`` (a comparison whose run folders are not kept), else
    each ``runs/<run>/result.json`` in run-name order."""
    store = RESULTS / experiment / "results.json"
    if store.exists():
        return json.loads(store.read_text())
    found = sorted((RESULTS / experiment).glob("runs/*/result.json"))
    assert found, f"no records in {experiment}"
    return [json.loads(f.read_text()) for f in found]


def field(rs: list[dict], key: str) -> list[float]:
    return [r[key] for r in rs]


def ms(values: list[float], digits: int = 4, std_sig: int | None = None) -> str:
    """``mean ± std`` as the page writes it: the mean to ``digits`` decimals, the sample std to the same decimals
    or, with ``std_sig``, to that many significant digits (the CHONN reports)."""
    m, s = statistics.mean(values), statistics.stdev(values)
    std = f"{s:.{std_sig}g}" if std_sig else f"{s:.{digits}f}"
    return f"{m:.{digits}f} ± {std}"


def mean(values: list[float], digits: int = 4) -> str:
    return f"{statistics.mean(values):.{digits}f}"


def cpu_hours(rs: list[dict], digits: int = 1) -> str:
    return f"{sum(r['train_seconds'] for r in rs) / 3600:.{digits}f} CPU-h"


def chonn_gains(experiment: str, seeds_=(0, 1, 2)) -> str:
    """``-0.10 / -0.38 / -0.03``: mean over seeds of 1 - der(o_n) / der(d_n) for T2 / T3 / T4."""
    records = every_record(experiment)
    recs = {(r["target"], r["model"], r["seed"]): r for r in records}
    gains = []
    for t in (2, 3, 4):
        g = [1 - recs[(t, f"o{t}", s)]["rel_l2_der"] / recs[(t, f"d{t}", s)]["rel_l2_der"] for s in seeds_]
        gains.append(f"{statistics.mean(g):.2f}")
    return " / ".join(gains)


def nac_val(task: str, variant: str, metric: str) -> list[float]:
    recs = every_record("nac/table1")
    vals = [r["final"][metric] for r in recs if r.get("tag") == "val" and r["task"] == task and r["variant"] == variant]
    assert len(vals) == 3, (task, variant, len(vals))
    return vals


def uea_nac_choice(variant: str, budget: str = "400ep") -> str:
    """NAC's test accuracy on the five classification files of the UEA evidence (``time_series/uea/*``), of the profile
    (paper, tuned or conv) chosen on validation as nac.md states the rule (the final model's validation accuracy, then
    the best; the test file never takes part), as ``0.983 / 0.751 / 0.930 / 0.482 / 0.964``: recomputed by the tests'
    own code (uea_rules.py), not the driver's."""
    cells = []
    for ds in uea_rules.CLASSIFICATION:
        recs = uea_rules.uea(f"{ds}-{variant}-{budget}")
        label = uea_rules.choose([recs], set(uea_rules.NAC), True, "final")
        cells.append(f"{uea_rules.uea_test(recs, label):.3f}")
    return " / ".join(cells)


def uea_floor_counts(budget: str, draws: int = 0) -> str:
    """The UEA floors' counts at ``budget`` (best model, best neural model and NAC at or above 1-NN ED; MiniRocket
    within 3 points of its published accuracy), recomputed by uea_rules.py; with ``draws``, every choice made on the
    comparison's validation split and those of ``draws`` more."""
    f = uea_rules.uea_floors(budget, draws)
    within = sum(abs(f["rocket"][d] - p) <= 0.03 for d, p in uea_rules.MINIROCKET_PUBLISHED.items())
    return f"{uea_rules.counts_text(f)}; MiniRocket within 3 points of the published accuracy on {within} of 3"


def uea_regression_floor(budget: str, draws: int = 0) -> str:
    """Covid3Month's floor at ``budget``: ``<model chosen on validation>: <test RMSE>, R^2 <r2> against the
    training mean <RMSE>``."""
    label, rmse, r2, train_mean = uea_rules.uea_floors(budget, draws)["covid"]
    return f"{label}: {rmse:.5f}, R^2 {r2:.3f} against the training mean {train_mean:.5f}"


def per_sample(model: str, baseline: str) -> str:
    d = json.loads((RESULTS / "speed" / "step_speed" / "step_speed.json").read_text())
    t, b = d["threads"]["1"], d["batch"]
    return f"{(t[model] / b[model]) / (t[baseline] / b[baseline]):.2f}"


# ------------------------------------------------------------------------------------------------
# what each summary row must show


def long_read(core: str, name: str) -> str:
    """The long-series test read of ``core``'s chosen run on ``name``, as the row prints it."""
    (path,) = (RESULTS / "time_series" / "long_series" / "test_reads").glob(f"{core}-*-{name}.json")
    return f"{json.loads(path.read_text())['test_accuracy']:.3f}"


def long_base(model: str, name: str) -> str:
    return f"{runs('time_series/long_series', f'{model}-raw-{name}')[0]['test_accuracy']:.3f}"


def long_minutes() -> str:
    """Minutes of the longest run the test reads used (the 15-minute floor's)."""
    folder = RESULTS / "time_series" / "long_series"
    reads = [json.loads(p.read_text())["run"] for p in (folder / "test_reads").glob("*.json")]
    return f"{max(r['wall_seconds'] for r in runs('time_series/long_series', *reads)) / 60:.1f}"


def _checks():
    ks = {m: seeds("stssm/table1_protocol", f"{m}-r64") for m in ("stssm", "mi-ffno", "s4ffno")}
    t5 = {m: seeds("stssm/table5_protocol", m) for m in ("stssm", "stssm-ff", "stssm-vm", "fno2d-r")}
    ns4 = {
        m: seeds("operators/ns4_protocol", f"ns4-{m}")
        for m in ("lamo", "geomano-eqp", "transolver", "fno", "fno-small")
    }
    ns4p = seeds("operators/ns4_paper_configs_protocol", "ns4-geomano-paper-eqp")
    eq = {m: seeds("geomano/lamo_equal_protocol", f"darcy-{m}") for m in ("lamo", "geomano-eqp", "geomano-paper-eqp")}
    d50 = {m: seeds("operators/darcy_50ep_protocol", m) for m in ("transolver-lr2e-3-m16", "fno-small", "fno")}
    tuned10 = seeds("operators/transolver_tuning_protocol", "transolver-lr2e-3-m16")
    co = {}
    for r in every_record("chonn/order_protocol"):
        co.setdefault(f"T{r['target']}-{r['model']}", []).append(r)
    assert all(len(v) == 3 for v in co.values()) and len(co) == 8
    chonn_all = [r for v in co.values() for r in v]

    c3 = {}
    fig3c = every_record("chonn/fig3c_protocol")
    for r in sorted(fig3c, key=lambda r: r["seed"]):
        c3.setdefault(r["model"], []).append(r)
    assert {m: len(v) for m, v in c3.items()} == {"2x3": 3, "3x2": 3}
    co_t4 = sorted(co["T4-d4"], key=lambda r: r["seed"])

    def lower(rs):  # per error, the seeds where the composite is below depth 4: "2 / 3 / 2"
        return " / ".join(str(sum(a[m] < b[m] for a, b in zip(rs, co_t4))) for m in ERRS)

    fig3a = every_record("chonn/fig3a_protocol")
    assert len(fig3a) == 12
    o42 = {(r["target"], int(r["model"][1:])): r for r in chonn_all + fig3a if r["seed"] == 42 and r["model"][0] == "o"}

    def falls(metric):  # steps from order n to n + 1 (n = 1-3, T1-T4) where the error falls
        return sum(o42[(t, n + 1)][metric] < o42[(t, n)][metric] for t in (1, 2, 3, 4) for n in (1, 2, 3))

    assert falls("rel_l2_spec") == falls("rel_l2_point")  # the page says "9 of 12 steps each"

    def der(key):
        return ms(field(co[key], "rel_l2_der"), 3, std_sig=2)

    def point(key):
        return mean(field(co[key], "rel_l2_point"), 3)

    lamo_h4 = seeds("lamo/darcy_heads", "lamo-h4")
    op = {m: seeds("operators/darcy", m) for m in ("transolver", "fno", "fno-small")}
    gc = {m: seeds("geomano/table1", m) for m in ("darcy-geomano", "darcy-geomano-eq6")}
    gc |= {m: seeds("geomano/table1", m, (0, 1)) for m in ("ns-geomano", "ns-transolver", "ns-fno")}
    lamo_ns = seeds("lamo/ns_heads", "lamo-h16")
    gval = every_record("geomano/paper_vs_ours")
    gv = {m: [r for r in gval if r["label"] == m] for m in ("geomano", "geomano-paper")}
    st = {
        m: seeds("stssm/tables", m)
        for m in ("stssm-r64", "s4ffno-r64", "stssm-r32", "s4ffno-r32", "stssm", "stssm-ff", "stssm-vm", "fno2d-r")
    }

    def ro(m, d=4):
        return mean(field(st[m], "rel_l2"), d)

    cpu = {
        "cpu: Darcy, LaMO below Transolver": (
            "| Darcy: LaMO below Transolver",
            [f"{ms(field(lamo_h4, 'final_rel_l2'))} † vs {ms(field(op['transolver'], 'final_rel_l2'))}"],
        ),
        "cpu: Darcy, Transolver below FNO": (
            "| Darcy: Transolver below FNO",
            [f"FNO {ms(field(op['fno'], 'final_rel_l2'))} (2.37 M) and {ms(field(op['fno-small'], 'final_rel_l2'))}"],
        ),
        "cpu: NS, LaMO below Transolver": (
            "| Navier-Stokes: LaMO below Transolver",
            [f"{ms(field(lamo_ns, 'final_rel_l2'))} † vs {ms(field(gc['ns-transolver'], 'final_rel_l2'))}"],
        ),
        "cpu: NS, FNO": ("| Navier-Stokes: FNO behind both", [f"FNO {ms(field(gc['ns-fno'], 'final_rel_l2'))}"]),
        "cpu: Darcy, GeoMaNO below Transolver": (
            "| Darcy: GeoMaNO below Transolver",
            [
                f"Eq. 6: {ms(field(gc['darcy-geomano-eq6'], 'final_rel_l2'))}",
                f"prior †: {ms(field(gc['darcy-geomano'], 'final_rel_l2'))}",
            ],
        ),
        "cpu: NS, GeoMaNO below Transolver": (
            "| Navier-Stokes: GeoMaNO below Transolver",
            [
                f"Eq. 6: {mean(field(seeds('geomano/table1', 'ns-geomano-eq6', (0,)), 'final_rel_l2'))} (1 seed)",
                f"prior †: {ms(field(gc['ns-geomano'], 'final_rel_l2'))}",
            ],
        ),
        "cpu: GeoMaNO paper model against ours, on validation": (
            "| Paper's model vs our choices",
            [
                f"validation {ms(field(gv['geomano-paper'], 'best_val_rel_l2'))} vs "
                f"{ms(field(gv['geomano'], 'best_val_rel_l2'))}",
                f"test {ms(field(gv['geomano-paper'], 'test_rel_l2_at_best_val'))} vs "
                f"{ms(field(gv['geomano'], 'test_rel_l2_at_best_val'))}",
            ],
        ),
        "cpu: ST-SSM KS 64 points": (
            "| Table 1, KS nu = 0.1, 64 points",
            [
                f"teacher-forced {ms(field(st['stssm-r64'], 'rel_l2_teacher_forced'))}, 2nd behind S4-FFNO "
                f"{ms(field(st['s4ffno-r64'], 'rel_l2_teacher_forced'))}",
                f"rollout {ms(field(st['stssm-r64'], 'rel_l2'), 3)}",
            ],
        ),
        "cpu: ST-SSM KS 32 points": (
            "| Table 1, KS nu = 0.1, 32 points",
            [
                f"teacher-forced {ms(field(st['stssm-r32'], 'rel_l2_teacher_forced'))}, best (S4-FFNO "
                f"{ms(field(st['s4ffno-r32'], 'rel_l2_teacher_forced'))})"
            ],
        ),
        "cpu: ST-SSM Table 5 ordering": (
            "| Table 5 ordering",
            [f"rollout VM {ro('stssm-vm')} < FNO2D-R {ro('fno2d-r')} < ST-SSM {ro('stssm')} < FF {ro('stssm-ff')}"],
        ),
        "cpu: ST-SSM Table 5, sequential against parallel": (
            "| Table 5: sequential axes",
            [
                f"{ms(field(st['stssm'], 'rel_l2'))} vs {ms(field(st['stssm-ff'], 'rel_l2'))} (teacher-forced "
                f"{mean(field(st['stssm'], 'rel_l2_teacher_forced'))} vs "
                f"{mean(field(st['stssm-ff'], 'rel_l2_teacher_forced'))})"
            ],
        ),
        "cpu: ST-SSM Table 5, against FNO2D-R": (
            "| Table 5: ST-SSM beats FNO2D-R",
            [f"{ro('stssm')} vs {ms(field(st['fno2d-r'], 'rel_l2'))}"],
        ),
    }
    tf_lead = 1 - statistics.mean(field(ks["stssm"], "rel_l2_teacher_forced")) / statistics.mean(
        field(ks["s4ffno"], "rel_l2_teacher_forced")
    )
    return cpu | {
        "LaMO Darcy 50 epochs": (
            "| Protocol-scaled: Darcy, Transolver tuned",
            [
                f"LaMO {ms(field(eq['lamo'], 'final_rel_l2'))} (4 heads, re-chosen on validation",
                f"2.37 M FNO {ms(field(d50['fno'], 'test_rel_l2_at_best_val'))} "
                "(test at best validation; final the same)",
                f"Transolver {ms(field(d50['transolver-lr2e-3-m16'], 'final_rel_l2'))}",
                f"FNO of its size {ms(field(d50['fno-small'], 'final_rel_l2'))}",
                f"Transolver {ms(field(tuned10, 'final_rel_l2'))}",
            ],
        ),
        "Navier-Stokes nu = 1e-4": (
            "| Protocol-scaled: Navier-Stokes nu = 1e-4",
            [
                f"LaMO {ms(field(ns4['lamo'], 'final_rel_l2'))} (16 heads, chosen on validation",
                f"GeoMaNO (our variant, equal size) {ms(field(ns4['geomano-eqp'], 'final_rel_l2'))}",
                f"Transolver {ms(field(ns4['transolver'], 'final_rel_l2'))}",
                f"FNO of LaMO's size {ms(field(ns4['fno-small'], 'final_rel_l2'))}",
                f"2.4 M FNO {ms(field(ns4['fno'], 'final_rel_l2'))}",
                cpu_hours([r for rs in ns4.values() for r in rs]),
            ],
        ),
        "GeoMaNO NS at LaMO's size": (
            "| Protocol-scaled: GeoMaNO on Navier-Stokes",
            [
                f"{ms(field(ns4['geomano-eqp'], 'final_rel_l2'))} vs LaMO {ms(field(ns4['lamo'], 'final_rel_l2'))} and",
                f"the paper's model {ms(field(ns4p, 'final_rel_l2'))} (the final model, as the others; test at best "
                f"validation {ms(field(ns4p, 'test_rel_l2_at_best_val'))})",
            ],
        ),
        "GeoMaNO against LaMO, equal parameters": (
            "| Protocol-scaled: GeoMaNO against LaMO",
            [
                f"LaMO {ms(field(eq['lamo'], 'test_rel_l2_at_best_val'))} (4 heads, re-chosen on validation",
                f"GeoMaNO ours (chosen on validation) {ms(field(eq['geomano-eqp'], 'test_rel_l2_at_best_val'))}",
                f"the paper's model {ms(field(eq['geomano-paper-eqp'], 'test_rel_l2_at_best_val'))}",
                cpu_hours([r for rs in eq.values() for r in rs], 2),
            ],
        ),
        "ST-SSM Table 5 at 32 x 32": (
            "| Protocol-scaled: Table 5 at 32 x 32",
            [
                f"ST-SSM {ms(field(t5['stssm'], 'rel_l2'))} / FF {ms(field(t5['stssm-ff'], 'rel_l2'))} / "
                f"VM {ms(field(t5['stssm-vm'], 'rel_l2'))} / FNO2D-R {ms(field(t5['fno2d-r'], 'rel_l2'))}",
                "teacher-forced "
                + " / ".join(
                    mean(field(t5[m], "rel_l2_teacher_forced")) for m in ("stssm", "stssm-ff", "stssm-vm", "fno2d-r")
                ),
                cpu_hours([r for rs in t5.values() for r in rs]),
            ],
        ),
        "ST-SSM KS at 50 epochs": (
            "| Protocol-scaled: KS (Table 1)",
            [
                "rollout " + " / ".join(ms(field(ks[m], "rel_l2")) for m in ("stssm", "mi-ffno", "s4ffno")),
                "at best validation "
                + " / ".join(mean(field(ks[m], "test_rel_l2_at_best_val")) for m in ("stssm", "mi-ffno", "s4ffno")),
                "teacher-forced "
                + " / ".join(ms(field(ks[m], "rel_l2_teacher_forced")) for m in ("stssm", "mi-ffno", "s4ffno")),
                f"{100 * tf_lead:.1f} % ahead of S4-FFNO",
                cpu_hours([r for rs in ks.values() for r in rs]),
            ],
        ),
        "CHONN order family at the paper's protocol": (
            "| Protocol-matched (part of Fig. 3)",
            [
                f"T2 o2 {der('T2-o2')} vs d2 {der('T2-d2')}",
                f"T3 o3 {der('T3-o3')} vs d3 {der('T3-d3')}",
                f"T4 o4 {der('T4-o4')} vs d4 {der('T4-d4')}",
                f"2x2 {der('T3-2x2')} vs d3",
                f"point error T2 {point('T2-o2')} vs {point('T2-d2')}, T3 {point('T3-o3')} vs {point('T3-d3')}, "
                f"T4 {point('T4-o4')} vs {point('T4-d4')}, 2x2 {point('T3-2x2')}",
                f"T1 o1 {der('T1-o1')}",
                cpu_hours(chonn_all),
            ],
        ),
        "CHONN Fig. 3c composites against depth 4": (
            "| Fig. 3c: depths 1-5",
            [
                "2x3 point / spectral / derivative error "
                + " / ".join(mean(field(c3["2x3"], m), 3) for m in ERRS)
                + " against depth 4's "
                + " / ".join(mean(field(co["T4-d4"], m), 3) for m in ERRS),
                f"3x2 ({c3['3x2'][0]['params']:,} parameters) "
                + " / ".join(mean(field(c3["3x2"], m), 3) for m in ERRS),
                f"lower on {lower(c3['2x3'])} of 3 seeds",
                f"(lower on {lower(c3['3x2'])} of 3 seeds",
                f"the 6 composite runs {sum(field(c3['2x3'] + c3['3x2'], 'train_seconds')) / 3600:.1f} CPU-h",
            ],
        ),
        "CHONN Fig. 3a, orders 1-4 on every target": (
            "| Fig. 3a, the other pairs",
            [
                "point T4: " + " / ".join(f"{o42[(4, n)]['rel_l2_point']:.3f}" for n in (1, 2, 3, 4)),
                "(T4: " + " / ".join(f"{o42[(4, n)]['rel_l2_der']:.3f}" for n in (1, 2, 3, 4)),
                f"fall with the order in {falls('rel_l2_point')} of 12 steps",
                f"the 12 orders: {sum(field(fig3a, 'train_seconds')) / 3600:.1f} CPU-h",
            ],
        ),
        "CHONN order family at cpu scale": (
            "| Order-n CKB beats n stacked",
            [
                f"{chonn_gains('chonn/order')} (40 epochs)",
                f"{chonn_gains('chonn/order_60ep')} (60 epochs",
            ],
        ),
        "NAC event_digits, chosen on validation": (
            "| NAC-Exact most accurate on event-based digits",
            [
                f"event_digits {ms(nac_val('event_digits', 'tuned', 'accuracy'), 3)} "
                "(tuned profile, chosen on validation",
            ],
        ),
        "NAC activity, chosen on validation": (
            "| NAC-Exact most accurate on activity",
            [
                f"activity {ms(nac_val('activity', 'tuned', 'accuracy'), 3)} (tuned profile, chosen on validation)",
            ],
        ),
        "NAC bearing, chosen on validation": (
            "| NAC-Exact best remaining-life Score",
            [
                f"bearing RMSE {ms(nac_val('bearing', 'paper', 'rmse'), 3)} "
                f"(Score {ms(nac_val('bearing', 'paper', 'score'), 2)}; the paper profile, chosen on validation",
            ],
        ),
        "NAC on UEA/UCR, chosen on validation": (
            "| Real data, not the paper's",
            [
                f"NAC (paper, tuned or conv profile, chosen on validation) {uea_nac_choice('regular')} regular, "
                f"{uea_nac_choice('irregular')} irregular",
            ],
        ),
        "UEA/UCR floors": (
            "| Sequence presets at or above the archive's simple baselines",
            [
                f"400 epochs: {uea_floor_counts('400ep')}",
                f"30 s: {uea_floor_counts('30s')}",
                f"Covid3Month at 400 epochs {uea_regression_floor('400ep')}",
                f"at 30 s {uea_regression_floor('30s')}",
                f"Covid3Month on five splits {uea_regression_floor('400ep', 4)}",
            ],
        ),
        "Long archive series": (
            "| Long archive series",
            [
                f"ACSF1 nac {long_read('nac', 'ACSF1')}, OSULeaf nac {long_read('nac', 'OSULeaf')}, PLAID gru "
                f"{long_read('gru', 'PLAID')} against 1-NN ED {long_base('knn', 'ACSF1')} / "
                f"{long_base('knn', 'OSULeaf')} / {long_base('knn', 'PLAID')} (MiniRocket "
                f"{long_base('minirocket', 'ACSF1')} / {long_base('minirocket', 'OSULeaf')} / "
                f"{long_base('minirocket', 'PLAID')}); longest run {long_minutes()} min",
            ],
        ),
        "LaMO cost per sample": (
            "| Training cost per sample, LaMO",
            [f"| {per_sample('lamo/darcy', 'fno/darcy')} (per step"],
        ),
        "GeoMaNO cost per sample": (
            "| Training cost per sample, GeoMaNO",
            [f"| {per_sample('geomano/darcy', 'fno/darcy')} (per step"],
        ),
    }


CHECKS = _checks()


def _row(prefix: str) -> str:
    rows = [line for line in SUMMARY.read_text().splitlines() if line.startswith(prefix)]
    assert len(rows) == 1, f"{len(rows)} rows of RESULTS.md start with {prefix!r}"
    return rows[0]


def _missing(row: str, expected: list[str]) -> list[str]:
    return [text for text in expected if text not in row]


@pytest.mark.parametrize("name", list(CHECKS))
def test_summary_row_shows_what_its_records_hold(name):
    prefix, expected = CHECKS[name]
    missing = _missing(_row(prefix), expected)
    assert not missing, f"RESULTS.md row {prefix!r} lacks, as recomputed from its records: {missing}"


def test_a_changed_number_would_fail():
    """The checks are not vacuous: the Navier-Stokes row with LaMO's mean off by 0.0001, or with a † put back on
    its validation-chosen heads, fails them."""
    prefix, expected = CHECKS["Navier-Stokes nu = 1e-4"]
    row = _row(prefix)
    lamo = expected[0].split()[1]  # "0.1726"
    off = f"{float(lamo) + 0.0001:.4f}"
    assert not _missing(row, expected)
    assert _missing(row.replace(f"LaMO {lamo}", f"LaMO {off}"), expected)
    assert _missing(row.replace(" (16 heads", " † (16 heads"), expected)


def test_darcy_heads_said_validation_chosen_are_what_validation_chooses():
    """The Darcy rows drop LaMO's † because validation re-chose its 4 heads: the lowest mean best validation error
    among LaMO's configurations (4 heads, 1 head, the paper's) must be the 4-head runs'; and the 2.37 M FNO's
    "final the same" must hold to the digits shown."""
    runs = {
        "lamo": seeds("geomano/lamo_equal_protocol", "darcy-lamo"),
        **{m: seeds("lamo/darcy_config_protocol", f"darcy-{m}") for m in ("lamo-h1", "lamo-paper")},
    }
    assert all(len(rs) == 3 for rs in runs.values())
    val = {m: statistics.mean(field(rs, "best_val_rel_l2")) for m, rs in runs.items()}
    assert min(val, key=val.get) == "lamo", val
    fno = seeds("operators/darcy_50ep_protocol", "fno")
    assert ms(field(fno, "final_rel_l2")) == ms(field(fno, "test_rel_l2_at_best_val"))


def test_ns_heads_said_validation_chosen_are_what_validation_chooses():
    """The Navier-Stokes rows drop LaMO's † because validation re-chose its 16 heads (5c): the lowest mean best
    validation error among LaMO's configurations (16 heads, 4 heads, the paper's) must be the 16-head runs'."""
    runs = {
        "lamo": seeds("operators/ns4_protocol", "ns4-lamo"),
        **{m: seeds("operators/ns4_paper_configs_protocol", f"ns4-{m}") for m in ("lamo-h4", "lamo-paper")},
    }
    assert all(len(rs) == 3 for rs in runs.values())
    val = {m: statistics.mean(field(rs, "best_val_rel_l2")) for m, rs in runs.items()}
    assert min(val, key=val.get) == "lamo", val


def test_only_the_chonn_order_family_is_called_protocol_matched():
    rows = [line for line in SUMMARY.read_text().splitlines() if line.lower().startswith("| protocol-matched")]
    assert len(rows) == 1 and "part of Fig. 3" in rows[0]


# ------------------------------------------------------------------------------------------------
# anchors

PAGES = [SUMMARY, LAB / "README.md", *sorted((LAB / "pages").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    heads = [line.lstrip("#").strip() for line in page.read_text().splitlines() if re.match(r"#{1,6} ", line)]
    return {slug(h) for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_anchor_links_point_at_existing_headings(page):
    for target, anchor in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        dest = (page.parent / target).resolve() if target else page
        if dest.suffix != ".md" or not dest.exists():
            continue  # a missing file is test_docs.py's to report
        assert anchor in anchors(dest), f"{page.name} links to {target}#{anchor}: no such heading"
