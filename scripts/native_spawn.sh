#!/usr/bin/env bash
# The native tier's cost per start (BENCHMARKS.md, figure 16): one process
# starts each program N times, as a host does, (a) plainly, (b) confined by
# airlock-native (helper, namespaces, root, Landlock, seccomp), (c) under
# bwrap with an equivalent policy (user, pid and net namespaces, read-only
# /usr and /etc, the repo writable, a tmpfs /tmp, a clean environment).
# Usage: scripts/native_spawn.sh [N]   (default 200; needs git, python3, bwrap)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-200}"
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
        printf '%-9s' plain;    "$confine" --plain --repeat "$n" -- $program
        printf '%-9s' confined; "$confine" --write "$repo" --repeat "$n" -- $program
        printf '%-9s' bwrap;    "$confine" --plain --repeat "$n" -- "${bwrap_policy[@]}" $program
    }
done
