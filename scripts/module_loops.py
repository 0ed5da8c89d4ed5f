"""Import loops between the modules of each host crate.

A module uses another when its code (tests aside: from a `#[cfg(test)]`
line on) names it by path: `crate::a::b`, `super::b`, `self::b`, each
taken to the deepest module that exists (`crate::config::Config` is a
use of `config`). A module declaring its children (`mod b;`) is not a use.
Prints each crate's loops (modules that reach one another, strongly
connected), one line each, and exits 1 when there is any.

Usage: python3 scripts/module_loops.py [CRATE_SRC_DIR ...]
  (default: every host/*/src)
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*)\}")


def modules(src: pathlib.Path) -> dict:
    """Each module's path (a tuple; the crate root is `()`) -> its file."""
    found = {}
    for file in src.rglob("*.rs"):
        if file == src / "main.rs" and (src / "lib.rs").exists():
            continue
        parts = list(file.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("lib", "main", "mod"):
            parts.pop()
        found[tuple(parts)] = file
    return found


def code(file: pathlib.Path) -> str:
    """The file without its tests and comments."""
    text = file.read_text()
    at = text.find("#[cfg(test)]")
    if at >= 0:
        text = text[:at]
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def target(known: dict, here: tuple, kind: str, names: list) -> tuple:
    """The deepest known module `kind::names` names, seen from `here`."""
    if kind == "crate":
        base = ()
    elif kind == "super":
        base = here[:-1]
    else:
        base = here
    while names and names[0] == "super":
        base, names = base[:-1], names[1:]
    best = base
    for n in range(1, len(names) + 1):
        if base + tuple(names[:n]) in known:
            best = base + tuple(names[:n])
    return best


def uses(known: dict) -> dict:
    edges = {m: set() for m in known}
    for here, file in known.items():
        text = code(file)
        paths = [(k, rest.split("::")[1:]) for k, rest in PATH.findall(text)]
        for kind, prefix, inner in GROUP.findall(text):
            for item in inner.split(","):
                item = item.strip().split(" as ")[0]
                if item:
                    paths.append((kind, prefix.split("::")[1:] + item.split("::")))
        for kind, names in paths:
            to = target(known, here, kind, names)
            if to != here:
                edges[here].add(to)
    return edges


def loops(edges: dict) -> list:
    """Strongly connected groups of two or more modules (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return found


def name(module: tuple) -> str:
    return "::".join(module) or "(root)"


def main(dirs: list) -> int:
    dirs = [pathlib.Path(d) for d in dirs] or sorted(ROOT.glob("host/*/src"))
    total = 0
    for src in dirs:
        found = loops(uses(modules(src)))
        total += len(found)
        crate = src.parent.name
        if not found:
            print(f"{crate}: no loop")
        for group in found:
            print(f"{crate}: loop among {', '.join(name(m) for m in group)}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
