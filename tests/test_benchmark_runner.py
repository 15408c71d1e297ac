"""The benchmark runner: registration, timing, and RESULTS.md sections replaced one at a time."""

import math
import re

import numpy as np
import pytest

from benchmarks import __main__ as benchmarks_main
from benchmarks import runner
from interpretable_zoo.datasets import load_usps


def test_update_results_replaces_only_the_sections_it_ran(tmp_path):
    path = tmp_path / "RESULTS.md"
    first = runner.Benchmark("alpha", lambda: [], "first benchmark")
    second = runner.Benchmark("beta", lambda: [], "second benchmark")
    rows = [runner.Comparison("task", 0.5, "peer", 2.0, "notes here")]
    runner.update_results(
        {"alpha": runner.render_section(first, rows, "cmd", 0.0), "beta": runner.render_section(second, [], "cmd", 0.0)},
        path,
    )
    faster = [runner.Comparison("task", 0.25, "peer", 2.0)]
    runner.update_results({"alpha": runner.render_section(first, faster, "cmd", 1.5)}, path)
    text = path.read_text()
    assert text.count("<!-- benchmark:alpha -->") == 1 and text.count("<!-- benchmark:beta -->") == 1
    assert "| task | 250.00 ms | peer | 2.00 s | 8.00x |" in text
    assert "4.00x" not in text  # the old alpha row is gone
    assert "second benchmark" in text and "load average before the run: 1.5" in text


def test_a_rerun_keeps_the_sections_hand_written_notes_and_dates_the_old_code_note(tmp_path):
    path = tmp_path / "RESULTS.md"
    bench = runner.Benchmark("alpha", lambda: [], "first benchmark")
    runner.update_results({"alpha": runner.render_section(bench, [runner.Comparison("task", 1.0, "peer", 2.0)],
                                                          "cmd", 0.0)}, path)
    written = path.read_text()
    assert runner.hand_written_notes(written) == []  # control: a section as a run writes it has none
    old_run = re.search(r"^- run: .*$", written, re.M).group(0)
    notes = ["- code: main abc1234, the loop compiled whole",
             "- before (2026-01-01 run): 0.5x\n  - a nested detail",
             "- trial not kept: fewer logs"]
    path.write_text(written.replace(old_run, "\n".join([old_run, *notes])))
    old_stamp = re.search(r"^- run: ([^,]+),", old_run).group(1)
    runner.update_results({"alpha": runner.render_section(bench, [runner.Comparison("task", 0.5, "peer", 2.0)],
                                                          "cmd", 1.5)}, path)
    text = path.read_text()
    header = text.split("\n| task")[0]
    bullets = re.findall(r"^- .*(?:\n  .*)*", header, re.M)
    assert len(bullets) == 6 and bullets[0].startswith("- run: ")
    assert bullets[1] == f"- before (the {old_stamp} run): code: main abc1234, the loop compiled whole"
    assert bullets[2:4] == notes[1:]
    assert bullets[4].startswith("- machine: ") and "load average before the run: 1.5" in bullets[4]
    assert bullets[5].startswith("- versions: ")
    assert "4.00x" in text and "2.00x" not in text  # the new table replaced the old one


def test_speedup_is_peer_over_ours_and_missing_peer_time_has_none():
    assert runner.Comparison("t", 2.0, "p", 6.0).speedup == 3.0
    assert runner.Comparison("t", 2.0, "p", None).speedup is None


def test_extra_columns_are_shown_before_the_notes_and_a_missing_time_as_n_a():
    bench = runner.Benchmark("gamma", lambda: [], "extra columns")
    rows = [
        runner.Comparison("first", 1.0, "peer", 2.0, "fine", (("import", "0.1 s"), ("fit", "0.5 s"))),
        runner.Comparison("second", math.nan, "-", 3.0, "FAILED", (("fit", "none"), ("exit", "0.2 s"))),
    ]
    text = runner.render_section(bench, rows, "cmd", 0.0)
    assert "| task | ours | peer | peer time | peer / ours | import | fit | exit | notes |\n|---|---|---|---|---|---|---|---|---|" in text
    assert "| first | 1.00 s | peer | 2.00 s | 2.00x | 0.1 s | 0.5 s |  | fine |" in text
    assert "| second | n/a | - | 3.00 s | n/a |  | none | 0.2 s | FAILED |" in text
    assert rows[1].speedup is None


def test_registering_a_name_twice_is_an_error(monkeypatch):
    monkeypatch.setattr(runner, "REGISTRY", {})
    runner.benchmark("once")(lambda: [])
    with pytest.raises(ValueError, match="name: benchmark 'once'"):
        runner.benchmark("once")(lambda: [])


def test_time_call_runs_warmup_then_repeats():
    calls = []
    seconds = runner.time_call(lambda: calls.append(1), repeat=3, warmup=2)
    assert len(calls) == 5 and seconds >= 0
    with pytest.raises(ValueError, match="repeat"):
        runner.time_call(lambda: None, repeat=0)


def test_a_benchmark_without_its_data_folder_is_skipped_with_the_reason(monkeypatch, capsys):
    monkeypatch.delenv("INTERPRETABLE_ZOO_DATA", raising=False)
    monkeypatch.setattr(runner, "REGISTRY", {})
    monkeypatch.setattr(benchmarks_main, "REGISTRY", runner.REGISTRY)
    monkeypatch.setattr(benchmarks_main, "discover", lambda: None)
    runner.benchmark("needs_usps")(lambda: [runner.Comparison("t", 1.0, "p", 1.0, str(load_usps().X.shape))])
    assert benchmarks_main.main(["-k", "needs_usps"]) == 1
    assert "skipped: no data folder" in capsys.readouterr().out


def test_a_run_on_an_accelerator_writes_its_own_section_beside_the_cpu_one(tmp_path, monkeypatch):
    import jax

    path = tmp_path / "RESULTS.md"
    bench = runner.Benchmark("delta", lambda: [], "backend suffix")
    rows = [runner.Comparison("task", 2e-8, "peer", 1e-5)]
    runner.update_results({runner.section_name(bench): runner.render_section(bench, rows, "cmd", 0.0)}, path)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    runner.update_results({runner.section_name(bench): runner.render_section(bench, rows, "cmd", 0.0)}, path)
    text = path.read_text()
    assert text.count("<!-- benchmark:delta -->") == 1 and text.count("<!-- benchmark:delta_gpu -->") == 1
    assert "## delta_gpu" in text and "<!-- end:delta_gpu -->" in text
    assert "| task | 20.0 ns | peer | 10.0 µs | 500.00x |" in text  # times below a microsecond in nanoseconds


def test_the_command_line_names_the_variables_that_narrow_a_run(monkeypatch):
    monkeypatch.setattr(runner.sys, "argv", ["benchmarks", "-k", "convergence_brl"])
    for name in runner.NARROWING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert runner.command_line() == "python -m benchmarks -k convergence_brl"
    monkeypatch.setenv("CONVERGENCE_CASES", "titanic")
    assert runner.command_line() == "CONVERGENCE_CASES=titanic python -m benchmarks -k convergence_brl"


def test_convergence_rows_leave_out_the_untempered_fit_only_when_asked(monkeypatch):
    from benchmarks import bench_convergence

    class Run:
        diagnostics = {"log_joint": (1.0, 800.0)}
        summaries = {"log_joint": np.zeros((4, 10))}
        thin, log_evidence, log_evidence_se, n_temperatures, converged = 1, 0.0, 0.1, 8, True
        seconds = {"compile": 0.1, "sampling": 2.0}
        round_trip_rate, barrier, n_scans = 0.01, 3.3, 40
        move_rates = {"accept_prob": np.array([0.9, 0.25])}

    class Result:
        run = Run()

    plain_budgets = []
    plain = lambda seconds: plain_budgets.append(seconds) or Result()  # noqa: E731
    monkeypatch.setenv("CONVERGENCE_UNTEMPERED", "skip")
    row = bench_convergence._row("case", "defaults", Result, plain)
    assert plain_budgets == [] and row.peer_seconds is None and "untempered: not run" in row.notes
    assert "accept_prob per rung from the reference 0.90 0.25" in row.notes
    assert "40 scans in all, 0.05 s a scan" in row.notes and "Lambda 3.3," in row.notes
    monkeypatch.delenv("CONVERGENCE_UNTEMPERED")
    row = bench_convergence._row("case", "defaults", Result, plain)
    assert len(plain_budgets) == 1 and row.peer_seconds is not None
    monkeypatch.setenv("CONVERGENCE_UNTEMPERED", "no")
    tempered_fits = []
    with pytest.raises(ValueError, match="CONVERGENCE_UNTEMPERED"):
        bench_convergence._row("case", "defaults", lambda: tempered_fits.append(None) or Result(), plain)
    assert tempered_fits == []  # refused before the long fit


def test_convergence_settings_replace_defaults_of_every_fit_and_the_untempered_fit_keeps_one_rung(monkeypatch):
    from benchmarks import bench_convergence

    calls = []

    def fake_fit_bcm(X, n_clusters, **options):
        calls.append(options)
        raise StopIteration  # the options are what this test reads; no fit runs

    monkeypatch.setattr(bench_convergence, "fit_bcm", fake_fit_bcm)
    monkeypatch.setattr(bench_convergence, "_row", lambda case, settings, tempered, plain: (settings, tempered, plain))
    monkeypatch.setenv("CONVERGENCE_SETTINGS", "n_temperatures=64,max_seconds=520.5,kernel=collapsed,store_z=False")
    settings, tempered, plain = bench_convergence._bcm_row("case", None, 4, n_values=7)
    assert settings == "n_values=7, n_temperatures=64, max_seconds=520.5, kernel=collapsed, store_z=False"
    for fit in (tempered, lambda: plain(12.0)):
        with pytest.raises(StopIteration):
            fit()
    assert calls[0]["n_temperatures"] == 64 and calls[0]["max_seconds"] == 520.5 and calls[0]["n_values"] == 7
    assert calls[0]["store_z"] is False  # not the string "False", which a fit would read as true
    assert calls[1]["n_temperatures"] == 1 and calls[1]["max_seconds"] == 12.0 and calls[1]["kernel"] == "collapsed"
    monkeypatch.delenv("CONVERGENCE_SETTINGS")
    assert bench_convergence._bcm_row("case", None, 4)[0] == "defaults"
    for bad in ("n_temperatures", "=3", "two words=1"):
        monkeypatch.setenv("CONVERGENCE_SETTINGS", bad)
        with pytest.raises(ValueError, match="CONVERGENCE_SETTINGS"):
            bench_convergence._bcm_row("case", None, 4)
