"""A container's network, as its net= option asks: none (loopback only),
host (the host's stack), slirp4netns (the rootless user-mode stack, the
host's loopback at 10.0.2.2), or bridge: podman's default network's shape
-- a veth from the container to a Linux bridge, the host's side at the
bridge's address -- built in network namespaces vmtax makes for the run
(netns.py), so that the host's own interfaces and routes are never
touched."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator

from ..errors import TargetError, UserError
from ..netns import NetNs


class ContainerNet:
    """One container's network: its checks, the namespaces of a bridge,
    and the host's address as seen from inside once it runs."""

    NETS = ("none", "host", "bridge", "slirp4netns")
    BRIDGE_HOST, BRIDGE_INSIDE = "10.213.0.1", "10.213.0.2/24"

    def __init__(self, name: str, net: str, engine: str):
        if net not in self.NETS:
            raise UserError(f"target '{name}': net must be one of {', '.join(self.NETS)}, got '{net}'")
        if net in ("bridge", "slirp4netns") and engine == "unshare":
            raise UserError(f"target '{name}': net={net} needs engine=podman (unshare offers none and host)")
        if net == "slirp4netns" and not shutil.which("slirp4netns"):
            raise UserError(f"target '{name}': net=slirp4netns needs slirp4netns (apt install slirp4netns)")
        self.name, self.net = name, net
        self.side: NetNs | None = None  # net=bridge: the host's side, with the peers
        self.inner: NetNs | None = None  # net=bridge: the container's namespace
        self.host_seen_at: str | None = None  # the host's address from inside, once started

    def podman_network(self) -> str:
        """podman run's --network (a bridge's namespaces made here)."""
        if self.net == "bridge":
            return self._bridge()
        return "slirp4netns:allow_host_loopback=true" if self.net == "slirp4netns" else self.net

    def _bridge(self) -> str:
        """Two namespaces of vmtax's own, the host's side (a bridge with its
        address) and the container's (a veth to that bridge, its default
        route to the bridge's address): podman's network `ns:` joins it."""
        self.side = NetNs(f"{self.name}: net=bridge")
        self.inner = NetNs(f"{self.name}: net=bridge")
        for argv in (
            ["ip", "link", "add", "vmtaxbr0", "type", "bridge"],
            ["ip", "addr", "add", f"{self.BRIDGE_HOST}/24", "dev", "vmtaxbr0"],
            ["ip", "link", "set", "vmtaxbr0", "up"],
            ["ip", "link", "add", "veth0", "type", "veth", "peer", "name", "eth0", "netns", str(self.inner.pid)],
            ["ip", "link", "set", "veth0", "master", "vmtaxbr0", "up"],
        ):
            self.side.run(argv)
        for argv in (
            ["ip", "addr", "add", self.BRIDGE_INSIDE, "dev", "eth0"],
            ["ip", "link", "set", "eth0", "up"],
            ["ip", "route", "add", "default", "via", self.BRIDGE_HOST],
        ):
            self.inner.run(argv)
        return f"ns:{self.inner.path}"

    def find_host(self, run_tool: Callable[..., Iterator[str]]) -> None:
        """Once the container runs: the host's address from inside it."""
        self.host_seen_at = {"host": "127.0.0.1", "slirp4netns": "10.0.2.2"}.get(self.net)
        if self.net == "bridge":  # the host is the bridge's gateway: the container's default route
            route = " ".join(run_tool(["ip", "-4", "route", "show", "default"], timeout=30))
            m = re.search(r"default via (\d+\.\d+\.\d+\.\d+)", route)
            if not m:
                raise TargetError(f"{self.name}: net=bridge gave the container no default route ({route[:100]!r})")
            self.host_seen_at = m.group(1)

    def listen(self) -> tuple[str, object] | None:
        """Where a host-side peer listens: the bridge's address in its namespace (None: the default)."""
        return (self.BRIDGE_HOST, self.side) if self.net == "bridge" and self.side else None

    def facts(self) -> dict:
        if not (self.side and self.inner):
            return {}
        return {
            "bridge": f"vmtaxbr0 {self.BRIDGE_HOST}/24 in network namespace {self.side.describe()}, "
            f"the container's veth {self.BRIDGE_INSIDE} in {self.inner.describe()}"
        }

    def close(self) -> None:
        for ns in (self.side, self.inner):
            if ns is not None:
                ns.close()
        self.side = self.inner = None
