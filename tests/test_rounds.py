"""compare --reboot (rounds.py) against the fake target: guests booted
afresh between rounds, no two blocks of a row on one boot, a guest that
does not boot again, and what a boot's own offset does to a gate with and
without it."""

import math
import time
from functools import partial

import pytest

from helpers import Steps, new_run, vmtax_process
from vmtax import watch
from vmtax.analysis import analyse
from vmtax.engine import session
from vmtax.engine.session import TargetPool
from vmtax.model import BenchSpec
from vmtax.plan import RunConfig
from vmtax.processes import BOOTS
from vmtax.report.view import per_process
from vmtax.rounds import Rounds
from vmtax.runner import Runner
from vmtax.store import Store

A = BenchSpec("getppid", "kernel", "ns", "lower", "d")
B = BenchSpec("segv", "kernel", "ns", "lower", "d")


def _measure(db, names, specs, reboot=True, run_id="r", clock=None, shared=False, **cfg):
    """One run over fakes started in a pool, as compare's session starts
    them: in rounds with --reboot (shared: --shared-boot's), else by the
    runner; (status, stored run, targets)."""
    store = Store(db)
    targets = new_run(store, names, specs, run_id=run_id)
    cfg = {"max_time": 4, "precision": 1e-9, "seed": 1, **cfg}
    with TargetPool() as pool:
        pool.add(targets, [None] * len(targets))
        for t in targets:
            pool.start(t)
        if reboot:
            reboot_with, share = (
                (partial(session.restart_shared, pool), session.share) if shared else (pool.restart, None)
            )
            run = Rounds(
                RunConfig(**cfg),
                specs,
                targets,
                store,
                run_id,
                clock=clock or Steps(0.01),
                reboot=reboot_with,
                share=share,
            )
        else:
            run = Runner(RunConfig(**cfg), specs, targets, store, run_id, clock=clock or Steps(0.01))
        status = run.run()
    store.finish_run(run_id, status)
    return status, store.load(run_id), targets


def test_every_block_of_a_row_runs_on_a_boot_of_its_own(db):
    names = ["fake:boot_sd=0.03", "fake:boot_sd=0.03,label=b", "fake:label=host"]
    status, data, targets = _measure(db, names, [A, B])
    assert status == "complete"
    guest, twin, host = targets
    for t in (guest, twin):
        timed = [(bench, boot) for bench, boot, is_timed in t.agent.ran if is_timed]
        for spec in (A, B):
            boots = [boot for bench, boot in timed if bench == spec.name]
            assert len(boots) >= 3 and len(set(boots)) == len(boots)  # no boot serves a row twice
            blocks = {s.block for s in data.samples if s.target == t.name and s.benchmark == spec.name}
            assert len(blocks) == len(boots)
        assert t.facts()[BOOTS] == t.starts >= 3  # each round booted it once, the session first
    assert host.starts == 1 and BOOTS not in host.facts()  # what does not boot runs on
    assert {o[0] for o in data.outcomes.values()} == {"budget"}


def test_a_guest_that_does_not_boot_again_ends_its_rows_and_the_others_go_on(db):
    names = ["fake:boot_sd=0.01", "fake:boot_sd=0.01,label=b", "fake:boot_sd=0.01,boot_fail=3,label=c"]
    status, data, _ = _measure(db, names, [A, B])
    assert status == "complete"
    for spec in (A, B):
        how, why = data.outcomes[(names[2], spec.name)]
        assert how == "error" and "did not boot again" in why and "boot 3 failed" in why
        assert data.outcomes[(names[1], spec.name)][0] == "budget"
    later = {s.block for s in data.samples if s.target == names[1]}
    assert max(later) > max(s.block for s in data.samples if s.target == names[2])


def test_a_baseline_that_does_not_boot_again_ends_every_row(db):
    names = ["fake:boot_sd=0.01,boot_fail=2", "fake:boot_sd=0.01,label=b"]
    status, data, _ = _measure(db, names, [A])
    assert status == "complete"
    assert {how for how, _ in data.outcomes.values()} == {"error"}
    assert len({s.block for s in data.samples}) == 1  # the session's boots served the first round only


def test_rows_precise_stop_and_the_rest_go_on_in_rounds(db):
    names = ["fake:boot_sd=0.002,noise=0.001", "fake:boot_sd=0.002,noise=0.001,label=b"]
    quick = BenchSpec("quick", "kernel", "ns", "lower", "d")
    _, data, targets = _measure(db, names, [quick], precision=0.02, max_time=30)
    assert data.outcomes[(names[1], "quick")][0] == "precision"
    assert targets[1].starts == len({s.block for s in data.samples if not s.counting})


def test_rows_still_measured_at_the_budget_plus_its_grace_end_there_saying_why(db):
    """Samples of 2 s, a budget of 1 s: the first round's processes are
    stopped at the budget plus its 5 s grace; every row ends 'budget' once,
    with that reason, and the run is complete."""
    names = ["fake:delay=2,boot_sd=0.01", "fake:delay=2,boot_sd=0.01,label=b"]
    t0 = time.monotonic()
    status, data, _ = _measure(db, names, [A, B], max_time=1, min_time_ms=0, clock=time.monotonic)
    assert status == "complete" and time.monotonic() - t0 < 1 + 5 + 2
    for name in names:
        for spec in (A, B):
            how, why = data.outcomes[(name, spec.name)]
            assert how == "budget" and "budget plus its grace" in why, (name, spec.name, how, why)


def test_a_boots_offset_false_alarms_a_one_run_gate_and_not_one_in_rounds(tmp_path):
    """Two guests booted alike, each boot 3% apart (log sd): a run on one
    boot a side gates the boots' difference, which its blocks cannot see
    (a false alarm in 35 of 40 such runs); in rounds each block is a boot of
    its own and the A/A gate holds (2 of 40)."""
    names = ["fake:boot_sd=0.03,noise=0.005,seed={k}", "fake:boot_sd=0.03,noise=0.005,seed={j},label=aa"]
    alarms = {True: 0, False: 0}
    for reboot in (True, False):
        for k in range(10):
            pair = [n.format(k=k, j=k + 1000) for n in names]
            _, data, _ = _measure(tmp_path / f"{reboot}{k}.db", pair, [A], reboot=reboot, max_time=3)
            _, cs = analyse(data)
            rows = watch.gate(data, cs, 0.01).rows
            alarms[reboot] += any(r.verdict in ("regressed", "improved") for r in rows)
    assert alarms[False] >= 6, alarms  # the boots' offsets, read as a change
    assert alarms[True] <= 2, alarms


def test_one_boot_shared_by_both_sides_cancels_its_offset(tmp_path):
    """--shared-boot: each round one guest boots and both run in its state,
    so a boot's offset (5% here, the blocks' own noise 0.5%) is in neither
    side's ratio: no false alarm, and intervals a fraction of --reboot's,
    whose blocks each hold two boots' offsets."""
    names = ["fake:boot_sd=0.05,noise=0.005,seed={k}", "fake:boot_sd=0.05,noise=0.005,seed={j},label=aa"]
    widths: dict[bool, list[float]] = {True: [], False: []}
    alarms = 0
    for shared in (True, False):
        for k in range(5):
            pair = [n.format(k=k, j=k + 1000) for n in names]
            _, data, targets = _measure(tmp_path / f"{shared}{k}.db", pair, [A], shared=shared, max_time=3)
            (c,) = analyse(data)[1]
            widths[shared].append(math.log(c.ci.high / c.ci.low))
            if shared:
                alarms += watch.gate(data, [c], 0.01).rows[0].verdict != "pass"
                guest, twin = targets
                assert guest.starts + twin.starts - 2 == guest.facts()[BOOTS] - 1  # one boot a round, of either
    assert alarms == 0
    assert max(widths[True]) < min(widths[False]) / 3, widths


@pytest.mark.parametrize("fail", [False, True])
def test_pool_restart_shared_boots_one_and_the_others_take_its_state(fail):
    from vmtax.targets import parse_target

    targets = [
        parse_target(f"fake:boot_sd=0.01,boot_fail={2 if fail else 0}"),
        parse_target("fake:boot_sd=0.01,label=b"),
        parse_target("fake:label=host"),
    ]
    with TargetPool() as pool:
        pool.add(targets, [None] * 3)
        for t in targets:
            pool.start(t)
        failed = session.restart_shared(pool, targets[:2])
    donor, other, host = targets
    assert [t.starts for t in targets] == [2, 1, 1]
    if fail:
        assert failed == {
            donor.name: f"{donor.name}: boot 2 failed (boot_fail)",
            other.name: f"the round's boot ({donor.name}) failed: {donor.name}: boot 2 failed (boot_fail)",
        }
        return
    assert failed == {} and donor.moves == other.moves == 1
    assert other.agent.state_of == donor.agent.state_of and other.agent.boot == donor.agent.boot == 2
    with TargetPool() as pool:
        pool.add([host], [None])
        assert "cannot take another guest's state" in session.share([donor, host])[host.name]


def test_the_header_says_the_boots(db):
    _, data, targets = _measure(db, ["fake:boot_sd=0.01", "fake:boot_sd=0.01,label=b"], [A])
    data.config["reboot"] = True
    for info, t in zip(data.targets, targets, strict=True):
        info.facts[BOOTS] = t.facts()[BOOTS]
    assert f"(--reboot: {targets[0].starts} boots a guest)" in per_process(data)


def test_the_header_says_a_shared_boot(db):
    _, data, targets = _measure(db, ["fake:boot_sd=0.01", "fake:boot_sd=0.01,label=b"], [A], shared=True)
    data.config.update(reboot=True, shared_boot=True)
    for info, t in zip(data.targets, targets, strict=True):
        info.facts[BOOTS] = t.facts()[BOOTS]
    assert "its state live-migrated into every guest (--shared-boot:" in per_process(data)


def test_reboot_without_a_guest_is_one_line(tmp_path):
    r = vmtax_process("compare", "local", "local:label=b", "--reboot", db=tmp_path / "x.db", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("vmtax: --reboot boots guests (qemu, uml, xen)")


@pytest.mark.parametrize("fail", [False, True])
def test_pool_restart_boots_each_again_and_names_those_that_did_not(fail):
    from vmtax.targets import parse_target

    targets = [
        parse_target("fake:boot_sd=0.01"),
        parse_target(f"fake:boot_sd=0.01,label=b,boot_fail={2 if fail else 0}"),
    ]
    with TargetPool() as pool:
        pool.add(targets, [None, None])
        for t in targets:
            pool.start(t)
        failed = pool.restart(targets)
    assert [t.starts for t in targets] == [2, 2]
    assert failed == (
        {"fake:boot_sd=0.01,label=b,boot_fail=2": "fake:boot_sd=0.01,label=b,boot_fail=2: boot 2 failed (boot_fail)"}
        if fail
        else {}
    )
