"""Ansible inventories (INI and YAML) -> ssh targets, and the target
strings that name them; the ssh target's options and what it sends to the
remote shell.  No connection is made here (tests/test_ssh_e2e.py makes them)."""

import subprocess

import pytest

from vmtax.errors import TargetError, UserError
from vmtax.inventory import expand_range, load
from vmtax.targets import parse_target, parse_targets
from vmtax.targets.ssh import SshTarget, _last_cpu
from vmtax.targets.sshlink import remote_command

INI = """\
# a comment
loose.example.com

[web]
web1 ansible_host=10.0.0.1 ansible_port=2222
web2 ansible_host="10.0.0.2"   # a comment after a host
web[3:4].example.com

[web:vars]
ansible_user=deploy
ansible_ssh_private_key_file = ~/.ssh/web_key

[db]
db1:2200 ansible_user=postgres vmtax_machine=rack1

[prod:children]
web
db

[prod:vars]
ansible_user=prod
vmtax_known_hosts=/etc/vmtax/known_hosts

[all:vars]
ansible_user=nobody
ansible_port=22
"""

YAML = """\
all:
  vars:
    ansible_user: nobody
    ansible_port: 22
  hosts:
    loose.example.com:
  children:
    prod:
      vars:
        ansible_user: prod
        vmtax_known_hosts: /etc/vmtax/known_hosts
      children:
        web:
          vars: {ansible_user: deploy, ansible_ssh_private_key_file: ~/.ssh/web_key}
          hosts:
            web1: {ansible_host: 10.0.0.1, ansible_port: 2222}
            web2: {ansible_host: 10.0.0.2}
            web[3:4].example.com:
        db:
          hosts:
            db1: {ansible_port: 2200, ansible_user: postgres, vmtax_machine: rack1, vmtax_accept_new: true}
"""


@pytest.fixture(params=["ini", "yaml"])
def inventory(request, tmp_path):
    path = tmp_path / ("hosts" if request.param == "ini" else "hosts.yml")
    path.write_text(INI if request.param == "ini" else YAML)
    return load(str(path))


def test_hosts_and_groups_in_the_files_order(inventory):
    assert list(inventory.hosts) == ["loose.example.com", "web1", "web2", "web3.example.com", "web4.example.com", "db1"]
    assert inventory.select("web") == ["web1", "web2", "web3.example.com", "web4.example.com"]
    assert inventory.select("prod") == ["web1", "web2", "web3.example.com", "web4.example.com", "db1"]
    assert inventory.select("all")[0] == "loose.example.com" and len(inventory.select("all")) == 6
    assert inventory.select("db1") == ["db1"]


def test_variables_merge_as_ansible_merges_them(inventory):
    """all, then outer groups, then inner ones, then the host's own."""
    assert inventory.target_options("web1") == {
        "host": "10.0.0.1",
        "port": "2222",
        "user": "deploy",
        "key": "~/.ssh/web_key",
        "known_hosts": "/etc/vmtax/known_hosts",
    }
    assert inventory.target_options("web3.example.com")["port"] == "22"  # all's
    assert inventory.target_options("web3.example.com")["host"] == "web3.example.com"  # no ansible_host
    db1 = inventory.target_options("db1")
    assert (db1["user"], db1["port"], db1["machine"]) == ("postgres", "2200", "rack1")
    assert inventory.target_options("loose.example.com") == {
        "host": "loose.example.com",
        "user": "nobody",
        "port": "22",
    }


def test_an_inventory_name_is_ssh_targets_with_the_options_given(inventory, tmp_path):
    targets = parse_targets("@web:label=new,port=2022", inventory)
    assert [t.name for t in targets][:2] == ["ssh:web1,label=new,port=2022", "ssh:web2,label=new,port=2022"]
    assert all(isinstance(t, SshTarget) for t in targets)
    first = targets[0]
    assert (first.host, first.port, first.user) == ("10.0.0.1", 2022, "deploy")  # given beats the file's
    assert first.key.endswith("/.ssh/web_key") and not first.key.startswith("~")
    assert [t.name for t in parse_targets("@db1", inventory)] == ["ssh:db1"]
    assert parse_targets("local", inventory)[0].kind == "local"


@pytest.fixture(autouse=True)
def _keys_exist(monkeypatch):
    """The key and known_hosts files the inventories name need not exist here."""
    import vmtax.targets.sshlink as ssh

    real = ssh._path_option
    monkeypatch.setattr(ssh, "_path_option", lambda n, o, k, must_exist=True: real(n, o, k, must_exist=False))


def test_unknown_names_and_missing_inventory(inventory):
    with pytest.raises(UserError, match=r"names no group or host 'nope'.*groups: db, prod, web"):
        parse_targets("@nope", inventory)
    with pytest.raises(UserError, match="give --inventory FILE"):
        parse_targets("@web")
    with pytest.raises(UserError, match="cannot read the inventory"):
        load("/nonexistent/hosts")


@pytest.mark.parametrize(
    "text, match",
    [
        ("[web\nh1\n", "is not a section"),
        ("[web]\nh1 ansible_port\n", "is not key=value"),
        ("[web:vars]\njust words\n", "is not key=value"),
        ("[web]\nh1 ansible_host='unclosed\n", "quotation"),
        ("[web]\nh[1:x]\n", "not a host range"),
        ("[a:children]\nb\n[b:children]\na\n[b]\nh1\n", "its own child"),
    ],
)
def test_a_bad_ini_inventory_is_one_line_with_its_line(tmp_path, text, match):
    path = tmp_path / "bad.ini"
    path.write_text(text)
    with pytest.raises(UserError, match=match) as e:
        inv = load(str(path))
        for h in inv.hosts:
            inv.target_options(h)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, match",
    [
        ("all: [1, 2]\n", "a group is a mapping"),
        ("all:\n  hostz: {}\n", "unknown key"),
        ("all:\n  hosts: [a, b]\n", "expected a mapping"),
        ("all:\n  hosts:\n    a: {x: [1\n", "not valid YAML"),
        ("- a\n- b\n", "mapping of groups"),
    ],
)
def test_a_bad_yaml_inventory_is_one_line(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=match):
        load(str(path))


def test_the_format_is_found_without_an_extension(tmp_path):
    (tmp_path / "a").write_text("all:\n  hosts:\n    h1:\n")
    (tmp_path / "b").write_text("h1\nh2:2222\n")
    assert list(load(str(tmp_path / "a")).hosts) == ["h1"]
    b = load(str(tmp_path / "b"))
    assert list(b.hosts) == ["h1", "h2"] and b.target_options("h2")["port"] == "2222"


def test_ranges():
    assert expand_range("web[01:03]", "x") == ["web01", "web02", "web03"]
    assert expand_range("n[0:8:4]", "x") == ["n0", "n4", "n8"]
    assert expand_range("r[a:c]-[1:2]", "x") == ["ra-1", "ra-2", "rb-1", "rb-2", "rc-1", "rc-2"]
    with pytest.raises(UserError):
        expand_range("h[1:100000]", "x")


# -- the ssh target's options ---------------------------------------------------------
@pytest.mark.parametrize(
    "text, host, user, port",
    [
        ("ssh:bench.example.com", "bench.example.com", None, None),
        ("ssh:me@10.1.2.3,port=2222", "10.1.2.3", "me", 2222),
        ("ssh:host=h,user=u,port=22", "h", "u", 22),
    ],
)
def test_ssh_target_strings(text, host, user, port):
    t = parse_target(text)
    assert (t.host, t.user, t.port) == (host, user, port)


@pytest.mark.parametrize(
    "text, match",
    [
        ("ssh:", "say which host"),
        ("ssh:-oProxyCommand", "not a host name"),
        ("ssh:host=a b", "not a host name"),
        ("ssh:h,user=-x", "not a user name"),
        ("ssh:h,port=99999", "port must be"),
        ("ssh:h,accept_new=maybe", "accept_new must be yes or no"),
        ("ssh:h,key=/tmp/a%d", "cannot hold whitespace, %"),
        ("ssh:h,shell=/bin/sh", "unknown option"),
    ],
)
def test_bad_ssh_options_are_one_line(text, match):
    with pytest.raises(UserError, match=match):
        parse_target(text)


def test_what_the_remote_login_shell_parses_is_quoted_words_only():
    """Whatever the arguments hold, a POSIX shell gives the script exactly
    them (the same string sshd hands to the user's shell)."""
    nasty = ["a b", "'", '"', "$(echo pwned)", "`id`", "; exit 3", "*", "~", "", "-n"]
    cmd = remote_command('printf "%s|" "$@"', nasty)
    for shell in ("sh", "bash"):
        out = subprocess.run([shell, "-c", cmd], capture_output=True, text=True).stdout
        assert out == "".join(f"{a}|" for a in nasty)
    for bad in ["a\nb", "back\\slash", "\x1b[31m"]:
        with pytest.raises(TargetError):
            remote_command("true", [bad])


def test_the_remote_cpu_a_pinned_run_uses():
    assert _last_cpu("0-3,6") == 6 and _last_cpu("0-1") == 1 and _last_cpu("5") is None
    assert _last_cpu("") is None and _last_cpu("x") is None


# -- limits and linear time (issue 22 item 6) ------------------------------------------
@pytest.mark.parametrize(
    "text", ["[big]\nh[0:99999999]\n", "[big]\nh[0:9999][0:9999]\n", "[a]\nx[0:5000]\n[b]\ny[0:5000]\n"]
)
def test_too_many_hosts_are_counted_before_any_is_made(tmp_path, text):
    import tracemalloc

    f = tmp_path / "big.ini"
    f.write_text(text)
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match="more than 10000 hosts"):
            load(str(f))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, peak  # the ranges were never expanded


def test_eight_thousand_hosts_read_in_linear_time(tmp_path):
    """8,000 hosts in 40 groups under one parent: every host's variables
    and options (15 s when each host's groups were found group by group)."""
    import time

    lines = [f"[g{i}]\nh{i}-[0:199]\n" for i in range(40)]
    lines.append("[parent:children]\n" + "\n".join(f"g{i}" for i in range(40)) + "\n[parent:vars]\nansible_user=u\n")
    f = tmp_path / "many.ini"
    f.write_text("".join(lines))
    t0 = time.monotonic()
    inv = load(str(f))
    opts = [inv.target_options(h) for h in inv.hosts]
    took = time.monotonic() - t0
    assert len(opts) == 8000 and all(o["user"] == "u" for o in opts)
    assert took < 3, took


@pytest.mark.parametrize(
    "text",
    [
        "all: &a\n  children:\n    loop: *a\n",
        "all: &a [*a]\n",
        "all:\n  children:\n    g: &g\n      children:\n        h: *g\n",
    ],
)
def test_recursive_yaml_aliases_are_one_line(tmp_path, text, capsys):
    from vmtax.cli import main

    f = tmp_path / "r.yml"
    f.write_text(text)
    assert main(["targets", "--inventory", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_group_vars_beside_the_inventory_are_said_not_read(tmp_path):
    (tmp_path / "group_vars").mkdir()
    f = tmp_path / "hosts.ini"
    f.write_text("[web]\nw1\n")
    with pytest.raises(UserError, match=r"not the group_vars/ beside it.*ansible-inventory"):
        load(str(f))


def test_a_templated_variable_is_refused(tmp_path):
    f = tmp_path / "t.ini"
    f.write_text('[web]\nw1 ansible_user=\'{{ lookup("env", "USER") }}\'\n')
    with pytest.raises(UserError, match="is a template"):
        load(str(f)).target_options("w1")


def test_an_inventory_inject_shows_in_the_target_name_and_facts(tmp_path):
    f = tmp_path / "i.ini"
    f.write_text("[web]\nw1\nw2 vmtax_inject=3\n")
    names = [t.name for t in parse_targets("@web", load(str(f)))]
    assert names == ["ssh:w1", "ssh:w2,inject=3"]
    t = parse_targets("@web", load(str(f)))[1]
    assert t.inject == 3.0 and t.options["inject"] == "3"


def test_a_yaml_alias_bomb_is_one_line_in_bounded_time(tmp_path):
    """Each group's children alias the group below twice, 40 levels deep:
    read naively, 2**40 groups; refused once the reading passes MAX_WALK."""
    import time

    text = "x0: &x0\n  hosts: {h1: }\n" + "".join(
        f"x{i}: &x{i}\n  children: {{a{i}: *x{i - 1}, b{i}: *x{i - 1}}}\n" for i in range(1, 40)
    )
    path = tmp_path / "bomb.yml"
    path.write_text(text)
    t0 = time.monotonic()
    with pytest.raises(UserError, match="alias bomb") as e:
        load(str(path))
    assert "\n" not in str(e.value) and time.monotonic() - t0 < 5
