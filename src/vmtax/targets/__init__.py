"""Target strings -> Target objects.  `kind[:key=value,...]`, e.g. `local`,
`qemu:accel=tcg,smp=2,mem=1G`."""
from __future__ import annotations

from ..errors import UserError
from .base import Target
from .container import ContainerTarget
from .fake import FakeTarget
from .local import LocalTarget
from .qemu import QemuTarget
from .uml import UmlTarget

KINDS: dict[str, type[Target]] = {
    LocalTarget.kind: LocalTarget,
    QemuTarget.kind: QemuTarget,
    UmlTarget.kind: UmlTarget,
    ContainerTarget.kind: ContainerTarget,
    FakeTarget.kind: FakeTarget,
}


def parse_target(text: str) -> Target:
    kind, _, rest = text.partition(":")
    cls = KINDS.get(kind)
    if cls is None:
        raise UserError(f"unknown target kind '{kind}' (known: {', '.join(sorted(KINDS))})")
    options: dict[str, str] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise UserError(f"target option '{part}' in '{text}' is not key=value")
        options[key.strip()] = value.strip()
    return cls(text, options)
