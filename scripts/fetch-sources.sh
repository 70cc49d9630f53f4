#!/usr/bin/env bash
# The source tree the compile workload builds: Lua 5.4 from Debian's own
# source package (lua5.4), fetched with apt-get source through the mirror
# this machine's apt already uses (its deb lines, read as deb-src), into
# /usr/local/src/vmtax/lua5.4.  Does nothing when it is there.  A failure
# is said in one line and leaves setup going: the workload then says why it
# cannot run.
set -uo pipefail

dest=/usr/local/src/vmtax
[ -f "$dest/lua5.4/src/lua.c" ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/src"
# the Debian archive's entries only (third-party repositories seldom carry sources;
# a mirror that is not *.debian.org is missed: the workload then says so)
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && grep -E '^deb .*debian\.org' "$f" | sed 's/^deb /deb-src /' >>"$tmp/parts/vmtax.list"
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && grep -qE '^URIs:.*debian\.org' "$f" &&
    sed 's/^Types: .*/Types: deb-src/' "$f" >"$tmp/parts/$(basename "$f")"
done
apt=(apt-get -q -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts="$tmp/parts"
     -o Dir::State::Lists="$tmp/lists" -o APT::Sandbox::User=root)
if ! $sudo "${apt[@]}" update >"$tmp/log" 2>&1 ||
   ! (cd "$tmp/src" && $sudo "${apt[@]}" source --download-only lua5.4 >>"$tmp/log" 2>&1); then
  echo "setup: could not fetch Debian's lua5.4 source (the compile workload will say so): $(grep -E '^(E|W):' "$tmp/log" | head -1)"
  exit 0
fi
orig=$(ls "$tmp"/src/lua5.4_*.orig.tar.* 2>/dev/null | head -1)
if [ -z "$orig" ]; then
  echo "setup: apt-get source lua5.4 brought no upstream tarball (the compile workload will say so)"
  exit 0
fi
$sudo mkdir -p "$dest/lua5.4.tmp"
if ! $sudo tar -xf "$orig" -C "$dest/lua5.4.tmp" --strip-components=1 --no-same-owner; then
  $sudo rm -rf "$dest/lua5.4.tmp"
  echo "setup: could not unpack $(basename "$orig") (the compile workload will say so)"
  exit 0
fi
basename "$orig" | $sudo tee "$dest/lua5.4.tmp/VMTAX-SOURCE" >/dev/null
$sudo rm -rf "$dest/lua5.4"
$sudo mv "$dest/lua5.4.tmp" "$dest/lua5.4"
echo "setup: Lua source for the compile workload in $dest/lua5.4 ($(basename "$orig"))"
