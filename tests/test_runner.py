"""The runner against the fake target: stopping rules, interleaving, errors."""

import math
import time

import pytest

from helpers import Steps, new_run, run_fake
from vmtax import plan, stats
from vmtax.analysis import analyse
from vmtax.model import BenchSpec
from vmtax.runner import RunConfig, Runner, run_session
from vmtax.store import Store
from vmtax.targets import parse_target

A = BenchSpec("getppid", "kernel", "ns", "lower", "d")
B = BenchSpec("segv", "kernel", "ns", "lower", "d")


def _run(targets, specs, db, clock=None, **cfg):
    return run_fake(db, targets, specs, clock, **cfg)


def test_stops_on_precision_when_quiet(db):
    status, data = _run(["fake:noise=0.005"], [A], db, precision=0.01, max_time=100)
    assert status == "complete"
    assert data.outcomes[("fake:noise=0.005", "getppid")][0] == "precision"
    (m,), _ = analyse(data)
    assert m.summary.ci_rel <= 0.01 and m.processes >= 3


def test_stops_on_budget_when_noisy(db):
    _status, data = _run(["fake:noise=0.5"], [A, B], db, precision=0.001, max_time=2, clock=Steps(0.05))
    assert [data.outcomes[("fake:noise=0.5", b)][0] for b in ("getppid", "segv")] == ["budget"] * 2


def test_warmups_are_stored_but_not_counted(db):
    _, data = _run(["fake"], [A], db, warmup=2, samples_per_process=3)
    warm = [s for s in data.samples if s.warmup]
    counted = [s for s in data.samples if s.counting]
    real = [s for s in data.samples if not s.warmup and not s.counting]
    procs = len({s.process for s in data.samples})
    timed = len({s.process for s in real})
    assert len(warm) == 2 * procs and len(real) == 3 * timed
    # counted batches come from processes of their own, which time nothing
    assert counted and not {s.process for s in counted} & {s.process for s in real}
    (m,), _ = analyse(data)
    assert m.summary.n == len(real)  # neither warmups nor counted batches are timed figures


def test_counting_processes_carry_the_metrics_and_no_timed_sample(db):
    """Every COUNT_EVERY-th block adds, per target, a process that runs one
    batch with counters on: its metrics are the run's counts; its time is
    never part of an estimate (counting costs time)."""
    _, data = _run(
        ["fake", "fake:scale=2,label=b"], [A], db, min_processes=12, precision=1e-9, max_time=3, clock=Steps(0.01)
    )
    counted = [s for s in data.samples if s.counting]
    assert counted and all(s.metrics and not s.warmup for s in counted)
    assert not [s for s in data.samples if not s.counting and s.metrics]
    blocks = {s.block for s in data.samples}
    assert {s.block for s in counted} == {b for b in blocks if b % Runner.COUNT_EVERY == 0}
    for s in counted:
        assert s.metrics["page_faults"] == (2.0 if "scale=2" in s.target else 1.0)
    # local's own counts are its host's: the fake is no local, so no host_* here
    assert not any(k.startswith("host_") for s in counted for k in s.metrics)


def test_skip_and_crash_and_garbage_are_per_benchmark(db):
    targets = ["fake:skip=getppid,crash=segv,garbage=forkwait"]
    C = BenchSpec("forkwait", "kernel", "ns", "lower", "d")
    D = BenchSpec("divzero", "kernel", "ns", "lower", "d")
    _status, data = _run(targets, [A, B, C, D], db, max_time=100)
    out = {b: data.outcomes[(targets[0], b)] for b in ("getppid", "segv", "forkwait", "divzero")}
    assert out["getppid"] == ("skipped", "fake target skips it")
    assert out["segv"][0] == "error" and "Segmentation fault" in out["segv"][1]
    assert out["forkwait"][0] == "error" and "malformed" in out["forkwait"][1]
    assert out["divzero"][0] == "precision"  # the others went on
    # samples printed before the crash are kept
    assert any(s.benchmark == "segv" for s in data.samples)


def test_blocks_hold_each_target_once_in_a_random_order(db):
    _status, data = _run(
        ["fake:seed=1", "fake:seed=2"], [A], db, min_processes=4, precision=1e-9, max_time=2, clock=Steps(0.01), seed=7
    )
    by_block: dict[int, list[tuple[int, str]]] = {}
    counting = {s.process for s in data.samples if s.counting}  # the extra processes of a block
    for s in data.samples:
        if s.process in counting:
            continue
        pair = (s.process, s.target)
        if pair not in by_block.setdefault(s.block, []):
            by_block[s.block].append(pair)
    firsts = []
    for _block, procs in sorted(by_block.items()):
        assert sorted(t for _, t in procs) == ["fake:seed=1", "fake:seed=2"]  # each target once
        firsts.append(min(procs)[1])
    assert len(firsts) >= 20
    # who goes first is a coin per block (not a fixed rotation) ...
    assert 0.2 < firsts.count("fake:seed=1") / len(firsts) < 0.8
    assert firsts != [firsts[0], firsts[1]] * (len(firsts) // 2) + firsts[: len(firsts) % 2]
    # ... drawn from the recorded seed: the same seed gives the same order
    _, again = _run(
        ["fake:seed=1", "fake:seed=2"],
        [A],
        db.with_name("again.db"),
        min_processes=4,
        precision=1e-9,
        max_time=2,
        clock=Steps(0.01),
        seed=7,
    )
    assert [(s.block, s.target) for s in again.samples] == [(s.block, s.target) for s in data.samples]


def test_compare_stops_on_ratio_precision(db):
    _status, data = _run(["fake:noise=0.005", "fake:scale=1.2,noise=0.005"], [A], db, precision=0.01, max_time=100)
    _, (c,) = analyse(data)
    assert c.ratio == __import__("pytest").approx(1.2, rel=0.01)
    assert (c.ratio_ci_high - c.ratio_ci_low) / 2 / c.ratio <= 0.01
    assert c.significant and c.stopped_by == "precision"


def test_each_candidate_stops_when_its_own_ratio_is_precise(db):
    """A candidate precise early stops there, its outcome "precision", while
    the baseline goes on with a noisy one to the budget: its stop no longer
    waits on the other's ratio (which reads the baseline's side of each
    block alone)."""
    quiet, noisy = "fake:seed=2,scale=1.2,noise=0.002", "fake:seed=3,noise=0.3"
    status, data = _run(
        ["fake:seed=1,noise=0.002", quiet, noisy],
        [A],
        db,
        precision=0.01,
        max_time=3,
        clock=Steps(0.01),
        min_processes=6,
    )
    assert status == "complete"
    outcome = {t: data.outcomes[(t, "getppid")][0] for t in (quiet, noisy)}
    assert outcome == {quiet: "precision", noisy: "budget"}
    blocks = {t.name: len({s.block for s in data.samples if s.target == t.name and not s.warmup}) for t in data.targets}
    assert 6 <= blocks[quiet] < blocks[noisy] == blocks["fake:seed=1,noise=0.002"]
    _, comps = analyse(data)
    c = next(c for c in comps if c.candidate == quiet)
    assert c.stopped_by == "precision" and stats.ratio_ci_rel(c.ratio, c.ratio_ci_low, c.ratio_ci_high) <= 0.01


def test_pass_one_says_which_candidates_are_already_precise(db):
    """A row that goes on to pass 2 names the candidate that stopped on
    precision in pass 1 as such, and the others' widths so far."""
    quiet, noisy = "fake:seed=2,scale=1.2,noise=0.002", "fake:seed=3,noise=0.3"
    store = Store(db)
    targets = new_run(store, ["fake:seed=1,noise=0.002", quiet, noisy], [A, B])
    said = []

    class Said:
        def update(self, *a, **k):
            pass

        def finished(self, index, total, spec, outcome):
            said.append((spec.name, outcome))

        def close(self):
            pass

        def note(self, text):
            pass

    Runner(
        RunConfig(precision=0.01, max_time=3, min_processes=6),
        [A, B],
        targets,
        store,
        "r",
        progress=Said(),
        clock=Steps(0.01),
    ).run()
    first = said[0]
    assert first[0] == "getppid" and first[1][quiet] == "precision"
    assert first[1][noisy].endswith("so far, more in pass 2") and "fake:seed=1,noise=0.002" not in first[1]


def test_interrupt_keeps_samples(db, monkeypatch):
    store = Store(db)
    target = parse_target("fake")
    real = target.run_agent
    calls = {"n": 0}

    def flaky(args, timeout):
        calls["n"] += args[0] == "run"
        if calls["n"] == 4:  # after the calibration, a timed process and its block's counting one
            raise KeyboardInterrupt
        return real(args, timeout)

    monkeypatch.setattr(target, "run_agent", flaky)
    run_id, status, failure = run_session("run", "test", RunConfig(precision=1e-9), [A, B], [target], store)
    data = store.load(run_id)
    assert status == "interrupted" and data.status == "interrupted" and not failure
    # a timed process and its block's counting process finished before the interrupt;
    # all their samples are kept
    assert len([s for s in data.samples if not s.warmup and not s.counting]) == RunConfig().samples_per_process
    assert len([s for s in data.samples if s.counting]) == 1
    assert data.outcomes[("fake", "getppid")][0] == "interrupted"


def test_pass_two_funds_the_cheapest_rows_first(db):
    """What each row should still need at its rate so far (the interval
    shrinks as 1/sqrt(time)) orders pass 2; each row is funded with that
    plus a margin; a row of unknown need, or one that would need more than
    is left, with an even share of the rest."""
    assert plan.time_to_goal(10.0, 0.02, 0.01) == 30.0  # twice the goal after 10 s: 30 s more
    assert plan.time_to_goal(10.0, 0.005, 0.01) == 0.0
    assert plan.time_to_goal(10.0, math.inf, 0.01) == math.inf
    assert plan.pass2_share(30.0, 100.0, 3) == 30.0 * plan.PASS2_MARGIN
    assert plan.pass2_share(30.0, 20.0, 4) == 5.0  # it cannot finish, nor can those after it: even shares
    assert plan.pass2_share(math.inf, 90.0, 3) == 30.0
    # a row nearly there needs less than a block: it gets its next block, where that fits
    assert plan.pass2_share(0.5, 20.0, 4, block=2.0) == 2.0
    assert plan.pass2_share(0.5, 1.5, 4, block=2.0) == 1.5 / 4
    # its first sweep funds only the rows whose need fits
    assert plan.pass2_share(30.0, 20.0, 4, even=False) == 0.0 == plan.pass2_share(math.inf, 90.0, 3, even=False)
    assert plan.pass2_share(10.0, 20.0, 4, even=False) == 10.0 * plan.PASS2_MARGIN


def test_a_gated_run_stops_at_a_third_of_its_threshold_unless_the_default_is_finer():
    assert plan.precision_for(None) == plan.PRECISION == 0.01
    assert plan.precision_for(0.01) == pytest.approx(0.01 / 3)
    assert plan.precision_for(0.02) == pytest.approx(0.02 / 3)
    assert plan.precision_for(0.05) == 0.01


def test_sizing_shares_one_count_and_evens_out_each_process():
    """plan.sizes, as a pure function: the baseline's count is shared;
    halved while the slowest target's sample would pass 4 x --min-time-ms
    (but not below 1/8 of the baseline's own); each group of alike targets
    runs samples per process that cost what the baseline's do."""
    cfg = RunConfig(min_time_ms=10, samples_per_process=3, warmup=1)
    # 1000 iterations of 10 us: 10 ms; a target 78 times slower would run 780 ms samples
    shared, per = plan.sizes("local", {"local": (1000, 10_000.0), "uml": (13, 780_000.0)}, cfg)
    assert shared == 125  # halved 3 times: local's sample 1.25 ms, 1/8 of its own; 125 is odd
    assert per["local"] == (24, 8)  # 8 x shorter samples: 8 x as many (the most it takes)
    assert per["uml"] == (1, 1)  # 97.5 ms samples: one, after one warmup
    # twins apart by 1.4 run alike, as the baseline
    shared, per = plan.sizes("a", {"a": (1000, 10_000.0), "b": (1000, 14_000.0)}, cfg)
    assert shared == 1000 and per["a"] == per["b"] == (3, 1)
    # a time per iteration unknown (a throughput row): no sizing, --samples everywhere
    assert plan.sizes("a", {"a": (1000, None), "b": (800, None)}, cfg) == (1000, {})
    assert plan.alike({"x": 1.0, "y": 1.9, "z": 3.7, "w": 8.0}) == [["x", "y", "z"], ["w"]]
    assert plan.per_process(1 / 100, cfg) == (24, 8)  # at most 8 x: samples 100 times shorter
    assert plan.per_process(float("nan"), cfg) == (3, 1)


def test_every_target_times_the_baselines_calibrated_iteration_count(db, monkeypatch):
    """What an operation costs can depend on how many run back to back: one
    calibration per target, then every target's timed processes run the
    baseline's count; a counted batch its own target's."""
    targets = [parse_target("fake"), parse_target("fake:label=b")]
    seen = []
    for t, iters in zip(targets, (250, 1000), strict=True):
        real = t.run_agent

        def spy(args, timeout, t=t, real=real, iters=iters):
            seen.append((t.name, args))
            for line in real(args, timeout):
                yield line.replace('"iters": 1000', f'"iters": {iters}') if '"calibration"' in line else line

        monkeypatch.setattr(t, "run_agent", spy)
    store = Store(db)
    store.new_run("r", "compare", "test", "0", {})
    Runner(RunConfig(max_time=100, min_processes=3), [A], targets, store, "r", clock=Steps()).run()
    runs = [(name, args) for name, args in seen if args[0] == "run"]
    assert [name for name, args in runs if "--iters" not in args] == ["fake", "fake:label=b"]
    assert all("--iters" not in args for _, args in runs[:2])
    timed = [(n, args) for n, args in runs[2:] if "--count" not in args]
    counted = {n: args[args.index("--iters") + 1] for n, args in runs[2:] if "--count" in args}
    assert {args[args.index("--iters") + 1] for _, args in timed} == {"250"}
    assert counted == {"fake": "250", "fake:label=b": "1000"}  # a counted batch: its target's own count


def _agent_args(db, targets, **cfg):
    """Each target's timed processes' (--iters, --samples, --warmup)."""
    targets = [parse_target(t) for t in targets]
    seen = []
    for t in targets:
        real = t.run_agent

        def spy(args, timeout, t=t, real=real):
            seen.append((t.name, args))
            return real(args, timeout)

        t.run_agent = spy
    store, run = Store(db), "r" + str(len(Store(db).list_runs()))
    store.new_run(run, "compare", "test", "0", {})
    Runner(RunConfig(max_time=5, min_processes=3, **cfg), [A], targets, store, run, clock=Steps()).run()
    out = {}
    for name, args in seen:
        if "--iters" in args and "--count" not in args:
            out.setdefault(name, set()).add(
                tuple(args[args.index(f) + 1] for f in ("--iters", "--samples", "--warmup"))
            )
    return out


def test_a_slow_target_runs_fewer_longer_samples_at_a_smaller_shared_count(db):
    """The fake's getppid sample is 1000 iterations of 480 ns.  A target 78
    times slower would run samples of 37 ms at the baseline's count: the
    count is halved while the baseline's sample stays above 1/8 of
    --min-time-ms (0.125 ms: 500 iterations, not 250); the slow target then
    runs one sample after one warmup, the baseline twice its --samples of
    half-length samples (and two warmups), a faster target many short ones
    (at most 8 x --samples); every target the same count."""
    got = _agent_args(db, ["fake", "fake:scale=78", "fake:scale=0.1"], min_time_ms=1)
    assert got == {
        "fake": {("500", "6", "2")},
        "fake:scale=78": {("500", "1", "1")},
        "fake:scale=0.1": {("500", "24", "8")},
    }


def test_targets_of_one_speed_keep_the_count_and_the_samples_asked(db):
    got = _agent_args(db, ["fake", "fake:label=b"], min_time_ms=1, samples_per_process=4, warmup=2)
    assert got == {"fake": {("1000", "4", "2")}, "fake:label=b": {("1000", "4", "2")}}
    got = _agent_args(db, ["fake", "fake:label=b", "fake:scale=78"], min_time_ms=1, warmup=0)
    assert got["fake:scale=78"] == {("500", "1", "0")}
    assert got["fake"] == {("500", "6", "0")} and got["fake:label=b"] == {("500", "6", "0")}  # alike


def _slow_runner(db, clock: Steps, **cfg) -> tuple[Runner, Store]:
    """A runner over two noisy fake targets whose every agent process takes
    7 s of the clock (a compile under TCG takes minutes), with the precision
    out of reach: only the budget stops it."""
    store = Store(db)
    targets = [parse_target("fake:noise=0.3"), parse_target("fake:noise=0.3,seed=2")]
    for t in targets:
        run_agent = t.run_agent

        def slow(args, timeout, run_agent=run_agent):
            clock.t += 7.0 if args[0] == "run" else 0.0  # an agent process, not the facts read before
            return run_agent(args, timeout)

        t.run_agent = slow
    new_run(store, targets, [A], "run")
    return Runner(RunConfig(precision=1e-6, **cfg), [A], targets, store, "r", clock=clock), store


def test_a_block_that_would_end_past_the_budget_is_not_begun(db):
    """With processes of a big share of the budget (a compile under TCG
    takes minutes), the run ends within --max-time, not a block after it."""
    clock = Steps(0.0)
    runner, store = _slow_runner(db, clock, max_time=100, min_processes=2)
    runner.run()
    blocks = {s.block for s in store.load("r").samples if not s.counting}
    assert len(blocks) >= 3 and clock.t <= 100, clock.t


def test_later_passes_begin_no_block_past_the_budget(db):
    """A row short of --min-processes after pass 1 is brought up to it only
    within the budget, and pass 2 too keeps to it: with 7 s processes and a
    60 s budget the run ended at 70 s, the catch-up beginning a block it had
    no time for and pass 2 one with 4 s left (a row's first block always
    runs)."""
    clock = Steps(0.0)
    runner, store = _slow_runner(db, clock, max_time=60, min_processes=10)
    runner.run()
    # calibration 14 s, block 0 with its counting processes 28 s, then one plain block of 14 s fits
    assert clock.t <= 60, clock.t
    assert len({s.block for s in store.load("r").samples if not s.counting}) == 2


# -- other machines at the same time ---------------------------------------------------
def _on_machine(text: str, machine: str):
    """A fake target on another machine (as an ssh host's Target.host_machine says)."""
    target = parse_target(text)
    target.host_machine = lambda: machine
    return target


def _spans(db, run="r"):
    import sqlite3

    rows = (
        sqlite3.connect(db)
        .execute("SELECT target, started, ended FROM processes WHERE run_id=? AND block >= 0", (run,))
        .fetchall()
    )
    by: dict[str, list] = {}
    for target, s, e in rows:
        by.setdefault(target, []).append((s, e))
    return by


def _overlap(xs, ys) -> int:
    return sum(1 for a in xs for b in ys if a is not b and a[0] < b[1] and b[0] < a[1])


def test_targets_on_different_machines_run_at_the_same_time(db):
    """Two hosts and this machine: each host's processes overlap the
    others', this machine's two targets never overlap each other, every
    sample is stored (through the thread that owns the store), and a host
    whose agent crashes does not stop the others."""
    import time

    specs = [B, A]  # segv first: its crash comes in the first tenth of the budget even on a loaded host
    targets = [
        parse_target("fake:delay=0.004"),
        parse_target("fake:delay=0.004,label=b"),
        _on_machine("fake:delay=0.004,label=h1", "h1"),
        _on_machine("fake:delay=0.004,label=h2,crash=segv", "h2"),
    ]
    store = Store(db)
    new_run(store, targets, specs)
    status = Runner(
        RunConfig(max_time=1.5, min_processes=3, precision=1e-9), specs, targets, store, "r", clock=time.monotonic
    ).run()
    assert status == "complete"
    by = _spans(db)
    here = by["fake:delay=0.004"] + by["fake:delay=0.004,label=b"]
    assert _overlap(here, here) == 0
    assert _overlap(by["fake:delay=0.004,label=h1"], here) > 0
    assert _overlap(by["fake:delay=0.004,label=h1"], by["fake:delay=0.004,label=h2,crash=segv"]) > 0
    data = store.load("r")
    assert data.outcomes[("fake:delay=0.004,label=h2,crash=segv", "segv")][0] == "error"
    assert data.outcomes[("fake:delay=0.004,label=h2,crash=segv", "getppid")][0] == "budget"
    ms, _ = analyse(data)
    assert all(m.summary and m.summary.n >= 9 for m in ms if m.stopped_by != "error")


def test_on_one_machine_the_block_is_a_plain_loop(db, monkeypatch):
    from vmtax.engine.writer import ThreadRelay

    def no_threads(self, lanes):
        raise AssertionError("threads for targets on one machine")

    monkeypatch.setattr(ThreadRelay, "serve", no_threads)
    status, data = _run(["fake", "fake:label=b"], [A], db, max_time=2)
    assert status == "complete" and len(data.samples) > 10


def test_a_block_executor_given_to_the_runner_runs_every_block_with_the_lines_it_opens(db):
    """The seam of another way to run a block (lockstep: every side's
    process alive at once, paced sample by sample): the runner hands each
    block's turns to the executor it was given; a turn of an agent row says
    its process's arguments, and measures the process from the Lines the
    executor opened, calling their per-sample hook."""
    from vmtax.engine.execute import Lines

    blocks, paced = [], []

    class Opening:
        def run(self, turns):
            blocks.append(sorted(t.target.name for t in turns))
            for t in turns:
                argv = t.argv()
                assert argv[:2] == ["run", "getppid"] and "--iters" in argv
                t.run(Lines(lambda t=t, argv=argv: t.target.run_agent(argv, timeout=60), sampled=paced.append))

    store = Store(db)
    targets = new_run(store, ["fake", "fake:label=b"], [A])
    status = Runner(
        RunConfig(precision=0.05, max_time=100, min_processes=3),
        [A],
        targets,
        store,
        "r",
        clock=Steps(),
        executor=lambda job: Opening(),
    ).run()
    data = store.load("r")
    assert status == "complete" and len(blocks) >= 3 and all(b == ["fake", "fake:label=b"] for b in blocks)
    counting = {s.process for s in data.samples if s.counting}  # its counting processes run in turn
    timed = [s for s in data.samples if s.process not in counting]
    assert {s.block for s in timed} == set(range(len(blocks)))
    assert [s.process for s in paced] == [s.process for s in timed]  # every sample went through the hook


def test_a_qemu_guest_is_on_this_machine_whatever_its_machine_type():
    """qemu's `machine` option (pc, q35, microvm) is not the host it runs on."""
    from vmtax.targets import parse_target

    assert parse_target("qemu:machine=q35").host_machine() == "" == parse_target("local").host_machine()


def test_twins_away_from_the_baseline_run_alike(db):
    """Two guests alike but for the noise of their calibration (2.2 and 2.6
    times the baseline's time) would round to 4 and 3 samples of --samples 8
    each; they form one group and run the samples of their mean time."""
    got = _agent_args(db, ["fake", "fake:scale=2.2", "fake:scale=2.6"], min_time_ms=1, samples_per_process=8)
    assert got["fake"] == {("1000", "8", "1")}
    assert got["fake:scale=2.2"] == {("1000", "3", "1")} and got["fake:scale=2.6"] == {("1000", "3", "1")}
    # chained within 2x of one another down to the baseline: they run as the baseline does
    got = _agent_args(db, ["fake", "fake:scale=1.5", "fake:scale=2.2"], min_time_ms=1, samples_per_process=8)
    assert got["fake:scale=1.5"] == got["fake:scale=2.2"] == got["fake"] == {("1000", "8", "1")}


def test_pass_two_gives_a_row_nearly_there_its_next_block(db, monkeypatch):
    """A row whose estimated need is a fraction of a block still gets one
    block in each sweep of pass 2 (funded with its need alone, the block would end past
    that share and was not begun)."""
    clock = Steps(0.0)
    runner, store = _slow_runner(db, clock, max_time=100, min_processes=2)
    asked = []

    def nearly_there(spent, worst, goal):
        asked.append((spent, worst, goal))
        return 0.1

    monkeypatch.setattr(plan, "time_to_goal", nearly_there)
    runner.run()
    # what the runner asks with: the row's time so far, its width now, the goal
    assert asked and all(spent > 0 and worst > goal == 1e-6 for spent, worst, goal in asked), asked
    # calibration 14 s, block 0 (with counting) 28, block 1 14: pass 1 ends at 56 of its 60; each of
    # pass 2's two sweeps runs one (70 and 84 s)
    assert sorted({s.block for s in store.load("r").samples if not s.counting}) == [0, 1, 2, 3]


# -- honest budgets: nothing begun that cannot end by the budget plus its grace --------
def test_the_grace_is_a_tenth_of_the_budget_within_5_and_60_s():
    from vmtax.engine.budget import grace_s

    assert grace_s(10) == 5 and grace_s(300) == 30 and grace_s(3600) == 60


def test_a_row_whose_first_block_cannot_fit_is_not_begun_and_says_why(db):
    # 8 batches of 60 s per target, then 4: far past a 10 s budget and its 5 s grace
    status, data = _run(["fake", "fake:scale=2"], [A], db, max_time=10, min_time_ms=60000)
    assert status == "complete"
    for t in ("fake", "fake:scale=2"):
        how, why = data.outcomes[(t, "getppid")]
        assert how == "budget" and why.startswith(
            "left out: the budget could not finish it (its two blocks "
            "need 1440 s or more, 10 s were left); --max-time 2"
        ), why
    assert not data.samples


def test_a_process_still_running_at_budget_plus_grace_is_stopped(db):
    """Samples of 4 s, a process of 4 of them, a budget of 3 s: the run ends
    at the budget plus its 5 s grace, not when the process would (16 s and
    more); what was measured is kept and the row ends 'budget'."""
    t0 = time.monotonic()
    status, data = _run(["fake:delay=4"], [A, B], db, max_time=3, min_time_ms=0, clock=time.monotonic)
    took = time.monotonic() - t0
    assert status == "complete" and took < 3 + 5 + 2, took
    for b in ("getppid", "segv"):
        how, why = data.outcomes[("fake:delay=4", b)]
        assert how == "budget" and "budget plus its grace" in why, (b, how, why)


def test_the_budget_needed_for_two_blocks_is_said_before_starting():
    from vmtax import suite
    from vmtax.plan import budget_shortfall

    cfg = RunConfig(max_time=300, tool_seconds=2)
    apps = [s for s in suite.select(["apps"], None)]
    line = budget_shortfall(apps, 4, cfg)
    assert line.startswith("a budget of 5m00s cannot buy two blocks of every row") and "--max-time" in line
    assert budget_shortfall([A, B], 2, cfg) == ""


def test_a_stop_signal_while_the_run_is_recorded_leaves_it_interrupted_not_half_begun(db):
    """SIGTERM (here: sent by the store itself, while it writes the run's
    row) is taken once the row is whole: the run ends 'interrupted', not
    'abandoned' (1 in 20 before, when the signal fell inside the write)."""
    import os
    import signal

    from vmtax.cli import _terminate

    class Signalled(type(Store(db))):
        def new_run(self, *a, **kw):
            os.kill(os.getpid(), signal.SIGTERM)  # pending: this thread's handler runs after the write
            super().new_run(*a, **kw)

    old = signal.signal(signal.SIGTERM, _terminate)
    try:
        store = Signalled(db)
        run_id, status, failure = run_session("run", "test", RunConfig(max_time=2), [A], [parse_target("fake")], store)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert status == "interrupted" and not failure
    assert Store(db, readonly=True).load(run_id).status == "interrupted"


def test_fast_mode_stops_a_row_with_two_modes_on_its_fast_stratum(tmp_path):
    """20% of the baseline's and 30% of the candidate's processes run 1.3x slower: over all blocks the
    ratio needs hundreds of blocks for +-1%; in the fast mode a few dozen."""
    two = "fake:label=b,scale=1.05,slow_share=0.3,slow_by=1.3"
    one = "fake:slow_share=0.2,slow_by=1.3"
    _, plain = _run([one, two], [A], tmp_path / "p.db", kind="compare", precision=0.01, max_time=300)
    status, fast = _run(
        [one, two], [A], tmp_path / "f.db", kind="compare", precision=0.01, max_time=300, fast_mode=True
    )
    assert status == "complete" and fast.outcomes[(two, "getppid")][0] == "precision"
    blocks = lambda d: len({s.block for s in d.samples if s.target == two and not s.warmup})
    assert blocks(fast) * 3 < blocks(plain)
    fast.config["fast_mode"] = True  # as the CLI stores its RunConfig
    (c,) = analyse(fast)[1]
    assert c.all_modes is not None and c.fast_mode.blocks >= 10 and c.ratio == c.fast_mode.ratio
    assert c.ratio == pytest.approx(1.05, rel=0.005) and c.ratio_ci_high - c.ratio_ci_low < 0.03
    (c,) = analyse(plain)[1]  # without it the headline is over every block, its fast mode in the note
    assert c.all_modes is None and c.fast_mode is not None and c.ratio > 1.06  # the mixes: 1.05 x 1.09 / 1.06
    status, same = _run(
        [one, two], [A], tmp_path / "s.db", kind="compare", precision=0.01, max_time=300, same_mode=True
    )  # the blocks both ran slow count too
    assert status == "complete" and same.outcomes[(two, "getppid")][0] == "precision"
    assert blocks(same) * 3 < blocks(plain) and blocks(same) <= blocks(fast) + 3
    same.config["same_mode"] = True
    (c,) = analyse(same)[1]
    assert c.estimand == "same mode" and c.ratio == c.same_mode.ratio == pytest.approx(1.05, rel=0.005)
