"""Command line: parsing and dispatch.  Every command checks its options
(one range check: check_options), calls the library, and prints what the
report modules give it -- a stored run's report and exit code come from
report/console.py, doctor's from report/doctor.py.

Exit codes (report/console.py): 0 done; 1 vmtax could not do it (a target
failed to start...); 2 bad input; 3 finished, but some benchmark failed
(its error is in the report); a gate (gate, compare --gate): 1 regressed,
3 inconclusive only, 4 a row the candidate or the baseline failed (nothing
to judge there); 130 interrupted (what was measured is kept).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import sys
import time
from dataclasses import replace
from typing import Any, NoReturn

from . import __version__, noise, proc, stats, suite, watch
from . import inventory as inventories
from .analysis import analyse
from .errors import UserError, VmtaxError
from .model import BOOTED_KINDS
from .plan import (
    MIN_STEP_ROUNDS,
    SHARED_BOOT_SAMPLES,
    RunConfig,
    budget_shortfall,
    precision_for,
)
from .report import console, csvout, explain, facts, html, jsondoc, markdown, terminal
from .report import doctor as doctor_report
from .report import watch as watch_report
from .report.progress import TerminalProgress
from .report.safe import inert, one_line
from .report.units import parse_duration, parse_precision
from .rounds import booted
from .runner import run_session
from .serve import summary
from .store import Store, default_db_path, redact
from .suite import workloads
from .targets import KINDS, parse_target, parse_targets
from .targets import prepare as prepare_targets
from .targets.base import Target
from .targets.migration import prepare_shared

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BENCH_ERROR, EXIT_INTERRUPTED = (
    console.EXIT_OK,
    console.EXIT_FAIL,
    console.EXIT_USAGE,
    console.EXIT_BENCH_ERROR,
    console.EXIT_INTERRUPTED,
)
REFERENCE_HELP = (
    "gate on ratios adjusted by the reference loop the agent times around every sample (a "
    "control variate: the host's state taken out), for a candidate that runs that loop as the "
    "baseline does (one kind of target; QEMU under KVM, or one QEMU build under TCG) and whose "
    "reference ratio is 1 within its interval; other candidates and rows without readings are "
    "gated as measured; the gate says which"
)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise UserError(f"{message} (see `{self.prog} --help`)")


def say(text: str = "", stream=None) -> None:
    """Print for a person: whatever came from a target or the store is made
    inert first (no control sequences reach the terminal), and no password
    (store.redact) is ever printed."""
    print(inert(redact(text)), file=stream or sys.stdout)


def _json_out(doc: object, dest: str) -> None:
    _write_text(console.json_text(doc), dest)


def _write_text(text: str, dest: str) -> None:
    text = inert(redact(text))  # a file keeps no control sequence from a target either
    if dest == "-":
        sys.stdout.write(inert(text))
        return
    try:
        with open(dest, "w") as f:
            f.write(text)
    except OSError as e:
        raise UserError(f"cannot write {dest}: {e.strerror}") from None


OUTPUTS = ("json", "markdown", "html", "csv", "junit")  # the options that name a file to write


def check_outputs(args) -> None:
    """Every output file named can be written, before any work (a compare
    of minutes, then "cannot write"): an existing file is opened for
    appending; where there is none yet (a dangling symlink's target
    included), a file of the check's own is made and removed in the
    directory it would be written to, and the file itself is never made.
    A pipe or a device is only asked whether it may be written (opening a
    FIFO waits for its reader)."""
    import stat

    for flag in OUTPUTS:
        dest = getattr(args, flag, None)
        if not dest or dest == "-":
            continue
        try:
            mode = os.stat(dest).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            if not os.access(dest, os.W_OK):
                raise UserError(f"--{flag} {dest}: cannot write there: permission denied")
            continue
        try:
            if mode is None:
                _probe_dir(os.path.dirname(os.path.realpath(dest)))
            else:
                with open(dest, "a"):
                    pass
        except OSError as e:
            raise UserError(f"--{flag} {dest}: cannot write there: {e.strerror}") from None


def _probe_dir(folder: str) -> None:
    """OSError unless a new file can be made in folder (one is, and removed at once)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix=".vmtax-check-", dir=folder)
    os.close(fd)
    os.unlink(path)


def command_line() -> str:
    """This invocation as recorded and shown: no password from --db or the environment."""
    return "vmtax " + " ".join(shlex.quote(redact(a)) for a in sys.argv[1:])


def _store(args, readonly: bool = False) -> Store:
    return Store(args.db or default_db_path(), readonly=readonly)


# -- commands ------------------------------------------------------------------------
def cmd_list(args) -> int:
    specs = suite.all_benchmarks()
    missing = {s.name: w.missing() for s in specs if (w := suite.workloads.of_spec(s.name))}
    if args.json:
        _json_out(
            [{**s.__dict__, **({"missing": missing[s.name]} if missing.get(s.name) else {})} for s in specs], args.json
        )
        return EXIT_OK
    from .report import table

    rows = [
        [
            s.suite,
            s.name,
            s.unit,
            f"{s.direction} is better",
            (s.requires + (" (missing here)" if missing.get(s.name) else "")) if s.kind == "workload" else "the agent",
            s.description,
        ]
        for s in specs
    ]
    say(table.render(["suite", "benchmark", "unit", "direction", "needs", "what it measures"], rows, align="llllll"))
    micro = sum(1 for s in specs if s.kind == "micro")
    say(
        f"\nsuites: {', '.join([suite.DEFAULT_SUITE, suite.ALL_SUITE, *suite.suites(specs)])} "
        f"({suite.DEFAULT_SUITE} = the agent's {micro} micro benchmarks; {suite.ALL_SUITE} = those and every "
        f"workload's {len(specs) - micro} figures).  A workload's tools are the host's, copied with "
        f"their libraries into each guest and container."
    )
    return EXIT_OK


WEEK = 7 * 86400
# Every numeric option's bounds, by its name (the same wherever a command has it), checked once after
# parsing (check_options); for run and compare the agent's own bounds, so that nothing starts with a value
# it refuses.  (least, most); most None: no bound above.
BOUNDS = {
    "samples": (1, 10000),
    "warmup": (0, 1000),
    "parallel": (1, 256),
    "min_processes": (2, 100000),
    "block_processes": (1, 64),
    "min_time_ms": (0, 60000),
    "tool_seconds": (1, 3600),
    "rounds": (2, 1000),
    "max_rounds": (2, 1000),
    "processes": (8, 1000),
    "rows": (1, 1000),
    "targets": (2, 100),
    "limit": (1, 1_000_000),
    "step_ms": (0.05, 1000),
    "noise_seconds": (0.1, 600),
    "port": (0, 65535),
}
# Durations, read into seconds in place: (whether a value is in range, its range in words)
DURATIONS = {
    "max_time": (lambda s: 0 < s <= WEEK, "positive and at most a week"),
    "round_time": (lambda s: 0.05 <= s <= 3600, "between 50ms and 1h"),
}


def check_options(args) -> None:
    """Every numeric option and duration of the command in its range (UserError otherwise); each
    duration read into seconds."""
    for dest, (least, most) in BOUNDS.items():
        value = getattr(args, dest, None)
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not (least <= value and (most is None or value <= most))
        ):  # NaN is in no range
            flag, got = "--" + dest.replace("_", "-"), f"{value:g}" if isinstance(value, float) else value
            raise UserError(
                f"{flag} must be at least {least}, got {got}"
                if most is None
                else f"{flag} must be between {least} and {most}, got {got}"
            )
    for dest, (ok, said) in DURATIONS.items():
        text = getattr(args, dest, None)
        if isinstance(text, str):
            try:
                seconds = parse_duration(text)
            except ValueError as e:
                raise UserError(str(e)) from None
            if not ok(seconds):
                raise UserError(f"--{dest.replace('_', '-')} must be {said}, got '{text}'")
            setattr(args, dest, seconds)


def _config(args) -> RunConfig:
    try:
        precision = (
            parse_precision(args.precision)
            if args.precision is not None
            else precision_for(getattr(args, "gate", None))
        )
    except ValueError as e:
        raise UserError(str(e)) from None
    # --parallel N instances cannot be held sample by sample: they run in turn
    pairing = getattr(args, "pairing", "blocks") if args.parallel == 1 else "blocks"
    if getattr(args, "block_processes", 1) > 1 and pairing != "lockstep":
        raise UserError("--block-processes holds lockstep pairs: not with --pairing blocks or --parallel")
    return RunConfig(
        precision=precision,
        max_time=args.max_time,
        samples_per_process=args.samples
        if args.samples is not None
        else SHARED_BOOT_SAMPLES
        if getattr(args, "shared_boot", False)
        else RunConfig.samples_per_process,
        warmup=args.warmup,
        min_time_ms=args.min_time_ms,
        cpu=_cpu(args.cpu, args.parallel),
        parallel=args.parallel,
        min_processes=args.min_processes,
        tool_seconds=args.tool_seconds,
        seed=random.SystemRandom().randrange(2**32),
        fast_mode=getattr(args, "fast_mode", False),
        same_mode=getattr(args, "same_mode", False),
        pairing=pairing,
        step_ms=getattr(args, "step_ms", RunConfig.step_ms),
        median=getattr(args, "median", False),
        median_blocks=getattr(args, "median", False),
        reboot=getattr(args, "reboot", False) or getattr(args, "shared_boot", False),
        shared_boot=getattr(args, "shared_boot", False),
        block_processes=getattr(args, "block_processes", RunConfig.block_processes),
    )


def _cpu(text: str, parallel: int) -> int | None:
    """--cpu N | auto | none -> the host CPU every target runs on, or None.
    auto: the last CPU this process may use, when there are two or more and
    one instance runs (one vCPU guest against one host CPU: like for like)."""
    allowed = sorted(os.sched_getaffinity(0))
    if text == "none":
        return None
    if text == "auto":
        return allowed[-1] if len(allowed) >= 2 and parallel == 1 else None
    try:
        cpu = int(text)
    except ValueError:
        raise UserError(f"--cpu must be a CPU number, auto or none, got '{text}'") from None
    if cpu not in allowed:
        raise UserError(f"--cpu {cpu}: not a CPU this process may use (allowed: {', '.join(map(str, allowed))})")
    return cpu


def _measure(args, kind: str, target_texts: list[str]) -> int:
    began = time.monotonic()  # the budget's start: preparing and starting the targets count against it
    cfg = _config(args)
    specs = suite.select(args.suite, args.bench)
    targets = _targets_of(args, kind, target_texts)
    if cfg.reboot and not booted(targets):
        raise UserError(
            f"{'--shared-boot' if cfg.shared_boot else '--reboot'} boots guests ({', '.join(sorted(BOOTED_KINDS))}) "
            f"afresh between rounds: none of "
            f"{', '.join(t.name for t in targets)} is one"
        )
    for note in prepare_targets(targets):
        say(f"vmtax: {note}", sys.stderr)
    skipped: dict[str, str] = {}
    if getattr(args, "skip_unavailable", False):
        targets, skipped = _usable(targets)
    if cfg.shared_boot:
        prepare_shared(targets)
    if cfg.median_blocks and len(targets) > 1:  # a row's rank test can call it after Holm over the run's rows
        tests = len(specs) * (len(targets) - 1)
        cfg = replace(cfg, min_processes=max(cfg.min_processes, stats.blocks_to_call(tests)))
    for t in targets:
        t.check()
    with _store(args) as store:
        return _measure_into(store, args, kind, cfg, specs, targets, skipped=skipped, began=began)


def _targets_of(args, kind: str, target_texts: list[str]) -> list[Target]:
    """The targets a compare or run names (a host inventory's groups
    expanded): the baseline one target, each one once."""
    inventory = inventories.load(args.inventory) if args.inventory else None
    first, *rest = [parse_targets(t, inventory) for t in target_texts]
    if len(first) != 1:
        what = "the baseline" if kind == "compare" else "--target"
        raise UserError(
            f"{what} is one target: {target_texts[0]} names {len(first)} hosts ({', '.join(t.name for t in first)})"
        )
    targets = first + [t for group in rest for t in group]
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise UserError("each target may appear once (an A/A pair: local local:label=b)")
    return targets


def _usable(targets: list[Target]) -> tuple[list[Target], dict[str, str]]:
    """--skip-unavailable: the targets left, the candidates that do not work here (name -> why)."""
    skipped: dict[str, str] = {}
    for t in targets[1:]:
        ok, why = t.usable()
        if not ok:
            skipped[t.name] = why
            say(f"vmtax: skipping {t.name}: {why}", sys.stderr)
    targets = [t for t in targets if t.name not in skipped]
    if len(targets) < 2:
        raise UserError("no candidate target works on this machine (see `vmtax targets`)")
    return targets, skipped


def _measure_into(
    store: Store, args, kind: str, cfg: RunConfig, specs, targets, *, skipped, began: float | None = None
) -> int:
    command = command_line()
    progress = TerminalProgress(goal=cfg.precision)
    pin = f"pinned to host CPU {cfg.cpu}" if cfg.cpu is not None else "unpinned"
    say(
        f"vmtax {kind}: {len(specs)} benchmarks on {one_line(', '.join(t.name for t in targets))} ({pin}); "
        f"results in {store.location}",
        sys.stderr,
    )
    short = budget_shortfall(specs, len(targets), cfg)
    if short:
        say(f"vmtax: {short}", sys.stderr)
    try:
        run_id, _status, failure = run_session(
            kind,
            command,
            cfg,
            specs,
            targets,
            store,
            progress=progress,
            notes={"skipped_targets": skipped} if skipped else None,
            began=began,
        )
    finally:
        proc.kill_all()
    if failure:  # the store failed mid-run: say so, then report what it holds
        say(f"vmtax: {failure}", sys.stderr)
        with _store(args, readonly=True) as reader:
            _report(reader, run_id, args)
        return EXIT_FAIL
    _summarise(store, run_id)
    return _report(store, run_id, args)


def _summarise(store: Store, run_id: str) -> None:
    """The ended run's summary, which vmtax serve's lists read, and those of a few older runs
    that lack one (serve/summary.py); one that cannot be stored is said, and the dashboard
    works the run out where it reads it."""
    try:
        summary.record(store, run_id)
        summary.catch_up(store)
    except VmtaxError as e:
        say(f"vmtax: the run's summary for `vmtax serve` was not stored: {e}", sys.stderr)


def _report(store: Store, run_id: str, args) -> int:
    return _emit(console.report(store.load(run_id), _options(args)))


def _options(args) -> console.Options:
    """What the command's options ask of the report."""
    asked: dict[str, Any] = {k: getattr(args, k, None) for k in ("json", "markdown", "html", "junit", "gate")}
    flags: dict[str, Any] = {k: bool(getattr(args, k, False)) for k in ("reference", "all_rows", "notes", "explain")}
    return console.Options(**asked, **flags, command=command_line())


def _emit(o: console.Output) -> int:
    """Print a report (made inert: say), write its files, return its exit code."""
    out = sys.stderr if o.to_stderr else sys.stdout
    for text in o.out:
        say(text, out)
    for dest, text in o.files:
        _write_text(text, dest)
    for text in o.err:
        say(text, sys.stderr)
    return o.code


def _threshold(text: str) -> float:
    try:
        return parse_precision(text)
    except ValueError as e:
        raise UserError(str(e).replace("precision", "threshold")) from None


def _compare_runs(
    store: Store, refs: list[str] | None, since: float | None = None, host: str | None = None, limit: int = 200
) -> list[tuple]:
    """(data, comparisons) of stored compare runs: the ones named, or the
    complete ones (since a time, on a host), newest first."""
    if refs:
        ids = [store.resolve(r) for r in refs]
    else:
        ids = [
            r["id"]
            for r in store.list_runs(limit=limit, host=host)
            if r["kind"] == "compare" and r["status"] == "complete" and (since is None or r["started"] >= since)
        ]
    out = []
    for run_id in ids:
        data = store.load(run_id)
        if data.kind != "compare" or len(data.targets) < 2:
            raise UserError(f"run {run_id} is a {data.kind} run: diff and history read compare runs")
        out.append((data, analyse(data)[1]))
    return out


def cmd_gate(args) -> int:
    threshold = _threshold(args.threshold)
    with _store(args, readonly=True) as store:
        ids = list(dict.fromkeys(store.resolve(r) for r in (args.runs or [None])))
        runs = [store.load(i) for i in ids]
    data = runs[-1]
    if len(runs) > 1:
        if args.reference:
            raise UserError("--reference gates one run; over several runs each run's ratio is the unit")
        g = console.gate_over_runs([(d, analyse(d)[1]) for d in runs], threshold)
    else:
        g = console.gate_of(data, analyse(data)[1], threshold, args.reference)
    out = sys.stderr if args.json == "-" else sys.stdout
    say(watch_report.gate_text(g, data.id), out)
    if args.json:
        _json_out({"run_id": data.id, "runs": ids, "gate": watch_report.gate_json(g)}, args.json)
    if args.junit:
        _write_text(watch_report.gate_junit(g, data.id), args.junit)
    if args.markdown:
        _write_text(watch_report.gate_markdown(g, data.id), args.markdown)
    return g.exit_code


def cmd_diff(args) -> int:
    with _store(args, readonly=True) as store:
        (a, cs_a), (b, cs_b) = _compare_runs(store, [args.run_a, args.run_b])
    try:
        d = watch.diff(a, cs_a, b, cs_b)
    except ValueError as e:
        raise UserError(str(e)) from None
    say(watch_report.diff_text(d), sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        _json_out(watch_report.diff_json(d), args.json)
    if args.markdown:
        _write_text(watch_report.diff_markdown(d), args.markdown)
    return EXIT_OK


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    import datetime

    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"--since takes a date or time (2026-11-23, 2026-11-23T08:00), got '{text}'") from None
    return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).timestamp()


def cmd_history(args) -> int:
    since = _since(args.since)
    with _store(args, readonly=True) as store:
        runs = _compare_runs(store, None, since, args.host, args.limit)
    facts = {data.id: watch.flat_facts(data) for data, _ in runs}
    picked = [
        (
            data,
            [
                c
                for c in cs
                if (not args.bench or c.benchmark.name in args.bench)
                and (not args.candidate or {c.candidate, watch.known_as(data)[c.candidate]} & set(args.candidate))
            ],
        )
        for data, cs in runs
    ]
    series = [s for s in watch.series(picked) if s.points]
    if not series:
        raise UserError(f"no stored compare run matches (complete compare runs read: {len(runs)}; see `vmtax runs`)")
    for s in series:
        s.changes = watch.change_points(s, facts)
    say(watch_report.history_text(series), sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        _json_out(watch_report.history_json(series), args.json)
    if args.markdown:
        _write_text(watch_report.history_markdown(series), args.markdown)
    if args.html:
        command = command_line()
        _write_text(watch_report.history_html(series, command), args.html)
    return EXIT_OK


def cmd_run(args) -> int:
    return _measure(args, "run", [args.target])


def cmd_compare(args) -> int:
    for flag in ("junit", "reference"):
        if getattr(args, flag) and args.gate is None:
            raise UserError(f"--{flag} goes with --gate PCT (it says how the run is gated)")
    return _measure(args, "compare", [args.baseline, *args.candidates])


def _scalable(proto: Target, most: int) -> None:
    """UserError unless `most` copies of this target can run at once here."""
    from . import scale

    if "barrier" not in proto.capabilities:
        raise UserError(
            f"vmtax scale starts every copy itself and holds it at its barrier: a {proto.kind} "
            f"target cannot be (local, qemu, uml and container can)"
        )
    scale.check_memory(proto, most)
    proto.check()
    ok, why = proto.usable()
    if not ok:
        raise UserError(f"{proto.kind} does not work on this machine: {why}")


def cmd_scale(args) -> int:
    from . import scale

    cfg = _scale_config(args)
    specs = suite.select(args.suite, args.bench or ([] if args.suite else ["pi"]))
    scale.check_jobs(specs)
    _scalable(parse_target(args.target), max(cfg.instances))  # its options checked: exit 2 before anything starts

    def make(i: int):
        t = parse_target(args.target)
        t.name = f"{args.target} #{i + 1}"
        return t

    command = command_line()
    with _store(args) as store:
        say(
            f"vmtax scale: {', '.join(s.name for s in specs)} on {args.target} at N = "
            f"{', '.join(map(str, cfg.instances))}; "
            f"{scale.pinning_text(cfg.pin, max(cfg.instances), scale.host_cpus())}"
            f"; results in {store.location}",
            sys.stderr,
        )
        try:
            run_id, _status, failure = scale.run_scale(
                args.target, make, cfg, specs, store, command=command, note=lambda text: say(text, sys.stderr)
            )
        finally:
            proc.kill_all()
        if failure:
            say(f"vmtax: {failure}", sys.stderr)
        with _store(args, readonly=True) as reader:
            code = _emit(console.scale_report(reader.load(run_id), _options(args)))
    return EXIT_FAIL if failure else code


def _scale_config(args):
    from .scale import ScaleConfig

    try:
        ns = sorted({int(x) for x in args.instances.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"--instances takes counts separated by commas (1,2,4,8,17), got '{args.instances}'") from None
    if not ns or ns[0] < 1 or ns[-1] > 256:
        raise UserError(f"--instances: every count must be between 1 and 256, got '{args.instances}'")
    try:
        precision = parse_precision(args.precision)
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.max_rounds < args.rounds:
        raise UserError(f"--max-rounds ({args.max_rounds}) is less than --rounds ({args.rounds})")
    return ScaleConfig(
        instances=tuple(ns),
        round_time=args.round_time,
        min_rounds=args.rounds,
        max_rounds=args.max_rounds,
        precision=precision,
        max_time=args.max_time,
        min_time_ms=args.min_time_ms,
        warmup=args.warmup,
        pin=args.pin,
    )


def cmd_doctor(args) -> int:
    from . import doctor

    if args.processes < 2 * args.targets:  # a block's two sides sit up to targets-1 slots apart (doctor.slot_lags)
        raise UserError(
            f"--processes must be at least twice --targets ({2 * args.targets}) to see processes "
            f"as far apart as a block's, got {args.processes}"
        )
    specs = suite.select(None, [args.bench])
    spec = specs[0]
    if len(specs) != 1 or spec.kind != "micro":
        raise UserError(f"vmtax doctor times an agent row, not the workload {args.bench}")
    target = parse_target(args.target)
    cpu = _cpu(args.cpu, 1)
    target.pin(cpu)
    pin = f"pinned to host CPU {cpu}" if cpu is not None else "unpinned"
    say(f"vmtax doctor: {spec.name} in {args.processes} fresh processes on {target.name} ({pin})", sys.stderr)
    with proc.keep_off(cpu), target:  # vmtax placed as a compare places it
        means, starts, process_s, refs = doctor.measure(target, spec, args.processes, cpu)
        times, values = noise.series(target, spec, args.noise_seconds)
    doc, lines = doctor_report.report(
        doctor_report.Checkup(
            target=target.name,
            spec=spec,
            cpu=cpu,
            means=means,
            starts=starts,
            process_s=process_s,
            refs=refs,
            budget=args.max_time,
            rows=args.rows,
            targets=args.targets,
            times=times,
            values=values,
        )
    )
    say("\n".join(lines), sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        _write_text(console.json_text(doc), args.json)
    return EXIT_OK


def cmd_targets(args) -> int:
    if args.inventory:
        return _inventory_hosts(args)
    rows: list[dict[str, Any]] = []  # its JSON
    for kind, cls in KINDS.items():
        ok, why = cls.available()
        rows.append({"kind": kind, "works": ok, "note": why, "what": cls.summary})
    if args.json:
        _json_out(rows, args.json)
        return EXIT_OK
    from .report import table

    say(
        table.render(
            ["kind", "works here", "what it is", "note"],
            [[r["kind"], "yes" if r["works"] else "no", r["what"], r["note"]] for r in rows],
            align="llll",
        )
    )
    say(
        "\ntarget strings: kind[:key=value,...], e.g. qemu:accel=tcg,smp=2,mem=1G,machine=microvm; "
        "ssh:HOST or ssh:host=H,user=U,port=P,key=FILE; @GROUP with --inventory FILE"
    )
    return EXIT_OK


def _inventory_hosts(args) -> int:
    """vmtax targets --inventory FILE: each host, its groups, and the ssh
    target it stands for."""
    inv = inventories.load(args.inventory)
    rows: list[dict[str, Any]] = []  # its JSON
    for host in inv.hosts:
        groups = [g for g in inv.groups_of(host) if g != "ungrouped"]
        options = inv.target_options(host)
        rows.append({"host": host, "groups": groups, "target": f"@{host}", "options": options})
    if args.json:
        _json_out(rows, args.json)
        return EXIT_OK
    from .report import table

    say(
        table.render(
            ["host", "groups", "ssh options"],
            [
                [r["host"], " ".join(r["groups"]) or "-", ",".join(f"{k}={v}" for k, v in r["options"].items())]
                for r in rows
            ],
            align="lll",
        )
    )
    say(f"\n@GROUP or @HOST names them in vmtax run/compare --inventory {args.inventory}, each as ssh:HOST")
    return EXIT_OK


def cmd_show(args) -> int:
    with _store(args, readonly=True) as store:
        return _report(store, store.resolve(args.run), args)


def cmd_report(args) -> int:
    if not (args.html or args.markdown or args.csv):
        raise UserError("say what to write: --html FILE, --markdown FILE and/or --csv FILE")
    with _store(args, readonly=True) as store:
        ids = list(dict.fromkeys(store.resolve(r) for r in (args.runs or [None])))
        runs = []
        for run_id in ids:
            data = store.load(run_id)
            runs.append((data, *analyse(data)))
    if args.html:
        command = command_line()
        _write_text(html.document(runs, command), args.html)
    if args.markdown:
        _write_text("\n".join(markdown.document(*r) for r in runs), args.markdown)
    if args.csv:
        _write_text(csvout.document(runs), args.csv)
    for w in facts.warnings([r[0] for r in runs]):
        say(f"vmtax: warning: {w}", sys.stderr)
    written = [f for f in (args.html, args.markdown, args.csv) if f and f != "-"]
    if written:
        say(f"wrote {', '.join(written)} from {len(runs)} run(s): {', '.join(ids)}", sys.stderr)
    return EXIT_OK


def cmd_explain(args) -> int:
    with _store(args, readonly=True) as store:
        data = store.load(store.resolve(args.run))
    ms, cs = analyse(data)
    if args.bench:
        unknown = set(args.bench) - {b.name for b in data.benchmarks}
        if unknown:
            raise UserError(f"run {data.id} has no benchmark {', '.join(sorted(unknown))}")
        data.benchmarks = [b for b in data.benchmarks if b.name in args.bench]
    blocks = explain.view(data, ms, cs)
    out = sys.stderr if args.json == "-" else sys.stdout
    say(terminal.run_header(data) + "\n", out)
    if not any(len(b.rows) > 1 for b in blocks):
        say(
            "no counts in this run: it was measured before vmtax counted, with counters=off, or holds "
            "workloads only (a tool's figures carry no per-operation counts)",
            out,
        )
    say(explain.text(blocks), out)
    if args.json:
        _json_out({"schema": jsondoc.SCHEMA, "run_id": data.id, "benchmarks": explain.to_json(blocks)}, args.json)
    if args.markdown:
        _write_text(explain.markdown(blocks), args.markdown)
    return EXIT_OK


def cmd_runs(args) -> int:
    with _store(args, readonly=True) as store:
        runs = store.list_runs(args.limit, host=args.host)
    if args.json:
        _json_out(runs, args.json)
    else:
        say(terminal.runs_table(runs))
    return EXIT_OK


# -- parser ------------------------------------------------------------------------------
def _measure_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help="suite to run (repeatable): a suite of `vmtax list`, default (every micro "
        "benchmark: what runs without --suite or --bench), apps (the real workloads), disk "
        "(direct I/O on a target's disk: qemu:disk=virtio, local:dir=/var/tmp), net (a "
        "client in the target, its server on the host: qemu:nic=virtio), all",
    )
    p.add_argument(
        "--bench",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="benchmark(s) to run, by name; a workload's name (redis) runs all its figures",
    )
    p.add_argument(
        "--precision",
        default=None,
        help="stop a benchmark when its 95%% CI half-width is within this of the estimate (default "
        "1%%; with compare --gate T: T/3 if that is less, so an unchanged row can pass)",
    )
    p.add_argument(
        "--max-time",
        default="6m",
        metavar="DURATION",
        help="time budget for the whole run, e.g. 90s, 6m, 1h (default 6m)",
    )
    p.add_argument(
        "--cpu",
        default="auto",
        metavar="N|auto|none",
        help="run every target on host CPU N (a QEMU guest: its vCPU threads, its emulator "
        "threads on the other CPUs unless emulator=together; the agent on its vCPU 0); "
        "auto (default): the last CPU when there are several; none: unpinned",
    )
    p.add_argument(
        "--parallel", type=int, default=1, metavar="N", help="run N concurrent instances of each benchmark (default 1)"
    )
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        metavar="N",
        help=f"samples per agent process, after the warmup (default {RunConfig.samples_per_process}; "
        f"{SHARED_BOOT_SAMPLES} with --shared-boot, whose rounds' boots and migrations would otherwise "
        "take most of the time); every target runs one "
        "shared iteration count, and one whose samples last over twice the baseline's, or "
        "under half, takes fewer (at least 1) or more (at most 8 N) in proportion",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=1,
        metavar="N",
        help="warmup samples discarded per agent process (default 1; scaled like --samples)",
    )
    p.add_argument(
        "--min-time-ms",
        type=int,
        default=10,
        metavar="MS",
        help="calibrate so one sample lasts at least MS milliseconds (default 10)",
    )
    p.add_argument(
        "--min-processes",
        type=int,
        default=10,
        metavar="N",
        help="fresh agent processes (a workload: runs of its tool) per target before stopping "
        "on precision (default 10; with --median at least as many as let a row's rank test call it "
        "after Holm's correction over the run's rows times its candidates: 12 for 16)",
    )
    p.add_argument(
        "--tool-seconds",
        type=int,
        default=workloads.SECONDS,
        metavar="S",
        help=f"how long one run of a time-based workload tool lasts (default {workloads.SECONDS})",
    )
    p.add_argument(
        "--json", nargs="?", const="-", metavar="FILE", help="also write the results as JSON to FILE (- for stdout)"
    )
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown to FILE")
    p.add_argument(
        "--inventory",
        metavar="FILE",
        help="an Ansible inventory (INI or YAML): @GROUP or @HOST among the targets names its "
        "hosts, each an ssh target",
    )


def build_parser() -> Parser:
    p = Parser(prog="vmtax", description="Measure and explain the virtualization tax.")
    p.add_argument("--version", action="version", version=f"vmtax {__version__}")
    p.add_argument(
        "--db",
        metavar="FILE|URL",
        help=f"results database: an SQLite file, or a team's PostgreSQL: a postgresql:// URL or a libpq "
        f"keyword string ('host=H dbname=D ...') "
        f"(default $VMTAX_DB or {redact(str(default_db_path())).replace('%', '%%')})",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    for add in (_add_measuring, _add_machines, _add_stored, _add_watching, _add_serving):
        add(sub)
    return p


def _lockstep_options(s) -> None:
    """compare's --pairing and how a lockstep block is made."""
    s.add_argument(
        "--pairing",
        choices=("lockstep", "blocks"),
        default="lockstep",
        help="lockstep (default): each block's processes on this machine start together and "
        "take turns sample by sample, the baseline's and a candidate's a millisecond apart, "
        "so that they share the host's state (an ssh host runs its own in turn); blocks: "
        "one process after another",
    )
    s.add_argument(
        "--step-ms",
        type=float,
        default=RunConfig.step_ms,
        metavar="MS",
        help=f"with --pairing lockstep: the baseline's sample lasts about MS ms (default {RunConfig.step_ms:g})",
    )
    s.add_argument(
        "--block-processes",
        type=int,
        default=RunConfig.block_processes,
        metavar="K",
        help=f"with --pairing lockstep: a block holds K pairs of fresh processes, one pair after another, "
        f"its rounds shared among them (each at least {MIN_STEP_ROUNDS}), a side's block their mean: what "
        f"a process carries of its own for its whole life is averaged over K, at a process start each "
        f"(default {RunConfig.block_processes}; docs/change.md says what it bought a TCG gate)",
    )


def _add_measuring(sub) -> None:
    """list, run, compare."""
    s = sub.add_parser("list", help="list suites and benchmarks")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("run", help="run benchmarks on one target")
    s.add_argument("--target", default="local", help="target string (default: local)")
    _measure_options(s)
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("compare", help="compare a baseline with candidates: the scoreboard")
    s.add_argument("baseline", help="baseline target string, e.g. local")
    s.add_argument("candidates", nargs="+", help="candidate target strings, e.g. qemu uml container")
    s.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="leave out candidates that do not work on this machine (say which and why)",
    )
    s.add_argument(
        "--explain",
        action="store_true",
        help="after the scoreboard, why: the per-operation counts (as `vmtax explain`)",
    )
    s.add_argument(
        "--gate",
        type=_threshold,
        metavar="PCT",
        help="then gate the run as `vmtax gate` does at this threshold (e.g. 2%%): exit 0 pass, "
        "1 regressed, 4 a row failed, 3 inconclusive only; the JSON document carries it as `gate`",
    )
    s.add_argument("--junit", metavar="FILE", help="with --gate: JUnit XML, one testcase per row")
    s.add_argument("--reference", action="store_true", help=REFERENCE_HELP)
    _lockstep_options(s)
    modes = s.add_mutually_exclusive_group()
    modes.add_argument(
        "--fast-mode",
        action="store_true",
        help="on a row whose process means fall in two modes (a host busy in stretches; marked ~), "
        "stop on and report the ratio over the blocks both sides ran in their fast mode: the "
        "uncontended stratum (the header says so; the ratio over the modes as they fell is in "
        "the row's note: vmtax show --notes); rows with one mode are as without it",
    )
    modes.add_argument(
        "--same-mode",
        action="store_true",
        help="as --fast-mode, over the blocks both sides ran in the same mode, both fast or both "
        "slow, each mode weighted by its blocks over their levels' spread: the tax with both in "
        "one state of the host (where it is the same in either; each mode's own ratio is in the "
        "note)",
    )
    s.add_argument(
        "--median",
        action="store_true",
        help="take each block's process at its median sample, not its mean, and each ratio at its "
        "median block (Hodges-Lehmann, with the signed-rank test's interval), not the ratio of the "
        "blocks' means: a sample another job cut into, or a block whose process ran in a slow state of "
        "its own, moves it little, so on a busy host the ratio is several times as precise; the ratio "
        "is then of a typical operation's time in a typical block, not of the average's (for a gate of "
        "two builds of one kind)",
    )
    s.add_argument(
        "--reboot",
        action="store_true",
        help="boot the guests (qemu, uml, xen) afresh between rounds of blocks, a block of every row a "
        "round: no two blocks of a row share a boot, so what a boot carries of its own is in the "
        "intervals (a gate of two builds of one kind; each boot costs its time)",
    )
    s.add_argument(
        "--shared-boot",
        action="store_true",
        help="as --reboot, but each round one guest boots and its state is live-migrated into every QEMU "
        "guest, so the sides differ by their hypervisors alone, not by what a boot carries (a gate of two "
        "QEMU builds or settings on one guest configuration; docs/change.md)",
    )
    _measure_options(s)
    s.set_defaults(func=cmd_compare)


def _add_machines(sub) -> None:
    """scale, doctor, targets: many copies, the host's noise, what works here."""
    s = sub.add_parser("scale", help="N copies of a target at once: aggregate throughput, fairness, overcommit")
    s.add_argument("target", help="target string, e.g. qemu:accel=tcg,mem=256M, uml, container, local")
    s.add_argument(
        "--instances",
        default="1,2,4,8",
        metavar="N,N,...",
        help="instance counts, each a stage of its own (default 1,2,4,8)",
    )
    s.add_argument(
        "--bench",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="benchmark(s): an agent row or a workload whose figure is a rate (default: pi)",
    )
    s.add_argument("--suite", action="append", metavar="NAME", help="every benchmark of a suite (repeatable)")
    s.add_argument(
        "--round-time",
        default="2s",
        metavar="DURATION",
        help="timed samples per round after the synchronized start (a tool: whole seconds; default 2s)",
    )
    s.add_argument("--rounds", type=int, default=3, metavar="N", help="rounds per N at least (default 3)")
    s.add_argument("--max-rounds", type=int, default=10, metavar="N", help="rounds per N at most (default 10)")
    s.add_argument(
        "--precision",
        default="5%",
        help="stop a stage's rounds once the aggregate's 95%% CI half-width is within this (default 5%%)",
    )
    s.add_argument(
        "--max-time",
        default="10m",
        metavar="DURATION",
        help="time budget for the whole run; every stage still runs --rounds rounds (default 10m)",
    )
    s.add_argument(
        "--pin",
        choices=("none", "spread"),
        default="none",
        help="none (default): the host's scheduler places the instances; spread: instance i on "
        "host CPU i mod CPUs (a QEMU guest's vCPU threads; its emulator threads on the other CPUs)",
    )
    s.add_argument(
        "--min-time-ms",
        type=int,
        default=10,
        metavar="MS",
        help="calibrate (on one instance alone) so one sample lasts at least MS ms (default 10)",
    )
    s.add_argument(
        "--warmup", type=int, default=1, metavar="N", help="samples each instance discards after the start (default 1)"
    )
    s.add_argument(
        "--json", nargs="?", const="-", metavar="FILE", help="also write the figures as JSON to FILE (- for stdout)"
    )
    s.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown to FILE")
    s.add_argument("--html", metavar="FILE", help="also write an HTML page with the charts to FILE")
    s.set_defaults(func=cmd_scale)
    _add_doctor(sub)
    s = sub.add_parser("targets", help="list target kinds and whether each works here")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.add_argument("--inventory", metavar="FILE", help="list this inventory's hosts instead, as ssh targets")
    s.set_defaults(func=cmd_targets)


def _add_doctor(sub) -> None:
    s = sub.add_parser("doctor", help="how noisy is this host now, and what precision a budget can buy")
    s.add_argument("--target", default="local", help="target string (default: local)")
    s.add_argument("--bench", default="getppid", help="an agent row to time (default getppid)")
    s.add_argument(
        "--processes", type=int, default=30, help="fresh agent processes (default 30; at least twice --targets)"
    )
    s.add_argument("--cpu", default="auto", metavar="N|auto|none", help="as for run (default auto)")
    s.add_argument("--max-time", default="7m", help="the budget to judge (default 7m: make demo's)")
    s.add_argument(
        "--noise-seconds",
        type=float,
        default=3.0,
        metavar="S",
        help="how long the series of short samples for the noise by distance lasts (default 3)",
    )
    s.add_argument("--rows", type=int, default=14, help="rows of that compare (default 14: make demo's)")
    s.add_argument("--targets", type=int, default=4, help="targets of that compare (default 4)")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.set_defaults(func=cmd_doctor)


def _add_stored(sub) -> None:
    """show, report, explain, runs: what stored runs say."""
    s = sub.add_parser("show", help="show a stored run (default: the latest)")
    s.add_argument("run", nargs="?", help="run id or a unique prefix of one")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.add_argument("--markdown", metavar="FILE", help="write the report as Markdown to FILE")
    s.add_argument("--all-rows", action="store_true", help="per-target rows instead of the scoreboard")
    s.add_argument(
        "--notes",
        action="store_true",
        help="the scoreboard's notes in full (under the scoreboard: a line each): why a cell holds no "
        "ratio, and for each row whose processes fell in two modes, both sides' modes and each ratio",
    )
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("report", help="HTML, Markdown or CSV report of stored runs (default: the latest)")
    s.add_argument("runs", nargs="*", metavar="RUN", help="run ids or unique prefixes")
    s.add_argument("--html", metavar="FILE", help="a self-contained HTML page with plots")
    s.add_argument("--markdown", metavar="FILE", help="Markdown for an issue or a mail (- for stdout)")
    s.add_argument("--csv", metavar="FILE", help="one row per benchmark and target (- for stdout)")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("explain", help="why: per-operation counts inside each target and on its host")
    s.add_argument("run", nargs="?", help="run id or a unique prefix of one (default: the latest)")
    s.add_argument("--bench", nargs="+", metavar="NAME", help="only these benchmarks")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.add_argument("--markdown", metavar="FILE", help="write the explanation as Markdown to FILE")
    s.set_defaults(func=cmd_explain)

    s = sub.add_parser("runs", help="list stored runs")
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--host", metavar="NAME", help="only runs measured on this host (its hostname)")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.set_defaults(func=cmd_runs)


def _add_watching(sub) -> None:
    """gate, diff, history: a candidate against its baseline over runs."""
    s = sub.add_parser(
        "gate",
        help="did a candidate regress? a verdict per row of a compare run, for CI",
        description="Gate a stored compare run (the first target the baseline build, the others "
        "candidates): each row is regressed (worse beyond the threshold and "
        "significant after Holm's correction over every row, family-wise alpha "
        "0.05), improved, inconclusive (its interval reaches past the threshold), "
        "error (the candidate or the baseline failed it: no ratio to judge) or "
        "pass. A latency row regresses upward, a throughput row downward. "
        "Exit codes: 0 pass (improvements included), 1 regressed, 4 error (and "
        "nothing regressed), 3 inconclusive only, 2 bad input.",
    )
    s.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="run id or a unique prefix of one (default: the latest); several: runs of the same targets, "
        "each its own boot of every target, gated over runs (a guest's own offset counted)",
    )
    s.add_argument("--threshold", default="2%", help="the smallest change that matters (default 2%%)")
    s.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="{run_id, runs, gate: {threshold, verdict, rows: [...]}} to FILE (- for stdout)",
    )
    s.add_argument("--junit", metavar="FILE", help="JUnit XML, one testcase per row (a regression fails)")
    s.add_argument("--markdown", metavar="FILE", help="the verdicts as Markdown")
    s.add_argument("--reference", action="store_true", help=REFERENCE_HELP)
    s.set_defaults(func=cmd_gate)

    s = sub.add_parser(
        "diff", help="the same target pair in two stored runs: each ratio's change, and the facts that differ"
    )
    s.add_argument("run_a", metavar="RUN_A")
    s.add_argument("run_b", metavar="RUN_B")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.add_argument("--markdown", metavar="FILE")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("history", help="each row's ratio over stored compare runs, with change points")
    s.add_argument("--bench", nargs="+", metavar="NAME", help="only these benchmarks")
    s.add_argument("--candidate", nargs="+", metavar="SPEC", help="only these candidate targets")
    s.add_argument("--host", metavar="NAME", help="only runs measured on this host")
    s.add_argument("--since", metavar="DATE", help="only runs started since (2026-11-23, UTC)")
    s.add_argument("--limit", type=int, default=200, help="read at most this many of the latest runs")
    s.add_argument("--json", nargs="?", const="-", metavar="FILE")
    s.add_argument("--markdown", metavar="FILE")
    s.add_argument("--html", metavar="FILE", help="a page with a trend chart per row")
    s.set_defaults(func=cmd_history)


def cmd_serve(args) -> int:
    from .serve.server import serve

    return serve(args)


def _add_serving(sub) -> None:
    """serve: the read-only dashboard over the store."""
    s = sub.add_parser("serve", help="a read-only web dashboard over the results store (docs/serve.md)")
    s.add_argument("--host", default="127.0.0.1", metavar="ADDR", help="the address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8470, metavar="N", help="the port (default 8470; 0: any free one)")
    s.add_argument(
        "--token-file",
        metavar="FILE",
        help="a token every request must carry (else $VMTAX_SERVE_TOKEN); needed to listen beyond loopback",
    )
    s.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="a Host header name to answer to besides loopback's and the address (a reverse proxy's; repeatable)",
    )
    s.set_defaults(func=cmd_serve)


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        argv = sys.argv[1:] if argv is None else argv
        for a in argv:
            try:
                a.encode("utf-8")
            except UnicodeEncodeError:
                raise UserError(f"an argument is not valid UTF-8: {a.encode('utf-8', 'surrogateescape')!r}") from None
        args = build_parser().parse_args(argv)
        check_options(args)
        to_stdout = [f"--{k}" for k in OUTPUTS if getattr(args, k, None) == "-"]
        if len(to_stdout) > 1:
            raise UserError(
                f"{' and '.join(to_stdout)} {'both' if len(to_stdout) == 2 else 'all'} go to stdout (-): "
                f"give all but one a file"
            )
        check_outputs(args)
        return args.func(args)
    except UserError as e:
        say(f"vmtax: {e}", sys.stderr)
        return EXIT_USAGE
    except VmtaxError as e:
        say(f"vmtax: {e}", sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("vmtax: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    finally:
        proc.kill_all()


if __name__ == "__main__":
    sys.exit(main())
