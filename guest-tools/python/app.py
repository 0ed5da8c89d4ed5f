"""`python`: runs a Python snippet in CPython inside the sandbox, the
REPLTool of Claude Code's tool layer. Each call is a fresh interpreter:
nothing persists between calls but the files the snippet writes. What it
prints (stdout and stderr, interleaved as written) is captured and capped;
a last line that is an expression is echoed like a REPL echoes it. Files
are reached through the operator's grants like every other tool's, and
nothing else: no sockets, no processes. Built with `airlock build`
(componentize-py) by `just build-guests`."""

import ast
import importlib
import sys
import traceback
from dataclasses import dataclass
from typing import Annotated

from airlock_sdk import (
    Access, Context, Failed, InvalidInput, Output, PermissionDenied, export, tool,
)

# What a call may print before the rest is dropped (Claude Code's Bash
# keeps the same amount).
MAX_OUTPUT = 30_000

# componentize-py snapshots the interpreter after this module is imported,
# and only the modules imported by then are in the component: the snippet
# can import these (those of them that load under WASI), and no others.
STDLIB = (
    "abc", "argparse", "array", "base64", "binascii", "bisect", "calendar", "cmath",
    "collections", "colorsys", "contextlib", "copy", "csv", "dataclasses", "datetime",
    "decimal", "difflib", "enum", "fnmatch", "fractions", "functools", "glob", "graphlib",
    "gzip", "hashlib", "heapq", "hmac", "html", "html.parser", "io", "ipaddress",
    "itertools", "json", "keyword", "math", "numbers", "operator", "os", "os.path",
    "pathlib", "pprint", "random", "re", "secrets", "shlex", "shutil", "statistics",
    "string", "struct", "tarfile", "tempfile", "textwrap", "time", "tomllib", "typing",
    "unicodedata", "urllib.parse", "uuid", "xml.dom.minidom", "xml.etree.ElementTree",
    "zipfile", "zlib", "zoneinfo",
)


def preload(names: tuple) -> list:
    """Imports `names`, and returns those that loaded."""
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ImportError:
            pass
    return loaded


AVAILABLE = preload(STDLIB)


@dataclass
class PythonInput:
    """Input of `python`."""
    code: Annotated[str, "The Python 3 source to run, as a script. The value of a "
                         "last line that is an expression is printed, as in a REPL."]


class Capture:
    """A text stream that keeps the first MAX_OUTPUT characters written to
    it (by stdout and stderr both, in order) and counts the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def write(self, text: str) -> int:
        room = MAX_OUTPUT - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(len(text), room)
        self.dropped += max(0, len(text) - room)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n[... {self.dropped} more characters of output not shown]"
        return out


def compile_snippet(code: str) -> tuple:
    """The snippet as code objects: the script, and its last line when that
    is an expression (evaluated apart so its value can be echoed)."""
    try:
        tree = ast.parse(code, "<input>", "exec")
    except SyntaxError as e:
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        raise InvalidInput(f"the code does not parse ({where}): {e.msg}") from None
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), "<input>", "eval")
    return compile(tree, "<input>", "exec"), last


def outside_note(e: BaseException, cx: Context) -> str:
    """Why a file the snippet failed to open could not be reached, when it
    lies outside the directories the call was granted (inside the sandbox
    such a path simply does not exist)."""
    if not isinstance(e, OSError) or not isinstance(e.filename, str):
        return ""
    try:
        cx.resolve(e.filename)
    except PermissionDenied as denied:
        return f"(Airlock: {denied})"
    return ""


@tool(
    name="python",
    description="Runs Python 3 code in a sandboxed interpreter.",
    prompt="Runs `code` with CPython 3 inside Airlock's sandbox and returns what it "
           "printed (stdout and stderr, in order, capped at 30,000 characters). The "
           "value of a last line that is an expression is printed, as in a REPL. "
           "Every call starts a fresh interpreter: keep state in files. The working "
           "directory is the agent's; files outside the directories the operator "
           "granted cannot be opened, and there is no network and no subprocess. "
           "These modules of the standard library can be imported, and no others: "
           + ", ".join(AVAILABLE) + ". "
           "An uncaught exception makes the call fail with its traceback.",
    workspace=Access.READ_WRITE,
    interrupt="cancel",
)
def python(input: PythonInput, cx: Context) -> Output:
    script, last = compile_snippet(input.code)
    capture = Capture()
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = capture
    failure = None
    try:
        exec(script, namespace)
        if last is not None:
            value = eval(last, namespace)
            if value is not None:
                print(repr(value))
    except SystemExit as e:
        if e.code not in (None, 0):
            failure = f"the code exited with status {e.code}"
    except BaseException as e:
        # The traceback from the snippet's own frames, as Python prints it.
        failure = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
        failure += outside_note(e, cx)
    finally:
        sys.stdout, sys.stderr = saved
    printed = capture.text()
    if failure is not None:
        raise Failed((printed.rstrip("\n") + "\n" if printed else "") + failure.rstrip())
    return Output.text(printed if printed else "(no output)")


Tool = export(python)
