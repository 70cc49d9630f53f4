"""One session for compare and scale (engine/session.py): targets started
and stopped in one place, in parallel where a kind can, with vmtax kept off
the CPUs they are pinned to -- compare's and scale's alike."""

import os
import threading
from typing import ClassVar

import pytest

from vmtax import scale, suite
from vmtax.engine.session import TargetPool
from vmtax.errors import TargetError
from vmtax.model import BenchSpec
from vmtax.plan import RunConfig
from vmtax.runner import run_session
from vmtax.store import Store
from vmtax.targets.fake import FakeTarget

A = BenchSpec("getppid", "kernel", "ns", "lower", "d")
MINE = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(MINE) < 2, reason="keeping off a CPU needs another to go to")


class Seeing(FakeTarget):
    """A fake that notes where vmtax's own threads may run whenever it is asked to run something."""

    seen: ClassVar[list] = []

    def run_agent(self, args, timeout):  # a round's process too (FakeTarget.run_gated), in its reader thread
        if args and args[0] == "run":
            Seeing.seen.append((self.name, frozenset(os.sched_getaffinity(0))))
        return super().run_agent(args, timeout)


@two_cpus
def test_compare_and_scale_keep_vmtax_off_the_cpus_their_targets_are_pinned_to(db):
    """compare pins every target to --cpu; scale --pin spread puts copy i on
    CPU i mod n.  In both, every thread of vmtax (the reader threads of a
    round included) keeps to the other CPUs while the targets run, as long
    as one is left, and gets its CPUs back when the run ends."""
    Seeing.seen = []
    cpu = MINE[-1]
    with Store(db) as store:
        _, status, _ = run_session(
            "compare",
            "test",
            RunConfig(max_time=1, min_processes=2, cpu=cpu),
            [A],
            [Seeing("fake", {}), Seeing("fake b", {"label": "b"})],
            store,
        )
    assert status == "complete" and Seeing.seen
    assert {seen for _, seen in Seeing.seen} == {frozenset(set(MINE) - {cpu})}
    assert sorted(os.sched_getaffinity(0)) == MINE

    Seeing.seen = []
    cfg = scale.ScaleConfig(instances=(1, 2), round_time=0.01, min_rounds=2, max_rounds=2, pin="spread")
    with Store(db) as store:
        _, status, failure = scale.run_scale(
            "fake",
            lambda i: Seeing(f"fake #{i + 1}", {}),
            cfg,
            suite.select(None, ["getppid"]),
            store,
            "test",
            lambda text: None,
        )
    assert (status, failure) == ("complete", "")
    assert [name for name, _ in Seeing.seen[:3]] == ["fake #1"] * 3 and len(Seeing.seen) == 3 + 4
    one = {seen for _, seen in Seeing.seen[:3]}  # N=1: its calibration and two rounds, copy 1 on the first CPU
    assert one == {frozenset(set(MINE) - {MINE[0]})}
    both = {seen for _, seen in Seeing.seen[3:]}  # N=2: two rounds of two copies, on the first two CPUs
    rest = set(MINE) - set(MINE[:2])
    assert both == {frozenset(rest or MINE)}
    assert sorted(os.sched_getaffinity(0)) == MINE


class Booting(FakeTarget):
    """A fake that boots in two halves (as a guest does), the second in another thread."""

    capabilities = frozenset({"barrier", "parallel_start"})
    log: ClassVar[list] = []

    def __init__(self, name, options, fail=False):
        super().__init__(name, options)
        self.fail = fail

    def begin_start(self):
        Booting.log.append(("begin", self.name, threading.current_thread() is threading.main_thread()))

    def end_start(self):
        Booting.log.append(("end", self.name, threading.current_thread() is threading.main_thread()))
        if self.fail:
            raise TargetError("its console says no")

    def stop(self):
        Booting.log.append(("stop", self.name, True))


def test_a_pool_starts_in_parallel_where_a_kind_can_and_stops_every_target_whatever_happens():
    Booting.log = []
    targets = [Booting(f"b{i}", {}) for i in range(3)]
    with TargetPool() as pool:
        pool.add(targets, [None] * 3)
        got = pool.start_all(targets, lambda i: f"instance {i + 1} of 3")
        assert (got.count, got.parallel, got.alone) == (3, 3, False)
    begun = [(name, main) for what, name, main in Booting.log if what == "begin"]
    ended = [(name, main) for what, name, main in Booting.log if what == "end"]
    assert begun == [("b0", True), ("b1", True), ("b2", True)]  # launched from this thread ...
    assert sorted(ended) == [("b0", False), ("b1", False), ("b2", False)]  # ... waited for in others
    assert sorted(n for what, n, _ in Booting.log if what == "stop") == ["b0", "b1", "b2"]

    Booting.log = []
    targets = [Booting("b0", {}), Booting("b1", {}, fail=True), Booting("b2", {})]
    with pytest.raises(TargetError, match=r"instance 2 of 3 \(b1\) did not boot: its console says no"):
        with TargetPool() as pool:
            pool.add(targets, [None] * 3)
            pool.start_all(targets, lambda i: f"instance {i + 1} of 3")
    assert sorted(n for what, n, _ in Booting.log if what == "stop") == ["b0", "b1", "b2"]

    Booting.log = []
    with pytest.raises(KeyboardInterrupt):
        with TargetPool() as pool:
            pool.add(targets[:1], [None])
            raise KeyboardInterrupt
    assert [n for what, n, _ in Booting.log if what == "stop"] == ["b0"]  # added, never started: stopped too
