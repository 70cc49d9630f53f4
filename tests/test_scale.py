"""vmtax scale with fake targets (no timing): the barrier, the stages, the
store, the figures, the JSON contract, the refusals; and its statistics.
Real guests: test_scale_e2e.py."""

import json
import math
import os
from typing import ClassVar

import pytest

from helpers import vmtax
from vmtax import scale, stats, suite
from vmtax.errors import UserError
from vmtax.model import BenchSpec, Estimate, Interval, RunData, Sample, ScalePoint
from vmtax.report import scale as scale_report
from vmtax.report.units import fmt_rate, fmt_rate_range
from vmtax.store import Store
from vmtax.targets.fake import FakeTarget

CONTRACT = {"n", "aggregate", "per_instance", "jain", "slowdown", "host_cpu_pct", "vcpus", "host_cpus"}
FIGURE = {"value", "unit", "ci_low", "ci_high"}
QUICK = ["--round-time", "0.05s", "--rounds", "3", "--max-rounds", "3"]


def test_scale_fake_writes_the_contract_and_show_reads_it_back(tmp_path, capsys, db):
    out, md, page = tmp_path / "s.json", tmp_path / "s.md", tmp_path / "s.html"
    rc = vmtax(
        "scale",
        "fake:noise=0.01,delay=0.01",
        "--instances",
        "3,1,2",
        "--bench",
        "getppid",
        *QUICK,
        "--json",
        str(out),
        "--markdown",
        str(md),
        "--html",
        str(page),
        db=db,
    )
    assert rc == 0
    doc = json.loads(out.read_text())
    assert {"schema", "run_id", "target", "benchmark", "instances"} <= set(doc)
    assert doc["schema"] == 1 and doc["target"] == "fake:noise=0.01,delay=0.01" and doc["benchmark"] == "getppid"
    assert [p["n"] for p in doc["instances"]] == [1, 2, 3]
    one = doc["instances"][0]["aggregate"]["value"]
    for p in doc["instances"]:
        n = p["n"]
        assert set(p) >= CONTRACT
        for key in ("aggregate", "jain", "slowdown", "host_cpu_pct"):
            assert set(p[key]) == FIGURE and p[key]["ci_low"] <= p[key]["value"] <= p[key]["ci_high"]
        assert p["aggregate"]["unit"] == "ops/s" and p["host_cpu_pct"]["unit"] == "%"
        assert len(p["per_instance"]) == n and all(set(e) >= FIGURE for e in p["per_instance"])
        # a fake copy does not slow the others down: N of them do N times the work
        assert p["aggregate"]["value"] == pytest.approx(n * one, rel=0.1)
        assert 1 / n <= p["jain"]["value"] <= 1 and p["jain"]["value"] > 0.98
        assert p["slowdown"]["value"] == pytest.approx(1.0, rel=0.1)
        assert p["vcpus"] == n and p["host_cpus"] == len(os.sched_getaffinity(0)) and p["rounds"] == 3
    assert doc["instances"][0]["slowdown"] == {"value": 1.0, "unit": "x", "ci_low": 1.0, "ci_high": 1.0}
    assert "| N | vCPUs / host CPUs | aggregate (95% CI) |" in md.read_text()
    html = page.read_text()
    assert html.count("<svg") == 2 and "Jain" in html and "instances at once (N)" in html
    printed = capsys.readouterr().out
    assert (
        "getppid" in printed
        and "unpinned" in printed
        and "3/2 (1.5x)" in printed.replace(f"3/{len(os.sched_getaffinity(0))}", "3/2")
    )
    # the store is the truth: show prints and exports the same
    assert vmtax("show", "--json", str(tmp_path / "again.json"), db=db) == 0
    assert json.loads((tmp_path / "again.json").read_text()) == doc
    with Store(db, readonly=True) as store:
        data = store.load(store.resolve(None))
    assert data.kind == "scale" and [t.name for t in data.targets] == [
        f"fake:noise=0.01,delay=0.01 x{n}" for n in (1, 2, 3)
    ]
    stage = data.targets[2]
    assert stage.facts["scale"]["n"] == 3 and len(stage.facts["scale"]["rounds"]["getppid"]) == 3
    assert {s.instance for s in data.samples if s.target == stage.name} == {0, 1, 2}
    assert {s.block for s in data.samples if s.target == stage.name} == {0, 1, 2}


def test_several_benchmarks_give_a_list_and_pinning_is_said(tmp_path, capsys, db):
    out = tmp_path / "s.json"
    assert (
        vmtax(
            "scale",
            "fake",
            "--instances",
            "2",
            "--bench",
            "getppid",
            "pi",
            "--pin",
            "spread",
            *QUICK,
            "--json",
            str(out),
            db=db,
        )
        == 0
    )
    docs = json.loads(out.read_text())
    assert [d["benchmark"] for d in docs] == ["getppid", "pi"]
    assert docs[0]["instances"][0]["slowdown"] is None  # no N=1 to compare with
    assert "pinned round-robin" in docs[0]["pinning"] and "pinned round-robin" in capsys.readouterr().out


class CountingFake(FakeTarget):
    stopped: ClassVar[list] = []

    def stop(self) -> None:
        CountingFake.stopped.append(self.name)


def test_a_copy_that_dies_mid_run_stops_every_copy_and_keeps_the_rounds(db):
    CountingFake.stopped = []
    made = []

    def make(i):
        # the third copy's agent dies in the middle of its samples, at N=3
        t = CountingFake(f"fake #{i + 1}", {"crash": "getppid"} if i == 2 else {})
        made.append(t)
        return t

    cfg = scale.ScaleConfig(instances=(1, 3), round_time=0.05, min_rounds=2, max_rounds=2)
    with Store(db) as store:
        run_id, status, failure = scale.run_scale(
            "fake", make, cfg, suite.select(None, ["getppid"]), store, "test", lambda text: None
        )
        data = store.load(run_id)
    assert status == "failed" and "instance 3 of 3 (fake #3) failed" in failure
    assert "every instance was stopped" in failure
    assert sorted(CountingFake.stopped) == sorted(t.name for t in made)
    assert data.status == "failed"
    assert [p.n for p in scale_report.view(data)[0].points] == [1]  # N=1's rounds are kept


def test_memory_is_checked_before_anything_starts(monkeypatch, capsys, db):
    monkeypatch.setattr(scale, "mem_available_mb", lambda: 300.0)  # 44 MiB after the reserve: 5 fakes
    assert vmtax("scale", "fake", "--instances", "1,8", db=db) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--instances 8" in err and "5 fit" in err and "MemAvailable" in err
    monkeypatch.setattr(scale, "mem_available_mb", lambda: 4096.0)
    assert vmtax("scale", "qemu:accel=tcg,mem=1G", "--instances", "1,4", db=db) == 2
    err = capsys.readouterr().err.strip()
    assert "4 x qemu:accel=tcg,mem=1G need about 4.6 GiB (1184 MiB each" in err and "3 fit" in err
    assert not os.path.exists(db) or Store(db, readonly=True).list_runs() == []


@pytest.mark.parametrize(
    "args,needle",
    [
        (["fake", "--instances", "0,2"], "between 1 and 256"),
        (["fake", "--instances", "two"], "counts separated by commas"),
        (["fake", "--rounds", "1"], "--rounds must be between 2"),
        (["fake", "--rounds", "5", "--max-rounds", "4"], "less than --rounds"),
        (["fake", "--round-time", "1ms"], "--round-time must be between"),
        (["fake", "--bench", "sysbench_mutex"], "not a rate"),
        (["fake", "--bench", "net_stream_tx"], "needs a peer"),
        (["ssh:somewhere"], "cannot be"),
        (["fake", "--pin", "tight"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, db):
    assert vmtax("scale", *args, db=db) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_jain():
    assert stats.jain([5, 5, 5]) == pytest.approx(1.0)
    assert stats.jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert stats.jain([1, 2]) == pytest.approx(9 / 10)
    with pytest.raises(ValueError):
        stats.jain([1, -1])


def test_ratio_unpaired_interval_holds_the_ratio_and_stays_positive():
    iv = stats.ratio_unpaired([10, 11, 9, 10], [5, 6, 4, 5])
    r, lo, hi = iv.point, iv.low, iv.high
    assert r == pytest.approx(2.0) and 0 < lo < r < hi
    iv = stats.ratio_unpaired([10, 50], [9, 1])
    r, lo, hi = iv.point, iv.low, iv.high  # wild: wide, never below zero
    assert lo > 0 and hi > r
    iv = stats.ratio_unpaired([10], [5])
    assert (iv.low, iv.high) == (-math.inf, math.inf)


def test_points_use_complete_rounds_only():
    spec = BenchSpec("pi", "cpu", "ns", "lower", "pi")
    facts = {
        "scale": {
            "n": 2,
            "vcpus": 2,
            "host_cpus": 2,
            "rounds": {
                "pi": [
                    {"round": 0, "host_cpu_pct": 99.0, "host_mem_mib": [10.0, 12.0]},
                    {"round": 1, "host_cpu_pct": 97.0},
                ]
            },
        }
    }
    from vmtax.model import TargetInfo

    data = RunData(
        "r",
        "scale",
        0.0,
        1.0,
        "complete",
        "c",
        "v",
        {"target": "t"},
        targets=[TargetInfo("t x2", "fake", facts)],
        benchmarks=[spec],
    )

    def s(inst, block, ns_per_op, warm=False):
        return Sample(
            "pi",
            "t x2",
            ns_per_op,
            "ns",
            process=block * 2 + inst,
            seq=0,
            instance=inst,
            warmup=warm,
            ops=100.0,
            block=block,
        )

    data.samples = [s(0, 0, 1e6, warm=True), s(0, 0, 2e6), s(1, 0, 4e6), s(0, 1, 2e6)]  # round 1 lacks instance 1
    data.outcomes[("t x2", "pi")] = ("budget", "")
    (p,) = scale_report.view(data)[0].points
    assert p.rounds == 1 and [e.value for e in p.per_instance] == pytest.approx([500.0, 250.0])
    assert p.aggregate.value == pytest.approx(750.0) and p.jain.value == pytest.approx(0.9)
    assert p.host_cpu_pct.value == 99.0 and p.host_mem_mb == (10.0, 12.0) and p.overcommit == 1.0


def test_rates_are_scaled_for_people():
    assert fmt_rate(3.99e6, "ops/s") == "3.99 Mops/s" and fmt_rate(273.0, "ops/s") == "273 ops/s"
    assert fmt_rate_range(2.8e6, 2.73e6, 2.86e6, "ops/s") == "2.80 Mops/s [2.73–2.86]"
    p = ScalePoint(
        n=2,
        rounds=2,
        aggregate=Estimate(Interval(4.0, 3.0, 5.0), "ops/s"),
        per_instance=(Estimate(Interval(2.0, 1, 3), "ops/s"), Estimate(Interval(2.0, 1, 3), "ops/s")),
        jain=Estimate(Interval(1.0, 0.5, 1.0), ""),
        slowdown=None,
        host_cpu_pct=None,
        host_mem_mb=(),
        vcpus=2,
        host_cpus=2,
        stopped_by="budget",
    )
    assert scale_report.row(p)[2] == "4.00 ops/s ±25.0%" and scale_report.row(p)[5] == "-"


def test_check_memory_passes_what_fits():
    scale.check_memory(FakeTarget("fake", {}), 10, available=1000.0)
    with pytest.raises(UserError, match=r"at most|fit"):
        scale.check_memory(FakeTarget("fake", {}), 1000, available=1000.0)


def test_a_hung_copy_ends_the_run_at_the_budget_plus_its_grace(db):
    """A copy whose samples take a minute each, a budget of 2 s: the round
    is stopped at the budget plus its 5 s grace (not the 300 s round
    timeout), the row ends 'budget' with the reason, and the copies stop."""
    import time

    made = []

    def make(i):
        t = FakeTarget(f"fake #{i + 1}", {"delay": "60"} if i == 1 else {})
        made.append(t)
        return t

    cfg = scale.ScaleConfig(instances=(2,), round_time=0.05, min_rounds=2, max_rounds=2, max_time=2)
    t0 = time.monotonic()
    with Store(db) as store:
        run_id, status, failure = scale.run_scale(
            "fake", make, cfg, suite.select(None, ["getppid"]), store, "test", lambda text: None
        )
        data = store.load(run_id)
    assert time.monotonic() - t0 < 2 + 5 + 3
    assert status == "failed" and "no round was measured" in failure  # no round: not complete
    how, why = data.outcomes[("fake x2", "getppid")]
    assert how == "budget" and "stopped at --max-time plus its grace (5 s)" in why


def test_an_agent_row_is_told_by_its_kind_not_its_unit():
    """scale sums an agent row's operations per second and a workload's
    rate; a workload's figure in ns (a latency, lower is better) is neither,
    whatever its unit says."""
    from vmtax.scaling import is_throughput, rate_unit

    agent = BenchSpec("getppid", "kernel", "ns", "lower", "d")
    latency = BenchSpec("tool.p99_ns", "io", "ns", "lower", "d", kind="workload")
    rate = BenchSpec("tool.ops_per_s", "io", "ops/s", "higher", "d", kind="workload")
    assert agent.agent_row and is_throughput(agent) and rate_unit(agent) == "ops/s"
    assert not latency.agent_row and not is_throughput(latency) and rate_unit(latency) == "ns"
    assert is_throughput(rate) and rate_unit(rate) == "ops/s"


def test_every_round_runs_through_the_engine_s_barrier_executor(db, monkeypatch):
    """scale starts no process: each round is a block of the engine's
    Barrier executor, one held turn per copy, every copy released at once,
    and its processes recorded by the engine from the lines they gave."""
    from vmtax.engine import barrier

    rounds, real = [], barrier.Barrier.run

    def run(self, turns):
        rounds.append([t.target.name for t in turns])
        real(self, turns)
        assert self.round is not None and all(self.round.reached)

    monkeypatch.setattr(barrier.Barrier, "run", run)
    cfg = scale.ScaleConfig(instances=(1, 2), round_time=0.01, min_rounds=2, max_rounds=2, max_time=600)
    with Store(db) as store:
        run_id, status, failure = scale.run_scale(
            "fake", lambda i: FakeTarget(f"fake #{i + 1}", {}), cfg, suite.select(None, ["getppid"]), store, "t", print
        )
        data = store.load(run_id)
        processes = store.processes(run_id)
    assert (status, failure) == ("complete", "")
    assert rounds == [["fake #1"]] * 2 + [["fake #1", "fake #2"]] * 2
    timed = [p for p in processes if p["block"] >= 0]
    assert len(timed) == 6 and {s.process for s in data.samples} == {p["process"] for p in timed}
