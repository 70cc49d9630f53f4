"""One session for every run of compare and scale: the run's record from
its first row to its status on every exit path (recorded), its targets
started and stopped in one place with vmtax kept off the CPUs they are
pinned to (TargetPool), its writes (execute.Recorder) and its budget
(budget.Deadline, begun where the caller's measuring begins)."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import __version__
from ..errors import StoreError, TargetError
from ..model import TargetInfo
from ..proc import keep_off, signals_held
from ..store.base import Store
from ..targets.base import Target
from .budget import Deadline
from .execute import Recorder

T = TypeVar("T")

Note = Callable[[str], None]


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]


def recorded(
    store: Store,
    kind: str,
    command: str,
    config: dict[str, Any],
    body: Callable[[str], str],
    failures: tuple[type[Exception], ...] = (StoreError,),
    describe: Callable[[Exception], str] = str,
    closing: Callable[[], None] | None = None,
) -> tuple[str, str, str]:
    """A run's record from its first row to its status, on every exit
    path.  Writes the run's row (with stop signals held: a Ctrl-C arriving
    then is taken just after it, so a run is never left half-begun), calls
    body(run_id) for its status, and finishes the run with it:
    `interrupted` on a Ctrl-C, `failed` on an error.  An error of a type in
    `failures` (the store's, by default) is kept as the failure, described
    by `describe`: the samples stored before it are kept and can be
    reported; any other is raised once the run is finished.  A store that
    cannot record the run at all raises its one line.  `closing` (a
    progress display) is called first on every exit.  Returns (run_id,
    status, failure: '' when nothing went wrong)."""
    run_id = new_run_id()
    status, failure, begun = "failed", "", False
    try:
        with signals_held():
            store.new_run(run_id, kind, command, __version__, config)
            begun = True
        status = body(run_id)
    except KeyboardInterrupt:
        status = "interrupted"
    except failures as e:
        if not begun:
            raise  # nothing recorded: the store's one line
        status, failure = "failed", describe(e)
    finally:
        if closing:
            closing()
        try:
            if begun:
                store.finish_run(run_id, status)
        except StoreError as e:
            failure = failure or str(e)
    return run_id, status, failure


@dataclass
class Started:
    """How a group of targets started: how many, how many of them in
    parallel, whether the first started alone, and in how many seconds."""

    count: int
    parallel: int
    alone: bool
    seconds: float


class TargetPool:
    """The targets of a run, started and stopped in one place.  add() pins
    each to the host CPU given and hands it the files its root must hold;
    vmtax keeps off every CPU a target is pinned to from then on (proc.keep_off:
    where other CPUs are left), the set growing as the pool does.  Targets
    start one by one (start) or together (start_all: in parallel where a
    kind has "parallel_start", the first of the pool alone where its start
    settles something the others reuse), none waiting past start_by (the
    run's hard stop, where set).  close() stops every target given,
    started or not, in parallel, then gives vmtax its CPUs back."""

    def __init__(self) -> None:
        self.targets: list[Target] = []
        self._cpus: set[int] = set()
        self._kept = ExitStack()
        self.start_by: float | None = None  # the run's hard stop (time.monotonic()): no start waits past it

    def __enter__(self) -> TargetPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, targets: list[Target], cpus: Iterable[int | None], files: tuple[Any, ...] = ()) -> None:
        cpus = list(cpus)
        self.targets += targets  # before any starts: close() stops whatever did
        for t, cpu in zip(targets, cpus, strict=True):
            t.pin(cpu)
            t.provide(files)
            t.start_by = self.start_by
        pinned = self._cpus | {c for c in cpus if c is not None}
        if pinned != self._cpus:
            self._kept.close()
            self._cpus = pinned
            self._kept.enter_context(keep_off(pinned))

    def start(self, target: Target) -> None:
        """Start one target (stopped at once if its start fails)."""
        try:
            target.start()
        except BaseException:
            target.stop()
            raise

    def start_all(self, targets: list[Target], label: Callable[[int], str]) -> Started:
        """Start these targets of the pool, in parallel where they can;
        TargetError naming the first that did not start (label(i): what
        the i-th target of the pool is called), the others mid-boot
        stopped by close()."""
        t0, fresh = time.monotonic(), list(targets)
        alone = fresh[0] is self.targets[0] and fresh[0].settles_at_start()
        if alone:
            self._start_one(fresh.pop(0), label)
        parallel = [t for t in fresh if "parallel_start" in t.capabilities]
        for t in fresh:
            if "parallel_start" not in t.capabilities:
                self._start_one(t, label)
        for t in parallel:
            try:
                t.begin_start()
            except TargetError as e:
                raise TargetError(f"{self._named(t, label)} did not start: {e}") from None
        self._end_all(parallel, label)
        return Started(len(targets), len(parallel), alone, time.monotonic() - t0)

    def _named(self, t: Target, label: Callable[[int], str]) -> str:
        return f"{label(self.targets.index(t))} ({t.name})"

    def _start_one(self, t: Target, label: Callable[[int], str]) -> None:
        try:
            t.start()
        except TargetError as e:
            raise TargetError(f"{self._named(t, label)} did not start: {e}") from None

    def _end_all(self, parallel: list[Target], label: Callable[[int], str]) -> None:
        done: queue.Queue[tuple[Target, BaseException | None]] = queue.Queue()
        for t in parallel:
            threading.Thread(target=_finish_start, args=(t, done), daemon=True).start()
        for _ in parallel:  # the first failure ends the wait: close() stops the others mid-boot
            t, error = _get(done)
            if error is not None:
                raise TargetError(f"{self._named(t, label)} did not boot: {error}")

    def restart(self, targets: list[Target]) -> dict[str, str]:
        """Stop these targets of the pool and boot them afresh, in the order
        given (in parallel where they can: the stops, then the boots, all
        launched from this thread, which their processes die with); each
        keeps its CPU and its files.  Returns {name: why} of those that did
        not boot again, left stopped (close() stops the others mid-boot
        on a Ctrl-C)."""
        threads = [threading.Thread(target=_stop_quietly, args=(t,), daemon=True) for t in targets]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        failed: dict[str, str] = {}
        begun = []
        for t in targets:
            try:
                if "parallel_start" in t.capabilities:
                    t.begin_start()
                    begun.append(t)
                else:
                    self.start(t)
            except TargetError as e:
                failed[t.name] = str(e)
                _stop_quietly(t)
        done: queue.Queue[tuple[Target, BaseException | None]] = queue.Queue()
        for t in begun:
            threading.Thread(target=_finish_start, args=(t, done), daemon=True).start()
        for _ in begun:
            t, error = _get(done)
            if error is not None:
                failed[t.name] = str(error)
                _stop_quietly(t)
        return failed

    def close(self) -> None:
        """Stop every target, in parallel (a container's removal takes a
        while; a second Ctrl-C does not cut it short), then give vmtax the
        CPUs it kept off."""
        threads = [threading.Thread(target=_stop_quietly, args=(t,), daemon=True) for t in self.targets]
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():
                try:
                    th.join(0.5)
                except KeyboardInterrupt:
                    continue
        self.targets = []
        self._kept.close()
        self._cpus = set()


def _get(q: queue.Queue[T]) -> T:
    """The next item, waiting in short steps (a Ctrl-C is taken at once)."""
    while True:
        try:
            return q.get(timeout=0.5)
        except queue.Empty:
            continue


def _finish_start(t: Target, done: queue.Queue[tuple[Target, BaseException | None]]) -> None:
    """A target's end_start(), in a thread of its own: it and how it ended (None: booted) into `done`."""
    error = None
    try:
        t.end_start()
    except BaseException as e:  # told to the waiting thread
        error = e
    done.put((t, error))


def share(targets: list[Target]) -> dict[str, str]:
    """compare --shared-boot (targets/migration.py): the state of the
    first of these guests moved into a new QEMU for each of the others,
    then for itself, so that each runs as a migration's destination.
    Returns {name: why} of those that could not take it, left stopped."""
    failed: dict[str, str] = {}
    if not targets:
        return failed
    donor = targets[0]
    for t in [*targets[1:], donor]:
        try:
            t.take_state(None if t is donor else donor)
        except TargetError as e:
            failed[t.name] = f"it did not take {donor.name}'s state: {e}"
            _stop_quietly(t)
    return failed


def restart_shared(pool: TargetPool, targets: list[Target]) -> dict[str, str]:
    """compare --shared-boot's round: the first of these guests booted
    afresh (pool.restart), its state shared with the others (share); where
    it does not boot, none of them runs on."""
    if not targets:
        return {}
    failed = pool.restart(targets[:1])
    if failed:
        why = failed[targets[0].name]
        for t in targets[1:]:
            _stop_quietly(t)
        return {
            t.name: why if t is targets[0] else f"the round's boot ({targets[0].name}) failed: {why}" for t in targets
        }
    return share(targets)


def _stop_quietly(t: Target) -> None:
    try:
        t.stop()
    except Exception:  # the others must still be stopped
        pass


@dataclass
class Session:
    """What a run's measuring gets: its id, its writes, its targets and,
    once begun, its budget."""

    run_id: str
    recorder: Recorder
    pool: TargetPool
    deadline: Deadline | None = None
    failed: dict[str, str] = field(default_factory=dict)  # targets that did not start (start_each): why

    def begin(
        self, max_time: float, clock: Callable[[], float] = time.monotonic, spent_before: float = 0.0
    ) -> Deadline:
        """The budget, from now less what went before it (starting the
        targets): what is begun and every process's timeout are judged
        against it."""
        self.deadline = Deadline(max_time, clock, spent_before)
        return self.deadline


def run_session(
    store: Store,
    kind: str,
    command: str,
    config: dict[str, Any],
    body: Callable[[Session], str],
    *,
    failures: tuple[type[Exception], ...] = (StoreError,),
    describe: Callable[[Exception], str] = str,
    closing: Callable[[], None] | None = None,
) -> tuple[str, str, str]:
    """A run of compare or scale: recorded (its status on every exit path),
    body(session) measuring it, every target stopped and vmtax's CPUs given
    back whatever happens.  Returns (run_id, status, failure)."""

    def measure(run_id: str) -> str:
        with TargetPool() as pool:
            return body(Session(run_id, Recorder(store, run_id), pool))

    return recorded(store, kind, command, config, measure, failures=failures, describe=describe, closing=closing)


def start_each(session: Session, targets: list[Target], note: Note | None = None) -> list[Target]:
    """compare's targets, started one by one (each one's boot time and idle
    cost are measured alone: started together on one CPU they would read
    slower) and recorded in order.  Another host that cannot be reached (a
    remote candidate) is recorded with its error and every row of it
    failed later (the caller); the others are measured.  Returns those
    that started."""
    started = []
    for position, target in enumerate(targets):
        try:
            session.pool.start(target)
            info = target.info()
        except TargetError as e:
            if not target.remote or position == 0:
                raise
            session.failed[target.name] = str(e)
            info = TargetInfo(
                name=target.name, kind=target.kind, facts={**target.own_facts(), "start_error": str(e)[:500]}
            )
            if note:
                note(f"vmtax: {e} -- measuring the others")
        else:
            started.append(target)
        session.recorder.target(position, info)
    return started
