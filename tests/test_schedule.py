"""compare's scheduler (schedule.py) alone: no clock, no target, no store,
no executor -- synthetic block times and needs in, decisions out."""

import ast
import math

import pytest

from test_layout import SRC
from vmtax import plan
from vmtax.engine.jobs import jobs_of
from vmtax.model import BenchSpec
from vmtax.plan import RunConfig
from vmtax.schedule import Block, LeftOut, Schedule

ROWS = [BenchSpec(name, "kernel", "ns", "lower", "d") for name in ("getppid", "segv", "stat", "mmap")]
JOBS = {j.name: j for j in jobs_of(ROWS)}


def test_the_scheduler_imports_no_clock_target_store_or_executor():
    tree = ast.parse((SRC / "vmtax" / "schedule.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    banned = ("time", "datetime", "threading", "targets", "store", "execute", "blocks", "lockstep", "barrier")
    assert not [m for m in names if m.split(".")[-1] in banned or m.startswith(("vmtax.targets", "vmtax.store"))]
    assert "engine.budget" not in names and "session" not in str(names)


# pass 2, its first sweep: need (s) and next block (s) per row, the budget left -> rows funded in order, rows short
FUNDING = [
    # every need fits: cheapest first, each its need x PASS2_MARGIN
    ({"a": 10, "b": 5, "c": 20}, {}, 100, [("b", 6.5), ("a", 13.0), ("c", 26.0)], []),
    # the third does not fit what the first two leave: it and the rows after it go short
    ({"a": 30, "b": 5, "c": 60, "d": 80}, {}, 100, [("b", 6.5), ("a", 39.0)], ["c", "d"]),
    # a row nearly there gets at least its next block
    ({"a": 1, "b": 4}, {"a": 8}, 100, [("a", 8.0), ("b", 5.2)], []),
    # a need unknown (no interval yet) is funded in the second sweep only
    ({"a": math.inf, "b": 2}, {}, 100, [("b", 2.6)], ["a"]),
    # nothing left: nothing funded
    ({"a": 1}, {}, 0, [], ["a"]),
]


@pytest.mark.parametrize(("need", "next_s", "left", "funded", "short"), FUNDING)
def test_pass_two_funds_the_rows_cheapest_first_while_their_need_fits(need, next_s, left, funded, short):
    sched = Schedule(RunConfig(max_time=100.0), len(need))
    got, rest = sched.fund(need, next_s, elapsed=100.0 - left)
    assert [(row, round(share, 6)) for row, share in got] == funded and rest == short


def test_the_second_sweep_gives_each_row_short_its_need_or_an_even_share():
    sched = Schedule(RunConfig(max_time=100.0), 3)
    assert sched.second_share(math.inf, 40.0, 3, 0.0, final=True) == 20.0  # 60 s left over 3 rows
    assert sched.second_share(10.0, 40.0, 3, 0.0, final=True) == 13.0
    assert sched.second_share(math.inf, 40.0, 3, 0.0, final=False) is None


# rows in order, each with the seconds its first two blocks took; the budget -> rows begun, rows left out (need)
BEGIN = [
    # a quiet run: every row's floor fits
    (["getppid", "segv"], [None, None], 100.0, ["getppid", "segv"], []),
    # rows of its kind took 3 times their floor: a later row's need is 3 floors
    (["getppid", "segv", "stat"], [3.0, None, None], 0.5, ["getppid"], ["segv", "stat"]),
]


@pytest.mark.parametrize(("rows", "over", "budget", "begun", "left_out"), BEGIN)
def test_a_row_is_begun_where_its_two_blocks_fit_else_left_out_with_the_budget_that_would_add_it(
    rows, over, budget, begun, left_out
):
    cfg = RunConfig(max_time=budget)
    sched = Schedule(cfg, len(rows))
    now, got = 0.0, []
    for name, times in zip(rows, over, strict=True):
        job = JOBS[name]
        if sched.begin(job, 2, budget - now) is None:
            sched.start(job, now)
            got.append(name)
            floor = plan.two_blocks(job, 2, cfg)
            took = floor * (times or 1.0)
            sched.took_block(job, took / 2, None, now + took / 2)
            now += took
            sched.took_block(job, took / 2, None, now)
    assert got == begun
    assert [out.row for out in sched.left_out] == left_out
    for out in sched.left_out:
        floor = plan.two_blocks(JOBS[out.row], 2, cfg)
        assert out.need == pytest.approx(floor * (over[0] or 1.0))  # its kind's ratio so far, times its floor
        assert out.add == plan.budget_to_add(budget, out.need, out.left) and out.add >= 60
        assert f"--max-time {out.add // 60:.0f}m" in out.reason()
    assert isinstance(sched.begin(JOBS["mmap"], 2, -1.0), LeftOut)


# a row's block times so far, its deadline and the budget's hard end, now -> the next block (None: not begun)
NEXT = [
    ([], 10.0, 20.0, 50.0, Block("getppid", 0, True, 0.0)),  # the first block runs whenever
    ([4.0], 10.0, 20.0, 12.0, Block("getppid", 1, False, 4.0)),  # the second: within the hard end
    ([4.0], 10.0, 20.0, 17.0, None),  # past the hard end: not begun
    ([4.0, 2.0], 10.0, 20.0, 6.0, Block("getppid", 2, False, 3.0)),  # then within the row's deadline
    ([4.0, 2.0], 10.0, 20.0, 8.0, None),
    ([4.0, 2.0, 6.0, 1.0, 2.0], 100.0, 200.0, 0.0, Block("getppid", 5, False, 3.0)),  # the mean of the last three
]


@pytest.mark.parametrize(("took", "deadline", "hard_end", "now", "want"), NEXT)
def test_the_next_block_is_begun_only_where_it_should_end_in_time(took, deadline, hard_end, now, want):
    sched = Schedule(RunConfig(), 1)
    job = JOBS["getppid"]
    for s in took:
        sched.numbers[job.name] = sched.numbers.get(job.name, 0) + 1
        sched.took_block(job, s, None, 0.0)
    assert sched.next_block(job, now, deadline, hard_end, []) == want


def test_every_fourth_block_of_an_agent_row_counts_and_its_time_is_expected():
    sched = Schedule(RunConfig(), 1)
    job = JOBS["getppid"]
    blocks = [sched.next_block(job, 0.0, 1e9, 1e9, []) for _ in range(1)]
    sched.took_block(job, 2.0, 1.5, 0.0)
    for _ in range(4):
        blocks.append(sched.next_block(job, 0.0, 1e9, 1e9, []))
        sched.took_block(job, 2.0, 1.5 if blocks[-1].counting else None, 0.0)
    assert [b.counting for b in blocks] == [True, False, False, False, True]
    assert blocks[-1].expect_s == 2.0 + 1.5  # its timed processes and its counting ones
    assert not Schedule(RunConfig(parallel=2), 1).counts(job, 0)


def test_pass_one_and_the_catch_up_share_what_is_left_evenly():
    sched = Schedule(RunConfig(max_time=100.0), 4)
    assert sched.first_share(0, 0.0) == 100.0 * plan.FIRST_PASS / 4
    assert sched.first_share(3, 50.0) == 10.0  # the last row: all that is left of pass 1
    assert sched.first_share(3, 70.0) == 0.0
    assert sched.catch_up_share(0, 2, 40.0) == 20.0
