"""Ansible inventories, INI and YAML: the hosts and groups a fleet is named by.

What vmtax reads of one: groups (INI `[web]`, `[web:children]`,
`[web:vars]`; YAML's hosts, children and vars under each group), host
variables (on the host's INI line, or under it in YAML), numeric and
letter ranges (`web[01:03]`), and these variables: ansible_host,
ansible_port, ansible_user, ansible_ssh_private_key_file (and the older
ansible_ssh_host, ansible_ssh_port, ansible_ssh_user), plus vmtax_OPTION
for any other option of an ssh target (vmtax_known_hosts,
vmtax_accept_new, vmtax_machine, vmtax_label...).  Other variables are
left alone.  Variables merge as Ansible merges them in the simple cases:
`all`'s first, then each group's from the outermost to the innermost (by
name among groups as deep), then the host's own.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import UserError

# inventory variable -> ssh target option
VARIABLES = {
    "ansible_host": "host",
    "ansible_ssh_host": "host",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "key",
}
PREFIX = "vmtax_"
MAX_HOSTS = 10000  # an inventory's hosts, counted before any range is expanded
MAX_DEPTH = 100  # groups nested in groups (YAML children)
MAX_WALK = 200000  # groups, hosts and variables read from YAML, aliases counted each time they are used
NAME = re.compile(r"^[A-Za-z0-9_.:\[\]-]+$")
RANGE = re.compile(r"^(.*?)\[([0-9]+|[a-z]+|[A-Z]+):([0-9]+|[a-z]+|[A-Z]+)(?::([0-9]+))?\](.*)$")


@dataclass
class Group:
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    vars: dict[str, str] = field(default_factory=dict)


@dataclass
class Inventory:
    path: str
    hosts: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> its own variables
    groups: dict[str, Group] = field(default_factory=dict)
    _groups_of: dict | None = field(default=None, repr=False)  # host -> its groups, once read
    walked: int = field(default=0, repr=False)  # what YAML reading has read (MAX_WALK)
    _depth: dict | None = field(default=None, repr=False)

    # -- building ----------------------------------------------------------------
    def group(self, name: str, where: str) -> Group:
        if not NAME.match(name):
            raise UserError(f"{where}: '{name}' is not a group name")
        return self.groups.setdefault(name, Group())

    def add_host(self, pattern: str, group: str, variables: dict[str, str], where: str) -> None:
        if len(self.hosts) + range_count(pattern, where) > MAX_HOSTS:
            raise UserError(f"{where}: '{pattern}' would make the inventory more than {MAX_HOSTS} hosts")
        self._groups_of = None
        for host in expand_range(pattern, where):
            if not NAME.match(host):
                raise UserError(f"{where}: '{host}' is not a host name")
            self.hosts.setdefault(host, {}).update(variables)
            g = self.group(group, where)
            if host not in g.hosts:
                g.hosts.append(host)

    # -- reading -----------------------------------------------------------------
    def members(self, group: str) -> list[str]:
        """The hosts of a group and of its children, in the file's order."""
        if group == "all":
            return list(self.hosts)
        seen: dict[str, None] = {}
        for g in self._closure(group):
            for h in self.groups[g].hosts:
                seen.setdefault(h, None)
        return [h for h in self.hosts if h in seen]

    def _closure(self, group: str) -> list[str]:
        out, todo = [], [group]
        while todo:
            g = todo.pop()
            if g not in out and g in self.groups:
                out.append(g)
                todo.extend(self.groups[g].children)
        return out

    def _depths(self) -> dict[str, int]:
        if self._depth is None:
            self._depth = {g: self.depth(g) for g in self.groups}
        return self._depth

    def depth(self, group: str, trail: tuple[str, ...] = ()) -> int:
        """all is 0, a group no group names as a child 1, a child one more
        than its deepest parent."""
        if group == "all":
            return 0
        if group in trail:
            raise UserError(f"{self.path}: group '{group}' is its own child ({' > '.join(trail + (group,))})")
        parents = [p for p, g in self.groups.items() if group in g.children and p != "all"]
        return 1 + max((self.depth(p, trail + (group,)) for p in parents), default=0)

    def groups_of(self, host: str) -> list[str]:
        """The groups a host is in (through children too), all aside:
        worked out once for every host (linear in the inventory's size)."""
        if self._groups_of is None:
            by: dict[str, list[str]] = {h: [] for h in self.hosts}
            for g in self.groups:
                if g != "all":
                    for h in self.members(g):
                        by[h].append(g)
            self._groups_of = by
        return self._groups_of.get(host, [])

    def variables(self, host: str) -> dict[str, str]:
        """A host's variables, merged as Ansible merges them."""
        merged = dict(self.groups["all"].vars) if "all" in self.groups else {}
        depth = self._depths()
        for g in sorted(self.groups_of(host), key=lambda g: (depth[g], g)):
            merged.update(self.groups[g].vars)
        merged.update(self.hosts[host])
        return merged

    def target_options(self, host: str) -> dict[str, str]:
        """The ssh target options of a host: its name where it has no
        ansible_host, as Ansible connects."""
        options = {"host": host}
        for key, value in self.variables(host).items():
            if (key in VARIABLES or key.startswith(PREFIX)) and ("{{" in value or "{%" in value):
                raise UserError(
                    f"{self.path}: host {host}: {key} is a template ({value[:60]}): Ansible renders "
                    f"those, vmtax does not: flatten the inventory with `ansible-inventory -i "
                    f"{self.path} --list --yaml` and give that"
                )
            if key in VARIABLES:
                options[VARIABLES[key]] = value
            elif key.startswith(PREFIX) and len(key) > len(PREFIX):
                options[key[len(PREFIX) :]] = value
        return options

    def select(self, name: str) -> list[str]:
        """The hosts a name stands for: a group's (all: every host), or one host."""
        if name == "all" or name in self.groups:
            hosts = self.members(name)
            if not hosts:
                raise UserError(f"group '{name}' of {self.path} has no hosts")
            return hosts
        if name in self.hosts:
            return [name]
        known = sorted(set(self.groups) - {"all", "ungrouped"})
        raise UserError(f"{self.path} names no group or host '{name}' (groups: {', '.join(known) or 'none'})")


def range_count(pattern: str, where: str) -> int:
    """How many hosts a pattern names, counted without expanding it (the
    product of its ranges' lengths)."""
    m = RANGE.match(pattern)
    if not m:
        return 1
    head, lo, hi, step, tail = m.groups()
    stride = int(step or 1)
    if lo.isdigit() != hi.isdigit() or stride < 1 or (not lo.isdigit() and (len(lo) != 1 or len(hi) != 1)):
        return 1  # expand_range says what is wrong with it
    first, last = (int(lo), int(hi)) if lo.isdigit() else (ord(lo), ord(hi))
    n = max(0, (last - first) // stride + 1)
    return n * range_count(head + (lo if n else "") + tail, where) if n else 0


def expand_range(pattern: str, where: str) -> list[str]:
    """web[01:03] -> web01 web02 web03; [a:c] -> a b c; [0:8:4] -> 0 4 8."""
    m = RANGE.match(pattern)
    if not m:
        if "[" in pattern or "]" in pattern:
            raise UserError(f"{where}: '{pattern}' is not a host range vmtax reads ([01:10] or [a:f])")
        return [pattern]
    head, lo, hi, step, tail = m.groups()
    stride = int(step or 1)
    if lo.isdigit() != hi.isdigit() or stride < 1:
        raise UserError(f"{where}: '{pattern}' is not a host range vmtax reads ([01:10] or [a:f])")
    if lo.isdigit():
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        values = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1, stride)]
    else:
        if len(lo) != 1 or len(hi) != 1:
            raise UserError(f"{where}: '{pattern}': a letter range is one letter to one letter")
        values = [chr(c) for c in range(ord(lo), ord(hi) + 1, stride)]
    if not values or len(values) > 10000:
        raise UserError(f"{where}: '{pattern}' names {len(values)} hosts")
    return [h for v in values for h in expand_range(head + v + tail, where)]


def _scalar(value, where: str) -> str | None:
    """A variable's value as an option string (None: not a scalar: a
    variable vmtax does not read, left alone)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float, str)):
        return str(value)
    return None


# -- INI -----------------------------------------------------------------------------
SECTION = re.compile(r"^\[([^\]:]+)(?::(vars|children))?\]$")


def parse_ini(text: str, path: str) -> Inventory:
    inv = Inventory(path)
    group, what = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{path}:{number}"
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = SECTION.match(line)
            if not m:
                raise UserError(f"{where}: '{line}' is not a section ([group], [group:vars] or [group:children])")
            group, what = m.group(1).strip(), m.group(2) or "hosts"
            inv.group(group, where)
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise UserError(f"{where}: {e}") from None
        if words:
            {"vars": _ini_var, "children": _ini_child}.get(what, _ini_host)(inv, group, line, words, where)
    return inv


def _ini_var(inv: Inventory, group: str, line: str, _words: list[str], where: str) -> None:
    """A line under [group:vars]: key=value."""
    key, eq, value = line.partition("=")
    if not eq or not key.strip():
        raise UserError(f"{where}: '{line}' is not key=value")
    inv.group(group, where).vars[key.strip()] = _unquote(value.strip(), where)


def _ini_child(inv: Inventory, group: str, _line: str, words: list[str], where: str) -> None:
    """A line under [group:children]: one group's name."""
    if len(words) != 1:
        raise UserError(f"{where}: one group name per line under [{group}:children]")
    inv.group(words[0], where)
    g = inv.group(group, where)
    if words[0] not in g.children:
        g.children.append(words[0])


def _ini_host(inv: Inventory, group: str, _line: str, words: list[str], where: str) -> None:
    """A host's line: host[:port] key=value ..."""
    host, variables = words[0], {}
    m = re.match(r"^([^:\[\]]+):([0-9]+)$", host)  # host:port
    if m:
        host, variables["ansible_port"] = m.group(1), m.group(2)
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq or not key:
            raise UserError(f"{where}: '{word}' after host {host} is not key=value")
        variables[key] = value
    inv.add_host(host, group, variables, where)


def _unquote(value: str, where: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        try:
            return shlex.split(value)[0]
        except (ValueError, IndexError):
            raise UserError(f"{where}: unbalanced quotes in {value}") from None
    return value


# -- YAML ----------------------------------------------------------------------------
def parse_yaml(doc, path: str) -> Inventory:
    inv = Inventory(path)
    if not isinstance(doc, dict):
        raise UserError(f"{path}: a YAML inventory is a mapping of groups (all: hosts: ...)")
    for name, body in doc.items():
        _yaml_group(inv, str(name), body, f"{path}: group {name}")
    return inv


def _yaml_group(inv: Inventory, name: str, body, where: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise UserError(f"{where}: groups nested more than {MAX_DEPTH} deep (a YAML alias of a group inside itself?)")
    g = inv.group(name, where)
    if body is None:
        return
    if not isinstance(body, dict):
        raise UserError(f"{where}: a group is a mapping with hosts, children and vars")
    unknown = set(body) - {"hosts", "children", "vars"}
    if unknown:
        raise UserError(
            f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (a group has hosts, children and vars)"
        )
    _walk(inv, 1 + sum(len(v) for v in body.values() if isinstance(v, dict)), where)
    for key, value in _mapping(body.get("vars"), f"{where}: vars").items():
        if (text := _scalar(value, where)) is not None:
            g.vars[str(key)] = text
    for host, variables in _mapping(body.get("hosts"), f"{where}: hosts").items():
        own = {
            str(k): t
            for k, v in _mapping(variables, f"{where}: host {host}").items()
            if (t := _scalar(v, where)) is not None
        }
        inv.add_host(str(host), name, own, where)
    for child, child_body in _mapping(body.get("children"), f"{where}: children").items():
        if str(child) not in g.children:
            g.children.append(str(child))
        _yaml_group(inv, str(child), child_body, f"{inv.path}: group {child}", depth + 1)


def _walk(inv: Inventory, n: int, where: str) -> None:
    """Count what a YAML group holds as it is read: aliases used again and
    again (a group's children aliasing one group twice, 40 levels deep)
    would otherwise be read 2**40 times."""
    inv.walked += n
    if inv.walked > MAX_WALK:
        raise UserError(
            f"{where}: the YAML's aliases make more than {MAX_WALK} groups, hosts and "
            "variables to read (an alias bomb?)"
        )


def _mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


# -- a file --------------------------------------------------------------------------
def load(path: str) -> Inventory:
    """An inventory file, INI or YAML: by its extension (.yml, .yaml,
    .json), else YAML where the file is a mapping of groups, else INI."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the inventory {path}: {getattr(e, 'strerror', None) or e}") from None
    beside = [d + "/" for d in ("group_vars", "host_vars") if (Path(path).parent / d).is_dir()]
    if beside:
        raise UserError(
            f"{path}: vmtax reads the inventory file alone, not the {' and '.join(beside)} beside it "
            f"(Ansible would): flatten it with `ansible-inventory -i {path} --list --yaml > FILE` "
            f"and give FILE"
        )
    if Path(path).suffix.lower() in (".yml", ".yaml", ".json"):
        return parse_yaml(_load_yaml(text, path), path)
    try:
        doc = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        doc = None
    if isinstance(doc, dict) and doc and all(v is None or isinstance(v, dict) for v in doc.values()):
        return parse_yaml(doc, path)
    return parse_ini(text, path)


def _load_yaml(text: str, path: str):
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise UserError(f"{path}: YAML nested too deep (a recursive alias?)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(f"{path}{at}: not valid YAML ({getattr(e, 'problem', None) or 'syntax'})") from None
