"""Real workloads: the tools people run, beside the agent's table.

A workload is a Debian-packaged tool run inside the target as a user runs
it, with a fixed configuration: what to provision (its executables, which
bring their shared libraries along, and data files), one line of POSIX sh
that runs it, and a parser that reads the tool's own output, by field name,
into named figures with units and directions.  One tool run is one unit of
replication (the runner's "process"); each figure is its own row, named
`<workload>.<metric>` (e.g. `sysbench_cpu.events_per_s`).

The script runs with `/bin/sh -c SCRIPT NAME DIR SECONDS PORT PEER` in every
target (dash on the host, busybox sh in guests and containers): DIR is the
target's scratch directory (a tmpfs on every kind, so that like is compared
with like, unless the target has a disk: qemu:disk=..., local:dir=...), SECONDS how long a time-based tool
runs, PORT a free TCP port for a server the script starts on loopback (or
where the host-side peer of a network workload listens), PEER the address
at which that peer is reached from inside the target.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..model import BenchSpec

SUITES = ("apps", "stress", "disk", "net")
SECONDS = 3  # one run of a time-based tool
# every script starts here: the tools' directories first, the scratch dir as
# cwd, and $D: a prefix that makes a server die with the script where
# util-linux's setpriv can (on the host: a killed vmtax kills the script, the
# script's death its server; a guest or container dies whole)
PRELUDE = (
    'PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH; export PATH; cd "$1" || exit 1; D=; '
    "setpriv --pdeathsig KILL true 2>/dev/null && D='setpriv --pdeathsig KILL'; "
)


class ParseError(Exception):
    """The tool's output lacks a field vmtax reads: its version changed."""


@dataclass(frozen=True)
class Figure:
    name: str  # the part after the dot
    unit: str
    direction: str  # "higher" or "lower" is better
    description: str


@dataclass(frozen=True)
class Workload:
    name: str
    suite: str
    description: str
    package: str  # the Debian package(s) that bring the tools
    tools: tuple[str, ...]  # executables the script runs
    script: str  # one line of POSIX sh (see the module's doc)
    figures: tuple[Figure, ...]
    parse: Callable[[str], dict[str, float]]
    data: tuple[str, ...] = ()  # further files (or trees) the tools read (absolute paths)
    timeout: float = 600.0  # one run, in the slowest target
    fetch: str = ""  # how data that no package brings is had
    # files no ldd finds (a toolchain's cc1, as, ld, headers, crt1.o): found
    # by running the workload once on this host under strace (guest.traced)
    traced: Callable[[float], tuple] | None = None  # its argument: seconds the trace may take
    needs_disk: bool = False  # direct I/O: a scratch directory on a block device, not a tmpfs
    # a peer on the host (the server side of a network workload): its command,
    # {port} its port, {bind} the one address it listens on; the script
    # reaches it at $4 (see Target.peer_address and peer_listen)
    peer: str = ""
    # the unit of work its host cost is given per (metrics.WORK: "GB" when the
    # parser counts bytes moved, "1000tx" when it counts transactions)
    work: str = ""

    def specs(self) -> list[BenchSpec]:
        return [
            BenchSpec(
                name=f"{self.name}.{f.name}",
                suite=self.suite,
                unit=f.unit,
                direction=f.direction,
                description=f"{self.description}: {f.description}",
                requires=self.package,
                kind="workload",
            )
            for f in self.figures
        ]

    def missing(self) -> str:
        """Why this workload cannot run from this host ('' if it can): its
        tools and data are taken from the host into every target."""
        if self.name in UNPROVISIONED:
            return UNPROVISIONED[self.name]
        gone = [t for t in self.tools if not shutil.which(t)]
        if gone:
            return f"{', '.join(gone)} not installed on this host (apt install {self.package})"
        import os

        absent = [d for d in self.data if not os.path.exists(d)]
        return f"{', '.join(absent)} missing ({self.fetch or f'apt install {self.package}'})" if absent else ""

    def argv(self, scratch: str, seconds: int, port: int, peer: str = "127.0.0.1") -> list[str]:
        return ["/bin/sh", "-c", PRELUDE + self.script, f"vmtax-{self.name}", scratch, str(seconds), str(port), peer]


# -- parsers: by field name, never by position ------------------------------------
def _field(text: str, tool: str, label: str, pattern: str, version: str) -> float:
    m = re.search(pattern, text, re.MULTILINE)
    if not m:
        raise ParseError(
            f"{tool} output has no '{label}' field ({version}; vmtax reads "
            f"sysbench 1.0, fio 3, dbench 4, redis-benchmark 7 and stress-ng 0.15 output)"
        )
    return float(m.group(1))


def _sysbench_version(text: str) -> str:
    m = re.search(r"^sysbench (\S+)", text, re.MULTILINE)
    return f"sysbench {m.group(1)}" if m else "no sysbench version line"


NUM = r"([0-9]+(?:\.[0-9]+)?)"


def sysbench(fields: dict[str, tuple[str, str]]) -> Callable[[str], dict[str, float]]:
    """fields: figure -> (label, regex with one number group)."""

    def parse(text: str) -> dict[str, float]:
        v = _sysbench_version(text)
        return {name: _field(text, "sysbench", label, rx, v) for name, (label, rx) in fields.items()}

    return parse


def sysbench_events_per_s(text: str) -> dict[str, float]:
    """The threads test prints no rate: events over the total time."""
    v = _sysbench_version(text)
    events = _field(text, "sysbench", "total number of events", r"total number of events:\s+" + NUM, v)
    secs = _field(text, "sysbench", "total time", r"total time:\s+" + NUM + "s", v)
    if secs <= 0:
        raise ParseError("sysbench reported a total time of 0 s")
    return {"events_per_s": events / secs}


def _json_document(text: str, missing: str) -> dict:
    """The JSON object a tool printed (after any lines before it);
    ParseError(missing) when there is none."""
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        raise ParseError(missing)
    return doc


def fio(figures: dict[str, tuple[str, str, float]]) -> Callable[[str], dict[str, float]]:
    """figures: name -> (read|write, key in that section, scale)."""

    def parse(text: str) -> dict[str, float]:
        doc = _json_document(text, "fio printed no JSON document (--output-format=json: fio 3)")
        version = str(doc.get("fio version", "unknown fio version"))
        out = {}
        try:  # the bytes moved: the unit of work host CPU is counted against
            out["_bytes"] = float(sum(doc["jobs"][0][side]["io_bytes"] for side in ("read", "write")))
        except (KeyError, IndexError, TypeError, ValueError):
            pass
        for name, (side, key, scale) in figures.items():
            try:
                job = doc["jobs"][0]
                if job.get("error"):
                    raise ParseError(f"fio job failed: error {job['error']}")
                value = job[side]
                for part in key.split("/"):
                    value = value[part]
                out[name] = float(value) * scale
            except (KeyError, IndexError, TypeError, ValueError):
                raise ParseError(f"fio output has no jobs[0].{side}.{key} ({version}; vmtax reads fio 3)") from None
        return out

    return parse


def dbench(text: str) -> dict[str, float]:
    m = re.search(r"^dbench version (\S+)", text, re.MULTILINE)
    v = f"dbench {m.group(1)}" if m else "no dbench version line"
    return {"mb_per_s": _field(text, "dbench", "Throughput", r"^Throughput " + NUM + " MB/sec", v)}


def redis_benchmark(tests: tuple[str, ...]) -> Callable[[str], dict[str, float]]:
    """--csv: a header naming the columns, then one row per test."""

    def parse(text: str) -> dict[str, float]:
        import csv

        rows = list(csv.reader([line for line in text.splitlines() if line.startswith('"')]))
        if not rows or "test" not in rows[0] or "rps" not in rows[0]:
            raise ParseError(
                "redis-benchmark --csv printed no header with 'test' and 'rps' (vmtax reads redis-benchmark 7)"
            )
        head = rows[0]
        by_test = {r[head.index("test")]: r for r in rows[1:] if len(r) == len(head)}
        out = {}
        for t in tests:
            if t not in by_test:
                raise ParseError(f"redis-benchmark --csv has no {t} row")
            out[f"{t.lower()}_rps"] = float(by_test[t][head.index("rps")])
        return out

    return parse


def compile_seconds(text: str) -> dict[str, float]:
    """The build's wall time, from /proc/uptime read before and after."""
    m = re.search(r"^vmtax-compile: " + NUM + " " + NUM + "$", text, re.MULTILINE)
    if not m:
        raise ParseError("the build printed no 'vmtax-compile: START END' line")
    return {"seconds": float(m.group(2)) - float(m.group(1))}


def iperf3(direction: str) -> Callable[[str], dict[str, float]]:
    """-J: end.sum_sent (what the client sent) or end.sum_received."""

    def parse(text: str) -> dict[str, float]:
        doc = _json_document(text, "iperf3 printed no JSON document (-J: iperf3 3)")
        version = str(doc.get("start", {}).get("version", "unknown iperf3 version"))
        if doc.get("error"):
            raise ParseError(f"iperf3 failed: {doc['error']}")
        try:
            side = doc["end"][direction]
            return {"gbit_per_s": float(side["bits_per_second"]) / 1e9, "_bytes": float(side["bytes"])}
        except (KeyError, TypeError, ValueError):
            raise ParseError(
                f"iperf3 output has no end.{direction}.bits_per_second ({version}; vmtax reads iperf 3.12)"
            ) from None

    return parse


def sockperf(text: str) -> dict[str, float]:
    """ping-pong --full-rtt: the valid period's messages over its run time,
    and the round-trip percentiles."""
    m = re.search(r"== version #(\S+)", text)  # (sockperf colours it)
    v = f"sockperf {m.group(1)}" if m else "no sockperf version line"
    valid = re.search(r"\[Valid Duration\] RunTime=" + NUM + r" sec; SentMessages=\d+; ReceivedMessages=(\d+)", text)
    if not valid:
        raise ParseError(f"sockperf output has no '[Valid Duration]' line ({v}; vmtax reads sockperf 3.7)")
    secs, got = float(valid.group(1)), float(valid.group(2))
    if secs <= 0 or got <= 0:
        raise ParseError("sockperf exchanged no messages")
    return {
        "tx_per_s": got / secs,
        "_tx": got,
        "p50_us": _field(text, "sockperf", "percentile 50.000", r"percentile 50\.000 =\s+" + NUM, v),
        "p99_us": _field(text, "sockperf", "percentile 99.000", r"percentile 99\.000 =\s+" + NUM, v),
    }


def stress_ng(text: str) -> dict[str, float]:
    return {
        "ops_per_s": _field(
            text,
            "stress-ng",
            "bogo-ops-per-second-real-time",
            r"^\s*bogo-ops-per-second-real-time:\s+" + NUM,
            "stress-ng --yaml",
        )
    }


# -- the table ------------------------------------------------------------------------
# (dbench and tbench run 3 s at least: a slow target spends their first second starting up)
EPS = Figure("events_per_s", "events/s", "higher", "events per second")
SB = "sysbench {test} --threads={threads} --time=$2 {opts} run"
FILEIO = "sysbench fileio --file-num=4 --file-total-size=64M --file-extra-flags= --file-fsync-freq=0"
FIO = (
    "fio --name=vmtax --filename=fio.dat --size=64M --ioengine=psync --runtime=$2 --time_based "
    "--output-format=json {opts}; rc=$?; rm -f fio.dat; exit $rc"
)
# the disk suite: direct I/O (O_DIRECT, past the target's page cache) on the
# target's disk; fsync latency with buffered writes, as a database logs
# The file stays between runs (the image or local's private dir goes at the
# end): only the warmup run lays it out, so a timed run's host CPU is its I/O's
FIO_DISK = (
    "fio --name=vmtax --filename=fio-{size}.dat --size={size} --ioengine=psync --runtime=$2 "
    "--time_based --output-format=json {opts}"
)
FIO_DIRECT = FIO_DISK.replace("{opts}", "--direct=1 {opts}").replace("{size}", "64M")
FIO_FSYNC = FIO_DISK.replace("{size}", "16M")
# a server on loopback, ended on every path of the script; then wait (30 s at
# most) until its port listens: /proc/net/tcp read with shell builtins alone
# (the clients hang, not fail, when they come too early)
SERVE = (
    "$D {server} & srv=$!; trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT; "
    "p=$(printf ':%04X' {port}); w=0; until while read -r _ l _ s _; do "
    '[ "$s" = 0A ] && [ "${{l#*:}}" = "${{p#:}}" ] && break; done </proc/net/tcp; [ "$s" = 0A ]; do '
    'w=$((w+1)); [ $w -gt 300 ] && echo "vmtax: the server did not listen within 30 s" >&2 && exit 1; '
    "sleep 0.1; done; "
)
REDIS = (
    "redis-server --port $3 --bind 127.0.0.1 --save '' --appendonly no --protected-mode no --daemonize no --logfile ''"
)
STRESS = (
    "stress-ng --{stressor} 1 -t $2 --metrics-brief --yaml sng.yaml >&2 && cat sng.yaml; "
    "rc=$?; rm -f sng.yaml; exit $rc"
)


# the compile: Lua 5.4 from Debian's lua5.4 source package (scripts/fetch-sources.sh
# puts it here), built as its README says, `make posix`, with the debug info
# distributions build with, one job (a guest has one vCPU unless smp=N), from
# a fresh copy of the tree; the interpreter it made must then compute 6*7.
# Timed inside the target from /proc/uptime (10 ms ticks: 0.1% of a build)
LUA_SRC = "/usr/local/src/vmtax/lua5.4"
LUA_BUILD = "MAKEFLAGS= make -s -j1 posix MYCFLAGS=-g >/dev/null && [ \"$(src/lua -e 'io.write(6*7)')\" = 42 ]"
COMPILE = (
    f"rm -rf lua && cp -r {LUA_SRC} lua && cd lua && read a _ </proc/uptime && {LUA_BUILD} && "
    'read b _ </proc/uptime && cd .. && rm -rf lua && echo "vmtax-compile: $a $b"'
)


def lua_toolchain(timeout: float = 900.0) -> tuple:
    """gcc, make and binutils with every file the build reads, as found by
    building once on this host (remembered while those files are unchanged),
    within `timeout` seconds."""
    import os

    from ..errors import TargetError
    from ..guest import traced_cached

    def tree(d: str) -> None:
        try:
            shutil.copytree(LUA_SRC, os.path.join(d, "lua"), symlinks=True)
        except OSError as e:
            raise TargetError(f"cannot copy {LUA_SRC}: {e}") from None

    return traced_cached("compile_lua", ["/bin/sh", "-c", "cd lua && " + LUA_BUILD], tree, timeout=timeout)


def _sb(test: str, threads: int = 1, opts: str = "") -> str:
    return SB.format(test=test, threads=threads, opts=opts)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "sysbench_cpu",
        "apps",
        "sysbench cpu, 1 thread, primes up to 10000",
        "sysbench",
        ("sysbench",),
        _sb("cpu", opts="--cpu-max-prime=10000"),
        figures=(EPS,),
        parse=sysbench({"events_per_s": ("events per second", r"events per second:\s+" + NUM)}),
    ),
    Workload(
        "sysbench_memory",
        "apps",
        "sysbench memory, 1 thread, 1 KiB blocks written",
        "sysbench",
        ("sysbench",),
        _sb("memory", opts="--memory-block-size=1K --memory-total-size=100T"),
        figures=(Figure("mib_per_s", "MiB/s", "higher", "MiB written per second"),),
        parse=sysbench({"mib_per_s": ("MiB/sec", r"MiB transferred \(" + NUM + " MiB/sec\\)")}),
    ),
    Workload(
        "sysbench_threads",
        "apps",
        "sysbench threads, 2 threads contending for 8 mutexes while yielding",
        "sysbench",
        ("sysbench",),
        _sb("threads", threads=2),
        figures=(EPS,),
        parse=sysbench_events_per_s,
    ),
    Workload(
        "sysbench_mutex",
        "apps",
        "sysbench mutex, 2 threads, a fixed amount of lock/unlock work",
        "sysbench",
        ("sysbench",),
        "sysbench mutex --threads=2 run",
        figures=(Figure("time_s", "s", "lower", "time to finish the work"),),
        parse=sysbench({"time_s": ("total time", r"total time:\s+" + NUM + "s")}),
    ),
    Workload(
        "sysbench_fileio",
        "apps",
        "sysbench fileio, random reads and writes over 4 files of 16 MiB in the scratch directory (tmpfs), no fsync",
        "sysbench",
        ("sysbench",),
        f"{FILEIO} prepare >/dev/null && {FILEIO} --file-test-mode=rndrw --time=$2 run; rc=$?; "
        f"{FILEIO} cleanup >/dev/null; exit $rc",
        figures=(
            Figure("read_mib_s", "MiB/s", "higher", "MiB read per second"),
            Figure("written_mib_s", "MiB/s", "higher", "MiB written per second"),
        ),
        parse=sysbench(
            {
                "read_mib_s": ("read, MiB/s", r"read, MiB/s:\s+" + NUM),
                "written_mib_s": ("written, MiB/s", r"written, MiB/s:\s+" + NUM),
            }
        ),
    ),
    Workload(
        "fio_randread",
        "apps",
        "fio 4 KiB random reads of a 64 MiB file (psync, buffered: tmpfs)",
        "fio",
        ("fio",),
        FIO.format(opts="--rw=randread --bs=4k"),
        figures=(
            Figure("iops", "IOPS", "higher", "reads per second"),
            Figure("p99_us", "us", "lower", "99th percentile completion latency"),
        ),
        parse=fio({"iops": ("read", "iops", 1.0), "p99_us": ("read", "clat_ns/percentile/99.000000", 1e-3)}),
        work="GB",
    ),
    Workload(
        "fio_randwrite",
        "apps",
        "fio 4 KiB random writes to a 64 MiB file (psync, buffered: tmpfs)",
        "fio",
        ("fio",),
        FIO.format(opts="--rw=randwrite --bs=4k"),
        figures=(
            Figure("iops", "IOPS", "higher", "writes per second"),
            Figure("p99_us", "us", "lower", "99th percentile completion latency"),
        ),
        parse=fio({"iops": ("write", "iops", 1.0), "p99_us": ("write", "clat_ns/percentile/99.000000", 1e-3)}),
        work="GB",
    ),
    Workload(
        "fio_seqread",
        "apps",
        "fio 1 MiB sequential reads of a 64 MiB file (psync, buffered: tmpfs)",
        "fio",
        ("fio",),
        FIO.format(opts="--rw=read --bs=1M"),
        figures=(Figure("mib_per_s", "MiB/s", "higher", "MiB read per second"),),
        parse=fio({"mib_per_s": ("read", "bw_bytes", 1 / 2**20)}),
        work="GB",
    ),
    Workload(
        "dbench",
        "apps",
        "dbench, 1 client, its NFS-style file-server load (client.txt) in the scratch directory",
        "dbench",
        ("dbench",),
        'dbench -t $(( $2 > 3 ? $2 : 3 )) -c /usr/share/dbench/client.txt -D "$1" 1',
        figures=(Figure("mb_per_s", "MB/s", "higher", "dbench's throughput"),),
        parse=dbench,
        data=("/usr/share/dbench/client.txt",),
    ),
    Workload(
        "tbench",
        "apps",
        "tbench, 1 client, against tbench_srv over loopback inside the target",
        "dbench",
        ("tbench", "tbench_srv"),
        SERVE.format(server="tbench_srv >/dev/null", port=7003) + "tbench -t $(( $2 > 3 ? $2 : 3 )) 1 127.0.0.1",
        figures=(Figure("mb_per_s", "MB/s", "higher", "tbench's throughput"),),
        parse=dbench,
        data=("/usr/share/dbench/client.txt",),
    ),
    Workload(
        "redis",
        "apps",
        "redis-benchmark, 20000 SET then 20000 GET from 10 connections, against a "
        "redis-server on loopback inside the target",
        "redis-server redis-tools",
        ("redis-server", "redis-benchmark"),
        SERVE.format(server=REDIS + " >/dev/null", port="$3")
        + "redis-benchmark -h 127.0.0.1 -p $3 -n 20000 -c 10 -t set,get --csv",
        figures=(
            Figure("set_rps", "ops/s", "higher", "SET requests per second"),
            Figure("get_rps", "ops/s", "higher", "GET requests per second"),
        ),
        parse=redis_benchmark(("SET", "GET")),
    ),
    Workload(
        "compile_lua",
        "apps",
        "build Lua 5.4 from Debian's lua5.4 source: make posix (gcc -O2 -g, one job) in the scratch directory",
        "gcc make strace",
        ("make", "gcc", "strace"),
        COMPILE,
        figures=(Figure("seconds", "s", "lower", "wall time of the build"),),
        parse=compile_seconds,
        data=(LUA_SRC,),
        timeout=3600.0,
        fetch="scripts/fetch-sources.sh gets Debian's lua5.4 source; make setup runs it",
        traced=lua_toolchain,
    ),
    Workload(
        "disk_randread",
        "disk",
        "fio 4 KiB random reads, direct I/O, of a 64 MiB file on the target's disk (psync, queue depth 1)",
        "fio",
        ("fio",),
        FIO_DIRECT.format(opts="--rw=randread --bs=4k"),
        figures=(
            Figure("iops", "IOPS", "higher", "reads per second"),
            Figure("p99_us", "us", "lower", "99th percentile completion latency"),
        ),
        parse=fio({"iops": ("read", "iops", 1.0), "p99_us": ("read", "clat_ns/percentile/99.000000", 1e-3)}),
        needs_disk=True,
        work="GB",
    ),
    Workload(
        "disk_randwrite",
        "disk",
        "fio 4 KiB random writes, direct I/O, to a 64 MiB file on the target's disk (psync, queue depth 1)",
        "fio",
        ("fio",),
        FIO_DIRECT.format(opts="--rw=randwrite --bs=4k"),
        figures=(
            Figure("iops", "IOPS", "higher", "writes per second"),
            Figure("p99_us", "us", "lower", "99th percentile completion latency"),
        ),
        parse=fio({"iops": ("write", "iops", 1.0), "p99_us": ("write", "clat_ns/percentile/99.000000", 1e-3)}),
        needs_disk=True,
        work="GB",
    ),
    Workload(
        "disk_seqread",
        "disk",
        "fio 1 MiB sequential reads, direct I/O, of a 64 MiB file on the target's disk",
        "fio",
        ("fio",),
        FIO_DIRECT.format(opts="--rw=read --bs=1M"),
        figures=(Figure("mib_per_s", "MiB/s", "higher", "MiB read per second"),),
        parse=fio({"mib_per_s": ("read", "bw_bytes", 1 / 2**20)}),
        needs_disk=True,
        work="GB",
    ),
    Workload(
        "disk_seqwrite",
        "disk",
        "fio 1 MiB sequential writes, direct I/O, to a 64 MiB file on the target's disk",
        "fio",
        ("fio",),
        FIO_DIRECT.format(opts="--rw=write --bs=1M"),
        figures=(Figure("mib_per_s", "MiB/s", "higher", "MiB written per second"),),
        parse=fio({"mib_per_s": ("write", "bw_bytes", 1 / 2**20)}),
        needs_disk=True,
        work="GB",
    ),
    Workload(
        "disk_fsync",
        "disk",
        "fio 4 KiB sequential writes, each followed by fsync, to a 16 MiB file on the target's disk (a database's log)",
        "fio",
        ("fio",),
        FIO_FSYNC.format(opts="--rw=write --bs=4k --fsync=1"),
        figures=(
            Figure("iops", "IOPS", "higher", "fsync'd writes per second"),
            Figure("fsync_p99_us", "us", "lower", "99th percentile fsync latency"),
        ),
        parse=fio({"iops": ("write", "iops", 1.0), "fsync_p99_us": ("sync", "lat_ns/percentile/99.000000", 1e-3)}),
        needs_disk=True,
        work="GB",
    ),
    Workload(
        "net_stream_tx",
        "net",
        "iperf3, one TCP stream from the target to an iperf3 server on the host "
        "(through the target's NIC; local: loopback)",
        "iperf3",
        ("iperf3",),
        "iperf3 -c $4 -p $3 -t $2 -J",
        figures=(Figure("gbit_per_s", "Gbit/s", "higher", "throughput sent"),),
        parse=iperf3("sum_sent"),
        peer="iperf3 -s -p {port} -B {bind}",
        work="GB",
    ),
    Workload(
        "net_stream_rx",
        "net",
        "iperf3 -R, one TCP stream from an iperf3 server on the host to the target",
        "iperf3",
        ("iperf3",),
        "iperf3 -c $4 -p $3 -t $2 -R -J",
        figures=(Figure("gbit_per_s", "Gbit/s", "higher", "throughput received"),),
        parse=iperf3("sum_received"),
        peer="iperf3 -s -p {port} -B {bind}",
        work="GB",
    ),
    Workload(
        "net_rr",
        "net",
        "sockperf ping-pong over TCP, 14-byte messages (its smallest), one at a time, to a "
        "sockperf server on the host: request/response",
        "sockperf",
        ("sockperf",),
        "sockperf ping-pong --tcp -i $4 -p $3 -t $2 -m 14 --full-rtt",
        figures=(
            Figure("tx_per_s", "tx/s", "higher", "round trips per second"),
            Figure("p50_us", "us", "lower", "median round-trip time"),
            Figure("p99_us", "us", "lower", "99th percentile round-trip time"),
        ),
        parse=sockperf,
        peer="sockperf server --tcp -p {port} -i {bind}",
        work="1000tx",
    ),
    # stress-ng stressors matching agent rows: a cross-check of the agent's figures
    Workload(
        "stress_fork",
        "stress",
        "stress-ng --fork 1 (cf. the agent's forkwait)",
        "stress-ng",
        ("stress-ng",),
        STRESS.format(stressor="fork"),
        figures=(Figure("ops_per_s", "ops/s", "higher", "bogo ops per second"),),
        parse=stress_ng,
    ),
    Workload(
        "stress_switch",
        "stress",
        "stress-ng --switch 1: a pipe ping-pong between two processes (cf. ctx_2p_0k)",
        "stress-ng",
        ("stress-ng",),
        STRESS.format(stressor="switch"),
        figures=(Figure("ops_per_s", "ops/s", "higher", "bogo ops per second"),),
        parse=stress_ng,
    ),
    Workload(
        "stress_sigsegv",
        "stress",
        "stress-ng --sigsegv 1 (cf. segv)",
        "stress-ng",
        ("stress-ng",),
        STRESS.format(stressor="sigsegv"),
        figures=(Figure("ops_per_s", "ops/s", "higher", "bogo ops per second"),),
        parse=stress_ng,
    ),
)
BY_NAME: dict[str, Workload] = {w.name: w for w in WORKLOADS}


def figure(spec: BenchSpec, values: dict[str, float]) -> float:
    """One figure of a tool's run (`<workload>.<figure>`), checked: a
    positive finite number, else ParseError naming it."""
    v = values.get(spec.name.split(".", 1)[1])
    if not isinstance(v, float) or not math.isfinite(v) or v <= 0:
        raise ParseError(f"{spec.name}: the tool reported {v!r}, not a positive number")
    return v


def of_spec(name: str) -> Workload | None:
    """The workload a row belongs to (`sysbench_cpu.events_per_s`)."""
    return BY_NAME.get(name.split(".", 1)[0]) if "." in name else None


def all_specs() -> list[BenchSpec]:
    return [s for w in WORKLOADS for s in w.specs()]


def provision(specs: list[BenchSpec], by: float | None = None):
    """What every target's root must hold for the workloads among specs
    (those whose tools this host has): guest.closure of their tools.  A
    workload's first use on a host traces its build once (cached after:
    compile_lua's took 10-35 s here); by (time.monotonic()): the trace ends
    there at the latest, the workload then skipped with what it needs."""
    from ..guest import closure

    chosen = [w for w in WORKLOADS if any(of_spec(s.name) is w for s in specs) and not w.missing()]
    tools = sorted({t for w in chosen for t in w.tools})
    data = sorted({d for w in chosen for d in w.data})
    files = dict(closure(tools, data)) if tools else {}
    from ..errors import TargetError

    for w in chosen:
        if w.traced is not None:
            left = TRACE_TIMEOUT if by is None else min(TRACE_TIMEOUT, by - time.monotonic())
            try:
                if left <= 0:
                    raise TargetError("no time left")
                files.update(w.traced(left))
            except TargetError as e:  # this workload is skipped with the reason; the rest run
                UNPROVISIONED[w.name] = (
                    f"its first use traces its build once on this host (cached after), and the budget left "
                    f"{max(0.0, left):.0f} s for it: not enough; run it once with a longer --max-time"
                    if by is not None and time.monotonic() >= by - 0.5
                    else f"its files could not be found on this host: {e}"
                )
    return tuple(sorted(files.items()))


TRACE_TIMEOUT = 900.0  # seconds a workload's first-use trace may take at most
# workloads whose traced files could not be found in this process (provision)
UNPROVISIONED: dict[str, str] = {}
