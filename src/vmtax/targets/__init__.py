"""Target strings -> Target objects.  `kind[:key=value,...]`, e.g. `local`,
`qemu:accel=tcg,smp=2,mem=1G`; a kind with a positional option takes its
value as a bare first word (`ssh:HOST,port=2222`).  With an inventory,
`@NAME[:key=value,...]` is every host of the group NAME (or the host NAME)
as an ssh target named `ssh:HOST`, the options given applying to each."""

from __future__ import annotations

from ..errors import UserError
from ..inventory import Inventory
from .base import Target
from .container import ContainerTarget
from .fake import FakeTarget
from .local import LocalTarget
from .qemu import QemuTarget
from .ssh import SshTarget
from .uml import UmlTarget
from .xen import XenTarget

KINDS: dict[str, type[Target]] = {
    LocalTarget.kind: LocalTarget,
    QemuTarget.kind: QemuTarget,
    UmlTarget.kind: UmlTarget,
    ContainerTarget.kind: ContainerTarget,
    SshTarget.kind: SshTarget,
    XenTarget.kind: XenTarget,
    FakeTarget.kind: FakeTarget,
}


def parse_target(text: str) -> Target:
    kind, _, rest = text.partition(":")
    cls = KINDS.get(kind)
    if cls is None:
        hint = " (@NAME names inventory hosts: give --inventory FILE)" if kind.startswith("@") else ""
        raise UserError(f"unknown target kind '{kind}' (known: {', '.join(sorted(KINDS))}){hint}")
    return cls(text, _options(text, rest, cls.positional))


def prepare(targets: list[Target]) -> list[str]:
    """Each kind's Target.prepare, once, with its targets of this run (in
    the order given): what the user should be told."""
    notes = []
    for kind in dict.fromkeys(type(t) for t in targets):
        note = kind.prepare([t for t in targets if type(t) is kind])
        if note:
            notes.append(note)
    return notes


def _options(text: str, rest: str, positional: str | None = None) -> dict[str, str]:
    options: dict[str, str] = {}
    for i, part in enumerate(filter(None, rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq and i == 0 and positional:
            key, value = positional, part
        elif not eq or not key:
            raise UserError(f"target option '{part}' in '{text}' is not key=value")
        if key.strip() in options:
            raise UserError(f"target option '{key.strip()}' is given twice in '{text}'")
        options[key.strip()] = value.strip()
    return options


def parse_targets(text: str, inventory: Inventory | None = None) -> list[Target]:
    """One target string -> its targets: one, or an inventory name's hosts."""
    if not text.startswith("@") or inventory is None:
        return [parse_target(text)]
    name, _, rest = text[1:].partition(":")
    given = _options(text, rest)
    out: list[Target] = []
    for host in inventory.select(name):
        options = {**inventory.target_options(host), **given}
        # an inventory variable that changes what is measured shows in the target's name
        shown = [f"{k}={options[k]}" for k in MEASURING if k in options and k not in given]
        out.append(SshTarget(",".join([f"{SshTarget.kind}:{host}", *shown] + ([rest] if rest else [])), options))
    return out


MEASURING = ("inject",)  # target options that change the measurement itself
