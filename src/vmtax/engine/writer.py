"""What a run writes to its store, typed: the StoreWriter protocol (a
Store is one), and ThreadRelay, a StoreWriter that hands the writes of
other threads to the thread that owns the store."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from ..errors import StoreError
from ..model import BenchSpec, ProcessRecord, Sample, TargetInfo

# a store call handed to the store's thread: the method, its arguments, its end, what it raised
_Call = tuple[Callable[..., None], tuple[object, ...], threading.Event, dict[str, BaseException]]


class StoreWriter(Protocol):
    """The writes of a run in progress (store.base.Store has them all)."""

    def add_target(self, run_id: str, position: int, info: TargetInfo, agent_hash: str) -> None: ...
    def add_benchmarks(self, run_id: str, specs: list[BenchSpec]) -> None: ...
    def add_sample(self, run_id: str, s: Sample) -> None: ...
    def add_process(self, run_id: str, p: ProcessRecord) -> None: ...
    def set_outcome(self, run_id: str, target: str, bench: str, stopped_by: str, reason: str = "") -> None: ...


class ThreadRelay:
    """A store's writes, made in the thread that made the relay whatever
    thread calls: the threads that measure other machines at the same time
    (blocks.InTurn) hand their writes to it, each sample still stored as it
    arrives, and a store that keeps to one thread (SQLite) works."""

    def __init__(self, store: StoreWriter):
        self._store, self._home = store, threading.get_ident()
        self._calls: queue.Queue[_Call] = queue.Queue()
        self._open = False

    def add_target(self, run_id: str, position: int, info: TargetInfo, agent_hash: str) -> None:
        self._call(self._store.add_target, run_id, position, info, agent_hash)

    def add_benchmarks(self, run_id: str, specs: list[BenchSpec]) -> None:
        self._call(self._store.add_benchmarks, run_id, specs)

    def add_sample(self, run_id: str, s: Sample) -> None:
        self._call(self._store.add_sample, run_id, s)

    def add_process(self, run_id: str, p: ProcessRecord) -> None:
        self._call(self._store.add_process, run_id, p)

    def set_outcome(self, run_id: str, target: str, bench: str, stopped_by: str, reason: str = "") -> None:
        self._call(self._store.set_outcome, run_id, target, bench, stopped_by, reason)

    def _call(self, method: Callable[..., None], *args: object) -> None:
        if threading.get_ident() == self._home:
            method(*args)
            return
        if not self._open:
            raise StoreError("the run ended: nothing more is stored")
        done = threading.Event()
        box: dict[str, BaseException] = {}  # what the store's thread raised
        self._calls.put((method, args, done, box))
        while not done.wait(0.5):
            if not self._open:
                raise StoreError("the run ended: nothing more is stored")
        if "error" in box:
            raise box["error"]

    def serve(self, lanes: list[Callable[[], object]]) -> None:
        """Run each lane in a thread of its own, doing their store calls
        here until all have ended; the first error of one is raised here
        once all have ended (a Ctrl-C at once: the lanes' calls fail)."""
        errors: list[BaseException] = []

        def run(lane: Callable[[], object]) -> None:
            try:
                lane()
            except BaseException as e:  # handed to the serving thread
                errors.append(e)

        threads = [threading.Thread(target=run, args=(lane,), daemon=True) for lane in lanes]
        self._open = True
        try:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads) or not self._calls.empty():
                try:
                    method, args, done, box = self._calls.get(timeout=0.05)
                except queue.Empty:
                    continue
                try:
                    method(*args)
                except Exception as e:
                    box["error"] = e
                done.set()
        finally:
            self._open = False
        if errors:
            raise errors[0]
