"""Lockstep pairs (engine/lockstep.py): a block's processes held together and
stepped sample by sample, the baseline's and each candidate's back to back.
With the fake target (step=on) for the scheduling, the real agent and the
bare machine for the protocol and the clean-up."""

import math
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from conftest import AGENT
from helpers import leftovers, new_run, wait_until
from vmtax import analysis, plan, proc, schedule
from vmtax.engine import lockstep
from vmtax.engine.blocks import Turn
from vmtax.engine.budget import grace_s
from vmtax.engine.protocol import AgentReader
from vmtax.model import BenchSpec
from vmtax.runner import RunConfig, Runner
from vmtax.store import Store
from vmtax.targets import parse_target
from vmtax.targets.local import LocalTarget

A = BenchSpec("getppid", "kernel", "ns", "lower", "d")


def test_a_round_takes_every_side_once_and_treats_the_baseline_as_any_other():
    rng = random.Random(3)
    places = {0: [], 1: [], 2: [], 3: []}
    for _ in range(2000):
        order = lockstep.round_order(rng, [0, 1, 2, 3])
        assert sorted(order) == [0, 1, 2, 3]
        for place, side in enumerate(order):
            places[side].append(place)
    for got in places.values():  # every side as likely at every place: 1.5 on average
        assert abs(sum(got) / len(got) - 1.5) < 0.08


def _sides(targets, rounds, warmup=1):
    out = []
    for t in targets:
        argv = ["run", A.name, "--samples", str(rounds - warmup), "--warmup", str(warmup), "--iters", "1000", "--step"]
        out.append(lockstep.Side(t.name, t, argv, AgentReader(A)))
    return out


def _log(sides):
    """The block's samples in the order they arrived: (side, seq, warmup)."""
    got = []
    for s in sides:
        reader = AgentReader(A)
        for t, line in s.got:
            ev = reader.feed(line)
            if ev is not None and ev.kind == "sample":
                got.append((t, s.name, ev.fields["seq"], ev.fields["warmup"]))
    return [(n, seq, w) for _, n, seq, w in sorted(got)]


def test_a_block_steps_every_side_once_a_round():
    targets = [parse_target(f"fake:seed={i},step=on") for i in (1, 2, 3)]
    sides = _sides(targets, rounds=5)
    lockstep.run_block(sides, A, 5, random.Random(1), lambda: 5.0, 5.0)
    assert [s.samples for s in sides] == [5, 5, 5] and all(s.read.finished and not s.why for s in sides)
    log = _log(sides)
    names = [n for n, _, _ in log]
    for k in range(5):  # each round: one sample of each side, back to back
        assert sorted(names[3 * k : 3 * k + 3]) == sorted(t.name for t in targets)
    assert len(set(tuple(names[3 * k : 3 * k + 3]) for k in range(5))) > 1  # in orders drawn at random
    # each side's samples came in its own order, its warmups first
    for s in sides:
        mine = [(seq, w) for n, seq, w in log if n == s.name]
        assert [seq for seq, _ in mine] == list(range(len(mine)))
        assert [w for _, w in mine] == [True] * (len(mine) // 5) + [False] * (len(mine) - len(mine) // 5)
    assert all(len(s.overheads) == s.samples for s in sides)


def test_a_block_starts_its_processes_in_an_order_drawn_at_random_and_records_them_once_it_has_ended():
    """The Lockstep executor: its turns' processes started held in an
    order drawn at random, stepped, and only then each turn's process read
    and recorded from the lines it gave (nothing is written between a
    sample and the next go)."""
    events = []

    def logged(t):
        gated, step = t.run_gated, t.step

        def run_gated(argv, timeout, tool=False):
            events.append(("start", t.name))
            return gated(argv, timeout, tool)

        def stepped(warm=False):
            events.append(("go", t.name))
            step(warm)

        t.run_gated, t.step = run_gated, stepped
        return t

    def read(name, lines):
        reader = AgentReader(A)
        samples = [ev for ev in map(reader.feed, lines.open()) if ev is not None and ev.kind == "sample"]
        events.append(("read", name, len(samples), reader.read.finished))

    firsts = set()
    for seed in range(12):
        events.clear()
        targets = [logged(parse_target(f"fake:seed={i},step=on,label=s{i}")) for i in (1, 2, 3)]
        turns = [
            Turn(slot, s.target, partial(read, s.name), argv=lambda argv=s.argv: argv)
            for slot, s in enumerate(_sides(targets, rounds=4))
        ]
        lockstep.Lockstep(A, 4, random.Random(seed), lambda: 5.0, 5.0).run(turns)
        firsts.add(events[0][1])
        assert [e[0] for e in events[:3]] == ["start"] * 3
        assert [e[0] for e in events[3:]] == ["go"] * 12 + ["read"] * 3
        assert events[-3:] == [("read", t.name, 4, True) for t in targets]  # in the turns' order
    assert len(firsts) == 3  # the baseline is not always started first


def test_a_block_interrupted_mid_way_records_every_side_s_samples_so_far_then_the_interrupt(monkeypatch):
    targets = [parse_target(f"fake:seed={i},step=on") for i in (1, 2)]
    real, steps = lockstep._step, []

    def step(side, timeout):
        steps.append(side.name)
        if len(steps) == 7:  # a Ctrl-C in the fourth round
            raise KeyboardInterrupt
        real(side, timeout)

    monkeypatch.setattr(lockstep, "_step", step)
    run = lockstep.Lockstep(A, 6, random.Random(1), lambda: 5.0, 5.0)
    recorded: dict[str, int] = {}

    def turn(t):
        def record(lines):
            recorded[t.name] = sum('"sample"' in line and '"warmup": false' in line for line in lines.open())

        return Turn(
            0, t, record, lambda: ["run", A.name, "--samples", "5", "--warmup", "1", "--iters", "1000", "--step"]
        )

    with pytest.raises(KeyboardInterrupt):
        run.run([turn(t) for t in targets])
    assert sorted(recorded) == sorted(t.name for t in targets)
    assert recorded == {t.name: 2 for t in targets}  # 3 rounds before it, the first a warmup: 2 timed samples each


def test_a_failing_candidate_leaves_the_others_stepping_and_nothing_held():
    targets = [
        parse_target("fake:seed=1,step=on"),
        parse_target("fake:seed=2,step=on,crash=getppid"),
        parse_target("fake:seed=3,step=on"),
    ]
    sides = _sides(targets, rounds=6)
    began = time.monotonic()
    lockstep.run_block(sides, A, 6, random.Random(2), lambda: 5.0, 5.0)
    assert time.monotonic() - began < 5  # no side was waited on to its timeout
    base, crashed, other = sides
    assert "Segmentation fault" in crashed.why and crashed.samples == 2
    assert other.samples == 6 and not other.why and base.samples == 6 and not base.why


def test_a_skipping_side_says_why_and_a_baseline_that_fails_lets_every_candidate_go():
    targets = [parse_target("fake:seed=1,step=on,skip=getppid"), parse_target("fake:seed=2,step=on")]
    sides = _sides(targets, rounds=4)
    began = time.monotonic()
    lockstep.run_block(sides, A, 4, random.Random(2), lambda: 5.0, 5.0)
    assert time.monotonic() - began < 5
    assert sides[0].read.skipped == "fake target skips it" and sides[1].samples == 0
    assert sides[1]._thread is None  # its process was released and read to its end


def test_a_side_that_falls_silent_is_dropped_at_its_step_timeout():
    targets = [parse_target("fake:seed=1,step=on"), parse_target("fake:seed=2,step=on,delay=3")]
    sides = _sides(targets, rounds=3)
    lockstep.run_block(sides, A, 3, random.Random(2), lambda: 0.5, 5.0)
    # which side, and how long it was waited for (not the time left after the wait: "within 0 s")
    assert sides[1].why == f"{targets[1].name} did not answer its go within 0.5 s" and sides[0].why == ""


def _my_agents() -> list[str]:
    """This process's children that are agents, zombies aside."""
    out = []
    for entry in filter(str.isdigit, __import__("os").listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if name.startswith("vmtax-agent") and int(rest[1]) == __import__("os").getpid() and rest[0] != "Z":
            out.append(entry)
    return out


def _fake_run(db, specs: list[str], cfg: RunConfig):
    """A compare of fake targets (the first the baseline) stored in db as run "r"; the targets."""
    store = Store(db)
    targets = [parse_target(spec) for spec in specs]
    store.new_run("r", "compare", "t", "0", {})
    for i, t in enumerate(targets):
        store.add_target("r", i, t.info(), "h")
    store.add_benchmarks("r", [A])
    assert Runner(cfg, [A], targets, store, "r").run() == "complete"
    return targets


def _block_sides(con: sqlite3.Connection) -> list[set[str]]:
    """Run "r"'s timed blocks in order, each as the set of targets its processes ran on."""
    return [
        set(names.split())
        for _, names in con.execute(
            "SELECT block, group_concat(target, ' ') FROM (SELECT block, target FROM processes "
            "WHERE run_id='r' AND block >= 0 AND slot < 3 ORDER BY block, slot) GROUP BY block ORDER BY block"
        )
    ]


def test_the_runner_measures_in_lockstep_and_records_one_process_per_side_and_block(tmp_path):
    db = tmp_path / "v.db"
    cfg = RunConfig(precision=0.02, max_time=60, min_processes=4, seed=7)
    assert cfg.pairing == "lockstep"
    targets = _fake_run(
        db,
        ["fake:seed=1,noise=0.01,step=on", "fake:seed=2,noise=0.01,step=on,scale=1.1", "fake:seed=3,noise=0.01"],
        cfg,
    )  # the last without step: in turn, after the lockstep pairs
    con = sqlite3.connect(db)
    per_block = con.execute(
        "SELECT block, group_concat(target || ':' || slot, ' ') FROM processes "
        "WHERE run_id='r' AND block >= 0 AND slot < 3 GROUP BY block"
    ).fetchall()
    assert per_block and all(len(sides.split()) == 3 for _, sides in per_block)
    size = plan.step_sizes(targets[0].name, {t.name: (1000, 100.0) for t in targets}, cfg)
    timed = con.execute(
        "SELECT target, count(*) FROM samples WHERE run_id='r' AND warmup=0 AND counting=0 "
        "AND block=1 GROUP BY target ORDER BY target"
    ).fetchall()
    got = dict(timed)
    # a sample of each side a round: as many rounds as a block in turn's time holds, its warm turns counted
    assert got[targets[0].name] == got[targets[1].name]
    assert plan.MIN_STEP_ROUNDS <= got[targets[0].name] < size.rounds - size.warmup
    assert got[targets[2].name] == cfg.samples_per_process  # the one without step: today's process
    ratio = (
        con.execute(
            "SELECT avg(value) FROM samples WHERE target=? AND warmup=0 AND counting=0", (targets[1].name,)
        ).fetchone()[0]
        / con.execute(
            "SELECT avg(value) FROM samples WHERE target=? AND warmup=0 AND counting=0", (targets[0].name,)
        ).fetchone()[0]
    )
    assert 1.08 < ratio < 1.12
    assert isinstance(targets[1].facts().get("lockstep_go_ms"), float)


def test_after_two_blocks_of_all_a_block_holds_the_baseline_and_one_group_of_candidates_in_turn(tmp_path):
    """A quick candidate and one ten times slower: the first two blocks
    hold all three (every ratio at once), the later ones the baseline and
    either candidate, taking turns; the ratios are the same."""
    db = tmp_path / "g.db"
    targets = _fake_run(
        db,
        [f"fake:seed={i},noise=0.01,step=on{scale}" for i, scale in ((1, ""), (2, ",scale=1.1"), (3, ",scale=10"))],
        RunConfig(precision=0.002, max_time=60, min_processes=6, seed=3),
    )
    con = sqlite3.connect(db)
    base, quick, slow = (t.name for t in targets)
    sides = _block_sides(con)
    assert len(sides) > plan.STEP_TOGETHER + 4
    assert all(s == {base, quick, slow} for s in sides[: plan.STEP_TOGETHER])
    later = sides[plan.STEP_TOGETHER :]
    while later and later[-1] != {base, quick} and later[-1] != {base, slow}:
        later.pop()
    pairs = [s - {base} for s in later]
    assert pairs[:4] == [{quick}, {slow}, {quick}, {slow}]  # the quicker group first, then in turn
    for name, want in ((quick, 1.1), (slow, 10.0)):
        got = [
            con.execute(
                "SELECT avg(value) FROM samples WHERE target=? AND warmup=0 AND counting=0 AND block IN "
                "(SELECT block FROM processes WHERE run_id='r' AND target=?)",
                (t, name),
            ).fetchone()[0]
            for t in (name, base)
        ]
        assert abs(got[0] / got[1] / want - 1) < 0.03


def test_once_each_group_has_its_processes_the_one_nearest_its_goal_takes_the_blocks(tmp_path):
    """A quick quiet candidate and a slow noisy one: after the turns that
    give each --min-processes, the quick one's blocks come until it is
    precise, then the slow one's (not turns: the quick one's ±1% was a
    few blocks away)."""
    db = tmp_path / "n.db"
    targets = _fake_run(
        db,
        ["fake:seed=1,noise=0.01,step=on", "fake:seed=2,noise=0.04,step=on,scale=1.1"]
        + ["fake:seed=3,noise=0.08,step=on,scale=10"],
        RunConfig(precision=0.01, max_time=30, min_processes=6, seed=5),
    )
    con = sqlite3.connect(db)
    base, quick, slow = (t.name for t in targets)
    later = [s - {base} for s in _block_sides(con)][plan.STEP_TOGETHER + 2 * (6 - 2) :]
    assert later and later[0] == {quick}, later
    firsts = later.index({slow})
    assert set(map(frozenset, later[firsts:])) == {frozenset({slow})}, later  # the quick one no more
    outcome = dict(con.execute("SELECT target, stopped_by FROM outcomes WHERE run_id='r'").fetchall())
    assert outcome[quick] == "precision", outcome


def test_step_groups_put_candidates_alike_in_speed_together():
    # the demo's getppid (ns an iteration): a container, a TCG guest 2.3 times it, UML 50 times
    assert plan.step_groups({"container": 400, "qemu": 930, "uml": 19700}) == [["container"], ["qemu"], ["uml"]]
    # segv: the guest and UML alike, the container apart
    assert plan.step_groups({"qemu": 4400, "uml": 5700, "container": 390}) == [["container"], ["qemu", "uml"]]
    assert plan.step_groups({"aa": 100, "slow": 103}) == [["aa", "slow"]]  # an A/A pair and a 3% slower self
    assert plan.step_groups({"a": 0.0, "b": 900}) == [["a", "b"]]  # a time unknown: one block for all


def test_a_row_s_groups_take_turns_until_each_has_its_processes_then_the_nearest_its_goal_that_fits_goes_first():
    need = schedule.GroupNeed
    # a container's group (0.1 s a block, ±1.3% after 22 blocks), UML's (0.6 s, ±1.4% after 21), a guest's
    demo = [need(22, 0.1, 0.013), need(21, 0.6, 0.014), need(21, 0.18, 0.045)]
    assert [round(n.time_to_goal(0.01), 2) for n in demo] == [1.52, 12.1, 72.77]
    assert schedule.next_group(demo, 10, 0.01) == 0
    assert schedule.next_group(demo[1:], 10, 0.01) == 0  # the container precise: UML's next
    # before --min-processes: the fewest first, the quicker group among equals
    assert schedule.next_group([need(3, 0.1, 0.01), need(2, 0.6, 0.1), need(2, 0.2, 0.1)], 10, 0.01) == 1
    assert schedule.next_group([need(3, None, math.inf), need(3, None, math.inf)], 10, 0.01) == 0
    # then a group never timed alone, then the cheapest; those of unknown need take turns
    assert schedule.next_group([need(12, 0.1, 0.02), need(10, None, 0.5)], 10, 0.01) == 1
    assert schedule.next_group([need(12, 0.1, math.inf), need(11, 0.2, math.inf)], 10, 0.01) == 1
    assert schedule.next_group([need(12, 0.1, 0.02), need(11, 0.2, math.inf)], 10, 0.01) == 0
    # of those the row's share can finish; where none, in turn (fewest processes first)
    assert schedule.next_group(demo, 10, 0.01, left=20.0) == 0
    assert schedule.next_group(demo[1:], 10, 0.01, left=20.0) == 0  # UML's 12 s fit
    assert schedule.next_group([need(22, 0.6, 0.014), demo[2]], 10, 0.01, left=5.0) == 1  # neither: the guest's turn
    assert schedule.next_group([need(30, 0.1, 0.03), need(12, 0.6, 0.02)], 10, 0.01, left=5.0) == 1


def test_step_sizes_keep_the_timed_time_of_a_process_and_halve_for_a_slow_target():
    cfg = RunConfig(step_ms=1.0)  # 3 samples of 10 ms, 1 warmup; lockstep samples of 1 ms
    s = plan.step_sizes("a", {"a": (10000, 1000.0), "b": (5000, 2000.0)}, cfg)
    assert (s.iters, s.rounds, s.warmup) == (1000, 30 + plan.STEP_WARMUP_ROUNDS, plan.STEP_WARMUP_ROUNDS)
    slow = plan.step_sizes("a", {"a": (10000, 1000.0), "b": (100, 100000.0)}, cfg)
    # halved down to the baseline's floor: its sample 1/FASTEST_SHARE of --step-ms
    assert slow.iters * 1000.0 == 1e6 / plan.FASTEST_SHARE
    # from a count that is not a power of two (UML's getppid, 84 times the bare machine's): 205 -> 102 -> 51
    uml = plan.step_sizes("l", {"l": (2048, 4880.0), "u": (32, 410000.0)}, cfg)
    assert uml.iters == 51 and uml.iters // 2 * 4880.0 < 1e6 / plan.FASTEST_SHARE


@pytest.mark.e2e
def test_the_real_agent_steps_sample_by_sample_and_stops_on_another_line():
    p = subprocess.Popen(
        [AGENT, "run", "getppid", "--samples", "2", "--warmup", "1", "--min-time-ms", "1", "--step"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    types = [__import__("json").loads(p.stdout.readline())["type"] for _ in range(2)]
    assert types == ["calibration", "ready"]
    p.stdin.write("go\n")
    p.stdin.flush()
    assert '"seq":0' in p.stdout.readline()
    p.stdin.write("stop\n")
    p.stdin.flush()
    rest = p.stdout.read()
    assert p.wait(10) == 3 and "expected the line 'go'" in rest
    bad = subprocess.run([AGENT, "run", "getppid", "--step", "--parallel", "2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--step" in bad.stderr


@pytest.mark.e2e
def test_two_bare_machine_agents_in_lockstep_and_none_left_when_a_block_is_cut_short():
    targets = [parse_target("local"), parse_target("local:label=b")]
    for t in targets:
        t.__enter__()
    try:
        sides = _sides(targets, rounds=20)
        for s in sides:
            s.argv[s.argv.index("--iters") + 1] = "200"
        lockstep.run_block(sides, A, 20, random.Random(4), lambda: 10.0, 30.0)
        assert [s.samples for s in sides] == [20, 20] and all(s.read.finished for s in sides)
        # cut short: the candidate fails at once; the baseline, held at its go, is let go
        sides = _sides(targets, rounds=50)
        sides[1].argv[sides[1].argv.index("--iters") + 1] = "0"  # refused by the agent: exit 2
        lockstep.run_block(sides, A, 50, random.Random(4), lambda: 10.0, 30.0)
        assert sides[1].why and not sides[0].why
        assert not _my_agents()
    finally:
        for t in targets:
            t.__exit__(None, None, None)


def test_a_slow_round_takes_fewer_rounds_a_quick_one_the_most():
    cfg = RunConfig()
    size = plan.StepSizes(iters=100, rounds=33, warmup=3)
    quick = plan.step_rounds(size, [1.0, 1.0], [0.3, 0.3], cfg)  # the bare machine against itself
    # a block in turn's 80 ms of samples, at 1.3 ms a sample and its go, and an untimed sample each (warm)
    assert (quick.rounds, quick.warmup, quick.iters) == (3 + round(80 / (2 * 1.3 + 2 * 1.0)), 3, 100)
    # UML's getppid (21 ms a sample) and a guest whose go takes 7.5 ms beside the baseline: a block of
    # four targets in turn is 160 ms of samples, so is this one's, at 10 rounds at least
    slow = plan.step_rounds(size, [0.125, 3.0, 0.15, 21.0], [0.3, 7.5, 0.6, 0.8], cfg)
    assert slow.rounds == plan.MIN_STEP_ROUNDS + 3
    # a visit is an untimed sample, a timed one and a go: UML's 42.8 ms, the guest's 13.5, the quick sides' < 1
    assert slow.visits == (8, 3, 8, 1)  # the quick sides eight samples a round, the guest 3, UML one
    # a container beside the bare machine (samples alike): one sample each a round, as many rounds as fit
    mid = plan.step_rounds(size, [1.0, 1.5], [0.3, 0.5], cfg)
    assert mid.visits == (1, 1) and 10 + 3 < mid.rounds < 33 and mid.rounds - 3 == round(80 / (1.3 + 2.0 + 1.0 + 1.5))


def test_a_quick_side_takes_more_samples_a_round_and_sides_alike_as_many():
    # the demo's getppid: the bare machine 0.25 ms a sample, a TCG guest 0.7 (its go 6 ms), UML 19, a container 0.3
    # (a visit: an untimed sample, the timed one and the go: UML's 38.75 ms, the guest's 7.5)
    visits = plan.step_visits([0.25, 0.7, 19.0, 0.3], [0.24, 6.1, 0.75, 0.52])
    assert visits == [8, 5, 1, 8]
    # an A/A pair: as many visits each, however their go's round trips differ
    assert plan.step_visits([1.0, 1.3, 9.0], [0.2, 0.9, 0.3]) == [8, 8, 1]
    assert plan.step_visits([1.0, 1.0], [0.3, 0.3]) == [1, 1]
    assert plan.step_visits([0.0, 1.0], [0.3, 0.3]) == [1, 1]  # a time unknown: one each
    rng = random.Random(5)
    for _ in range(20):  # each side's visits back to back: a turn
        order = lockstep.round_order(rng, [0, 1, 2], {0: 3, 1: 1, 2: 3})
        assert sorted(order) == [0, 0, 0, 1, 2, 2, 2]
        turns = [k for i, k in enumerate(order) if i == 0 or order[i - 1] != k]
        assert sorted(turns) == [0, 1, 2]  # three runs: one turn a side


def test_a_block_with_visits_steps_each_side_its_samples_a_round():
    targets = [parse_target(f"fake:seed={i},step=on") for i in (1, 2)]
    sides = _sides(targets, rounds=4)
    sides[0].argv[sides[0].argv.index("--samples") + 1] = str(3 * 3)  # 3 timed rounds of 3, 1 warmup round of 3
    sides[0].argv[sides[0].argv.index("--warmup") + 1] = "3"
    lockstep.run_block(sides, A, 4, random.Random(1), lambda: 5.0, 5.0, visits=[3, 1])
    assert [s.samples for s in sides] == [12, 4] and all(s.read.finished and not s.why for s in sides)
    log = _log(sides)
    names = [n for n, _, _ in log]
    a, b = targets[0].name, targets[1].name
    for k in range(4):  # each round: the first's turn of three and the second's of one, in either order
        assert names[4 * k : 4 * k + 4] in ([a, a, a, b], [b, a, a, a])
    # every timed sample comes right after an untimed one (the agent's "warm" line)
    for t in targets:
        assert t.warm_steps == names.count(t.name)


def test_a_candidate_far_quicker_than_the_baseline_still_takes_a_sample_its_clock_can_time():
    # a guest under nested KVM as the baseline (cpuid exits: 80 us), the bare machine 20 ns a cpuid
    cfg = RunConfig()
    size = plan.step_sizes("kvm", {"kvm": (125, 80000.0), "local": (500000, 20.0)}, cfg)
    assert size.iters * 20.0 >= cfg.step_ms * 1e6 / plan.FASTEST_SHARE


def test_a_sides_sample_time_comes_from_its_samples_once_it_has_some_not_one_calibration():
    """Visits follow each side's sample time: its calibration's only until
    it has taken STEP_SAMPLES_KNOWN samples, then their median, so that a
    twin whose one calibration read twice as slow runs alike again."""
    from types import SimpleNamespace

    from vmtax.model import Sample
    from vmtax.processes import STEP_SAMPLES_KNOWN, Processes, TargetState

    procs = SimpleNamespace(found={A.name: {"aa": (5000, 2000.0)}})  # its count and ns an iteration, as calibrated
    target = SimpleNamespace(name="aa")
    st = TargetState()
    assert Processes._sample_ms(procs, A, target, st, 1000) == 2.0  # calibration: 1000 x 2 us
    for k in range(STEP_SAMPLES_KNOWN):  # then samples of 10 ops an iteration at 100 ns (and one outlier)
        value = 5000.0 if k == 0 else 100.0
        st.take(Sample(A.name, "aa", value, "ns", 1, k, block=0, iters=1000, ops=10000))
    assert Processes._sample_ms(procs, A, target, st, 1000) == 1.0


# -- a side that floods or never answers, with real processes (issue 58 items 3 and 4) --------------
# The real agent behind a relay that passes its go lines until the third, then floods its output
# with lines that are no sample (blank, or of a type no reader knows) or swallows every line
# (never answers a go, nor the stop that lets it go).
RELAY = r"""
import os, subprocess, sys
mode, agent, args = sys.argv[1], sys.argv[2], sys.argv[3:]
child = subprocess.Popen([agent, *args], stdin=subprocess.PIPE)
gos = 0
for line in sys.stdin.buffer:
    gos += line.strip() == b"go"
    if gos >= 3:
        if mode == "silent":
            continue
        junk = b"\n" if mode == "blank" else b'{"schema": 1, "type": "chatter"}\n'
        while True:
            os.write(1, junk * 512)
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
sys.exit(child.wait())
"""


class _Relayed(LocalTarget):
    """The bare machine whose held agent runs behind RELAY in `mode`."""

    def __init__(self, mode: str):
        super().__init__(f"local:label={mode}", {"label": mode})
        self.mode = mode

    def run_gated(self, argv, timeout, tool=False):
        cmd = [sys.executable, "-c", RELAY, self.mode, str(AGENT), *argv]
        return proc.stream_lines(cmd, timeout=timeout, hold=self._hold)


def _relays_left(mode: str) -> list[str]:
    return [line for line in leftovers(f"-c {RELAY[:20]}") if f" {mode} " in line]


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["blank", "chatter"])
def test_a_side_flooding_lines_after_a_go_fails_that_step_and_is_stopped(mode):
    """Before: a flood never let the step's wait end (each line came before
    its deadline), and the block ran until the process's own timeout, then
    through the lines read meanwhile."""
    targets = [parse_target("local"), _Relayed(mode)]
    sides = _sides(targets, rounds=20)
    t0 = time.monotonic()
    lockstep.run_block(sides, A, 20, random.Random(4), lambda: 10.0, 30.0)
    took = time.monotonic() - t0
    assert f"more than {lockstep.STRAY_LINES} lines after a go that are no sample" in sides[1].why
    assert sides[0].why == "" and took < 5, (took, sides[0].why)
    assert wait_until(lambda: not _relays_left(mode) and not _my_agents(), 5), _relays_left(mode)


@pytest.mark.e2e
def test_a_side_that_never_answers_says_which_and_how_long_and_is_let_go_by_the_block_s_end():
    targets = [parse_target("local"), _Relayed("silent")]
    sides = _sides(targets, rounds=20)
    t0 = time.monotonic()
    lockstep.run_block(sides, A, 20, random.Random(4), lambda: 1.5, 4.0)
    took = time.monotonic() - t0
    assert sides[1].why == f"{targets[1].name} did not answer its go within 1.5 s" and not sides[1].hung
    assert sides[0].why == "" and took < 4.0 + 1.0, took  # its join bounded by the block's timeout (not 10 s)
    assert wait_until(lambda: not _relays_left("silent"), 5), _relays_left("silent")


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["silent", "chatter"])
def test_a_run_with_a_hung_or_flooding_candidate_ends_by_its_hard_stop_saying_why(tmp_path, mode):
    """The runner, a budget shorter than the step timeout: the run ends by
    --max-time and its grace (a flood ran 33 s against a 25 s bound), and
    the candidate's row says it hung and how long -- not "stopped at the
    budget plus its grace", with a hint to raise --max-time."""
    store = Store(tmp_path / "v.db")
    targets = new_run(store, [parse_target("local"), _Relayed(mode)], [A])
    cfg = RunConfig(max_time=3.0, min_processes=2)
    t0 = time.monotonic()
    Runner(cfg, [A], targets, store, "r", clock=time.monotonic).run()
    took = time.monotonic() - t0
    how, why = store.load("r").outcomes[(targets[1].name, A.name)]
    assert took < cfg.max_time + grace_s(cfg.max_time) + 1.0, took  # the hard stop, and its processes' ends
    assert how == "error", (how, why)
    if mode == "silent":
        assert why.startswith(f"{targets[1].name} did not answer its go within "), why
        assert float(why.split("within ")[1].split()[0]) >= lockstep.HUNG_AFTER
    else:
        assert "lines after a go that are no sample" in why
    assert wait_until(lambda: not _relays_left(mode), 5), _relays_left(mode)


def test_a_block_of_k_processes_a_side_holds_k_lockstep_pairs_and_counts_as_one_block(tmp_path):
    db = tmp_path / "v.db"
    cfg = RunConfig(precision=0.001, max_time=4, min_processes=3, seed=7, block_processes=3, median=True)
    targets = _fake_run(db, ["fake:seed=1,noise=0.01,step=on", "fake:seed=2,noise=0.01,step=on,scale=1.1"], cfg)
    con = sqlite3.connect(db)
    per = con.execute(
        "SELECT p.block, p.target, count(DISTINCT p.process), count(s.value) FROM processes p JOIN samples s "
        "ON s.run_id=p.run_id AND s.process=p.process AND s.warmup=0 AND s.counting=0 "
        "WHERE p.run_id='r' AND p.block >= 0 GROUP BY p.block, p.target"
    ).fetchall()
    blocks = {b for b, *_ in per}
    assert len(blocks) >= 2 and all(n == 3 for _, _, n, _ in per)  # three processes a side in every block
    # each process of a block its share of the block's rounds, never fewer than MIN_STEP_ROUNDS
    size = plan.step_sizes(targets[0].name, {t.name: (1000, 100.0) for t in targets}, cfg)
    assert all(plan.MIN_STEP_ROUNDS * 3 <= s <= size.rounds - size.warmup for _, _, _, s in per)
    # the block is the unit: one value a side a block, the geometric mean of its processes' medians
    store = Store(db)
    data = store.load("r")
    key = (targets[1].name, A.name)
    got = analysis.block_means(data.samples, median=True)[key]
    assert set(got) == blocks
    b = min(blocks)
    procs: dict[int, list[float]] = {}
    for s in data.samples:
        if (s.target, s.benchmark) == key and s.block == b and not s.warmup and not s.counting:
            procs.setdefault(s.process, []).append(s.value)
    want = math.exp(sum(math.log(statistics.median(v)) for v in procs.values()) / 3)
    assert got[b] == pytest.approx(want)
    ratio = statistics.median(
        got[k] / analysis.block_means(data.samples, median=True)[(targets[0].name, A.name)][k] for k in got
    )
    assert 1.07 < ratio < 1.13


def test_k_processes_a_block_share_its_rounds_and_a_slow_row_keeps_its_fewest_each():
    size = plan.StepSizes(iters=100, rounds=203, warmup=3)
    one, four = RunConfig(), RunConfig(block_processes=4)
    quick1, quick4 = (plan.step_rounds(size, [0.1, 0.1], [0.2, 0.2], c) for c in (one, four))
    assert quick4.warmup == quick1.warmup == 3  # each process its own warmup
    assert quick1.rounds - 3 == 100 and quick4.rounds - 3 == 25  # 80 ms of rounds of 0.8 ms, a quarter each
    slow1, slow4 = (plan.step_rounds(size, [10.0, 10.0], [1.0, 1.0], c) for c in (one, four))
    assert slow1.rounds - 3 == slow4.rounds - 3 == plan.MIN_STEP_ROUNDS  # a slow row's pair keeps its 10
