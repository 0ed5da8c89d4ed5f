#!/usr/bin/env bash
# The native tier's cost per start (BENCHMARKS.md, figure 16): one process
# starts each program N times, as a host does, (a) plainly, (b) confined by
# airlock-native (helper, namespaces, root, Landlock, seccomp), (c) under
# bwrap with an equivalent policy (user, pid and net namespaces, read-only
# /usr and /etc, the repo writable, a tmpfs /tmp, a clean environment); and
# (b') confined in a helper started ahead of the program, as a host starts
# programs between an agent's calls (each row pauses GAP ms before each
# start, so that the helper started after a run is ready for the next).
# Usage: scripts/native_spawn.sh [N] [GAP]   (defaults 200 and 20; needs
# git, python3, bwrap). As root the helper joins a pids cgroup, which on
# cgroup v1 waits for an RCU grace period when no join came just before:
# compare a run as another user (setpriv --reuid 65534 ...).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-200}"
gap="${2:-20}"
cargo build --quiet --release -p airlock-native --example confine
confine="$PWD/target/release/examples/confine"
repo="$(mktemp -d)"
trap 'rm -rf "$repo"' EXIT
git -C "$repo" init -q
echo a > "$repo/a.txt"
git -C "$repo" add a.txt
git -C "$repo" -c user.name=b -c user.email=b@b commit -qm a
cd "$repo"
bwrap_policy=("$(command -v bwrap)" --unshare-user --unshare-pid --unshare-net --die-with-parent --new-session
    --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
    --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp
    --bind "$repo" "$repo" --chdir "$repo" --clearenv --setenv PATH /usr/local/bin:/usr/bin:/bin --)
git="$(command -v git)"
for program in "/bin/true" "$git status --short" "/usr/bin/python3 -c pass"; do
    # shellcheck disable=SC2086 # the program's words
    {
        echo "--- $program"
        printf '%-9s' plain;    "$confine" --plain --repeat "$n" --gap "$gap" -- $program
        printf '%-9s' confined; "$confine" --write "$repo" --repeat "$n" --gap "$gap" -- $program
        printf '%-9s' ahead;    "$confine" --ahead --write "$repo" --repeat "$n" --gap "$gap" -- $program
        printf '%-9s' bwrap;    "$confine" --plain --repeat "$n" --gap "$gap" -- "${bwrap_policy[@]}" $program
    }
done
