"""Write an Airlock tool in Python.

A tool is a function decorated with :func:`tool`: its first parameter's
type (a dataclass or a ``TypedDict``) is the input, and the JSON Schema the
model sees is derived from its type hints; the decorator's arguments are
the descriptor (name, prompt, safety flags, what the tool asks for).
:func:`export` turns it into the ``Tool`` class componentize-py exports as
the ``airlock:tool`` world::

    @tool(name="shout", description="Returns the text in capitals.",
          flags=Flags.READ_ONLY | Flags.CONCURRENCY_SAFE)
    def shout(input: ShoutInput, cx: Context) -> Output:
        return Output.text(input.text.upper())

    Tool = export(shout)

The same concepts and names as the Rust SDK (``airlock-sdk``). The SDK never
decides what a tool may touch: the host mounts what the operator granted,
within what the tool asked for; :meth:`Context.resolve` only explains what
WASI would refuse anyway.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import json
import os
import typing
from types import UnionType
from typing import Any, Callable, Optional

__all__ = [
    "Access", "Cancelled", "Conflict", "Context", "Failed", "Flags", "InvalidInput",
    "LogLevel", "Mount", "NotFound", "Output", "PermissionDenied", "Timeout", "ToolError",
    "ToolDef", "export", "schema_of", "tool",
]

#: What ``max_result_size`` is unless a tool says otherwise (as in Rust).
DEFAULT_MAX_RESULT_SIZE = 50_000


class Flags(enum.Flag):
    """A tool's safety flags. The host enforces them: a read-only or
    concurrency-safe call gets read-only handles."""

    READ_ONLY = enum.auto()
    CONCURRENCY_SAFE = enum.auto()
    DESTRUCTIVE = enum.auto()
    IDEMPOTENT = enum.auto()
    OPEN_WORLD = enum.auto()
    SEARCH_OR_READ = enum.auto()
    REQUIRES_USER_INTERACTION = enum.auto()
    CANCELS_SIBLINGS_ON_ERROR = enum.auto()


class Access(enum.Enum):
    """The access to the agent's workspace a tool asks for."""

    NONE = "none"
    READ = "read"
    READ_WRITE = "read-write"


class LogLevel(enum.Enum):
    """The level of a log line."""

    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class ToolError(Exception):
    """A failed call. Write the message for the model: what was wrong and
    what to do. Raise a subclass; each becomes a stable error class."""

    kind = "failed"


class InvalidInput(ToolError):
    """The input is wrong; the message says what to change."""

    kind = "invalid-input"


class NotFound(ToolError):
    """What the input refers to does not exist."""

    kind = "not-found"


class PermissionDenied(ToolError):
    """The tool may not do this."""

    kind = "permission-denied"


class Conflict(ToolError):
    """The world changed under the call."""

    kind = "conflict"


class Cancelled(ToolError):
    """The call noticed it was cancelled and stopped."""

    kind = "cancelled"


class Timeout(ToolError):
    """An operation inside the call timed out."""

    kind = "timeout"


class Failed(ToolError):
    """Anything else."""

    kind = "failed"


@dataclasses.dataclass(frozen=True)
class Mount:
    """A directory a call can reach, by its path inside the sandbox."""

    path: str
    writable: bool


class Output:
    """A successful result: what the model sees, and changes to the agent's
    context (applied only from calls that ran exclusively, except
    ``record_file_read``)."""

    def __init__(self) -> None:
        self.content: list[tuple[str, str]] = []
        self.structured: Optional[Any] = None
        self.changes: list[tuple[str, Any]] = []

    @staticmethod
    def text(text: str) -> "Output":
        """A result of one text block."""
        return Output().and_text(text)

    @staticmethod
    def json(value: Any) -> "Output":
        """A result of one JSON block."""
        out = Output()
        out.content.append(("json", json.dumps(value)))
        return out

    def and_text(self, text: str) -> "Output":
        """Adds a text block."""
        self.content.append(("text", text))
        return self

    def with_structured(self, value: Any) -> "Output":
        """Structured output; it must hold the whole result, and match the
        tool's output schema (derived from the function's return type, or
        ``output_schema=``): a call that returns it without one fails,
        saying so, rather than have it dropped."""
        self.structured = value
        return self

    def set_cwd(self, path: str) -> "Output":
        """The agent's next calls run in ``path``."""
        self.changes.append(("set-cwd", path))
        return self

    def set_env(self, name: str, value: str) -> "Output":
        """Sets an environment variable in the agent's context."""
        self.changes.append(("set-env", (name, value)))
        return self

    def unset_env(self, name: str) -> "Output":
        """Removes an environment variable from the agent's context."""
        self.changes.append(("unset-env", name))
        return self

    def set_state(self, key: str, value: str) -> "Output":
        """Keeps ``value`` for this tool's next calls (``Context.state``)."""
        self.changes.append(("set-state", (key, value)))
        return self

    def record_file_read(self, path: str) -> "Output":
        """Says the model has now seen the file at ``path``."""
        self.changes.append(("record-file-read", path))
        return self


class Context:
    """What a call knows about the agent it serves."""

    def __init__(self, cwd: str, tool_use_id: str, agent_id: Optional[str],
                 mounts: list[Mount], state: dict[str, str]) -> None:
        self.cwd = cwd
        self.tool_use_id = tool_use_id
        self.agent_id = agent_id
        self.mounts = mounts
        self.state = state

    def resolve(self, path: str) -> str:
        """``path`` (absolute, or relative to the cwd) normalised, inside a
        mount; :class:`PermissionDenied` naming the reachable directories
        when it is outside them all."""
        joined = os.path.normpath(os.path.join(self.cwd, path))
        if self._mount_of(joined) is None:
            reachable = ", ".join(m.path for m in self.mounts) or "none"
            raise PermissionDenied(
                f"{path} is outside the directories this tool can reach ({reachable})")
        return joined

    def resolve_writable(self, path: str) -> str:
        """As :meth:`resolve`, and the mount must be writable in this call."""
        joined = self.resolve(path)
        mount = self._mount_of(joined)
        if mount is not None and not mount.writable:
            raise PermissionDenied(f"{path} is read-only in this call ({mount.path})")
        return joined

    def _mount_of(self, path: str) -> Optional[Mount]:
        inside = [m for m in self.mounts
                  if path == m.path or path.startswith(m.path.rstrip("/") + "/")]
        return max(inside, key=lambda m: len(m.path), default=None)

    def progress(self, message: str, fraction: Optional[float] = None) -> None:
        """Reports progress to the agent's front end."""
        from wit_world.imports import host
        host.progress(message, fraction)

    def log(self, level: LogLevel, message: str) -> None:
        """A log line, sanitised by the host."""
        from wit_world.imports import host
        host.log(host.LogLevel[level.name], message)

    def cancelled(self) -> bool:
        """Whether the call was cancelled."""
        from wit_world.imports import host
        return host.cancelled()


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _unwrap(tp: Any) -> tuple[Any, Optional[str], bool]:
    """``tp`` without ``Annotated`` and ``Optional``: the type inside, the
    description ``Annotated`` gave it, and whether ``None`` is allowed."""
    description = None
    if typing.get_origin(tp) is typing.Annotated:
        tp, *extras = typing.get_args(tp)
        description = next((e for e in extras if isinstance(e, str)), None)
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), description, True
    return tp, description, False


def _describe_type(tp: Any) -> tuple[dict, bool]:
    """A type hint's JSON Schema, and whether a value may be left out."""
    tp, description, optional = _unwrap(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _JSON_TYPES:
        schema: dict = {"type": _JSON_TYPES[tp]}
    elif origin is typing.Literal:
        schema = {"enum": list(args)}
    elif origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        item = args[0] if args else Any
        schema = {"type": "array"}
        if item is not Any:
            schema["items"] = _describe_type(item)[0]
    elif origin is dict or tp is dict:
        schema = {"type": "object"}
    elif dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
        schema = schema_of(tp)
    elif tp is Any:
        schema = {}
    else:
        raise TypeError(f"{tp!r} has no JSON Schema: use str, int, float, bool, "
                        "list, dict, Literal, Optional, a dataclass or a TypedDict")
    if description:
        schema["description"] = description
    return schema, optional


def schema_of(cls: type) -> dict:
    """The JSON Schema of a dataclass or ``TypedDict``: a field is required
    unless it is ``Optional`` or has a default; ``Annotated[T, "text"]``
    describes it for the model; unknown fields are refused."""
    hints = typing.get_type_hints(cls, include_extras=True)
    defaults = set()
    if dataclasses.is_dataclass(cls):
        defaults = {f.name for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING
                    or f.default_factory is not dataclasses.MISSING}
    elif typing.is_typeddict(cls):
        defaults = set(getattr(cls, "__optional_keys__", ()))
    else:
        raise TypeError(f"{cls!r}: the input must be a dataclass or a TypedDict")
    properties, required = {}, []
    for name, tp in hints.items():
        schema, optional = _describe_type(tp)
        properties[name] = schema
        if not optional and name not in defaults:
            required.append(name)
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
        schema["description"] = " ".join(cls.__doc__.split())
    return schema


def _build(tp: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as an instance of ``tp``."""
    tp = _unwrap(tp)[0]
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp, include_extras=True)
        return tp(**{k: _build(hints[k], v) for k, v in value.items() if k in hints})
    if typing.get_origin(tp) is list and isinstance(value, list) and args:
        return [_build(args[0], v) for v in value]
    return value


class ToolDef:
    """A tool: its function, input type and descriptor, made by
    :func:`tool`. ``@t.validate`` and ``@t.classify`` add the optional
    checks the host runs before a call."""

    def __init__(self, fn: Callable, input_type: type, descriptor: dict) -> None:
        self.fn = fn
        self.input_type = input_type
        self.descriptor = descriptor
        self.validator: Optional[Callable] = None
        self.classifier: Optional[Callable] = None

    def validate(self, fn: Callable) -> Callable:
        """``fn(input, cx)`` returns an error message for the model, or
        ``None``. Runs before the call is allowed, with no filesystem."""
        self.validator = fn
        return fn

    def classify(self, fn: Callable) -> Callable:
        """``fn(input)`` returns the :class:`Flags` of this input, or
        ``None`` for the descriptor's. Runs with no filesystem."""
        self.classifier = fn
        return fn

    def __call__(self, input: Any, cx: Context) -> Output:
        return self.fn(input, cx)


def tool(*, name: str, description: str, prompt: Optional[str] = None,
         title: Optional[str] = None, flags: Flags = Flags(0),
         workspace: Access = Access.NONE, network: tuple = (), env: tuple = (),
         interrupt: str = "cancel", version: str = "0.1.0", aliases: tuple = (),
         max_result_size: int = DEFAULT_MAX_RESULT_SIZE,
         output_schema: Optional[dict] = None) -> Callable[[Callable], ToolDef]:
    """Declares a tool. ``flags`` are honest claims the host enforces;
    ``workspace``, ``network`` (host patterns) and ``env`` (variable names)
    are what it asks for, and the operator decides what it gets.
    ``interrupt`` is ``"cancel"`` (stopped at once) or ``"block"``. A
    function whose return type is a dataclass or a ``TypedDict`` returns
    structured output: its schema is the tool's output schema (unless
    ``output_schema`` is given), and what it returns is sent both as that
    structured output and as its JSON text."""
    if interrupt not in ("cancel", "block"):
        raise ValueError("interrupt is 'cancel' or 'block'")

    def wrap(fn: Callable) -> ToolDef:
        hints = typing.get_type_hints(fn, include_extras=True)
        params = [p for p in fn.__code__.co_varnames[:fn.__code__.co_argcount]]
        if not params or params[0] not in hints:
            raise TypeError(f"{fn.__name__}: annotate the input parameter with its type")
        input_type = hints[params[0]]
        returns = hints.get("return")
        schema = output_schema
        if schema is None and _is_record(returns):
            schema = schema_of(returns)
        descriptor = {
            "name": name, "aliases": list(aliases), "title": title or name,
            "description": description, "prompt": prompt or description,
            "input_schema": schema_of(input_type), "output_schema": schema,
            "flags": flags, "interrupt": interrupt, "max_result_size": max_result_size,
            "workspace": workspace, "network": list(network), "env": list(env),
            "version": version,
        }
        return ToolDef(fn, input_type, descriptor)

    return wrap


def _is_record(tp: Any) -> bool:
    """Whether ``tp`` is a dataclass or a ``TypedDict`` (a type, not an
    instance)."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or typing.is_typeddict(tp))


def _as_output(t: ToolDef, out: Any) -> Output:
    """What ``t``'s function returned, as an :class:`Output`: a string as
    one text block; a dataclass or a dict (a ``TypedDict``) as structured
    output and its JSON text. Structured output without an output schema is
    refused (MCP would drop it): :class:`Failed`, saying how to declare
    one."""
    if isinstance(out, str):
        return Output.text(out)
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        out = dataclasses.asdict(out)
    if isinstance(out, dict):
        # An optional field left at None is left out: the schema derived
        # from the type says its type, not null, and does not require it.
        required = set((t.descriptor["output_schema"] or {}).get("required", ()))
        out = {k: v for k, v in out.items() if v is not None or k in required}
        out = Output.text(json.dumps(out)).with_structured(out)
    if not isinstance(out, Output):
        raise Failed(f"{t.descriptor['name']} returned a {type(out).__name__}; return an "
                     "Output, a string, or a dataclass or TypedDict (structured output)")
    if out.structured is not None and t.descriptor["output_schema"] is None:
        raise Failed(f"{t.descriptor['name']} returned structured output but declares no "
                     "output schema: annotate its function's return type with a dataclass "
                     "or TypedDict, or pass output_schema= to @tool")
    return out


def _wit_flags(types: Any, flags: Flags) -> Any:
    out = types.SafetyFlags(0)
    for flag in Flags:
        if flag in flags:
            out |= types.SafetyFlags[flag.name]
    return out


def _error(types: Any, e: BaseException) -> Any:
    """An exception as the WIT ``tool-error`` a call returns."""
    from componentize_py_types import Err
    if isinstance(e, ToolError):
        variant = {
            "invalid-input": types.ToolError_InvalidInput, "not-found": types.ToolError_NotFound,
            "permission-denied": types.ToolError_PermissionDenied,
            "conflict": types.ToolError_Conflict, "cancelled": types.ToolError_Cancelled,
            "timeout": types.ToolError_Timeout,
        }.get(e.kind, types.ToolError_Failed)
        return Err(variant(str(e)))
    if isinstance(e, OSError) and e.errno is not None:
        message = f"{e.filename}: {e.strerror}" if e.filename else str(e.strerror)
        if isinstance(e, FileNotFoundError):
            return Err(types.ToolError_NotFound(message))
        code = errno.errorcode.get(e.errno, "EIO")
        return Err(types.ToolError_Io(types.IoError(code=code, message=message)))
    return Err(types.ToolError_Failed(f"{type(e).__name__}: {e}"))


def _import_reachable(module_name: str) -> None:
    """Imports every module the source of ``module_name`` can reach.

    componentize-py snapshots the interpreter once the app is imported, and
    a module not imported by then is not in the component: code that
    imports one lazily (``Counter.most_common`` imports ``heapq`` in its
    body) failed with ``ModuleNotFoundError`` at its first call.
    ``modulefinder`` follows the imports of the app's files and of the
    modules they import, function bodies included; each is imported now, so
    it is in the snapshot. One that does not load here (a module for
    another system) is left out: the code would fail on it anyway."""
    import importlib
    import modulefinder
    import sys

    path = getattr(sys.modules.get(module_name), "__file__", None)
    if not path:
        return
    finder = modulefinder.ModuleFinder()
    try:
        finder.run_script(path)
    except Exception:  # noqa: BLE001 - a scan that fails leaves the build as it was
        return
    for name in sorted(finder.modules):
        if name == "__main__" or name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - what cannot load here stays out
            pass


def export(t: ToolDef) -> type:
    """The ``Tool`` class componentize-py exports for ``t``: assign it to
    ``Tool`` in the app module (``Tool = export(my_tool)``). Every module
    the app's code can reach is imported first, so that the component has
    it (:func:`_import_reachable`)."""
    _import_reachable(t.fn.__module__)
    from componentize_py_types import Err
    from wit_world import exports
    from wit_world.imports import types

    def context(cx: Any) -> Context:
        return Context(cx.cwd, cx.tool_use_id, cx.agent_id,
                       [Mount(m.path, m.writable) for m in cx.mounts],
                       {s.key: s.value for s in cx.state})

    def parse(input: str) -> Any:
        try:
            return _build(t.input_type, json.loads(input))
        except (TypeError, ValueError) as e:
            raise Err(types.ToolError_InvalidInput(f"the input does not fit: {e}"))

    class Tool(exports.Tool):
        def describe(self) -> Any:
            d = t.descriptor
            preflight = types.PreflightExports(0)
            if t.validator:
                preflight |= types.PreflightExports.VALIDATE
            if t.classifier:
                preflight |= types.PreflightExports.CLASSIFY
            return types.Descriptor(
                name=d["name"], aliases=d["aliases"], title=d["title"],
                description=d["description"], prompt=d["prompt"],
                input_schema=json.dumps(d["input_schema"]),
                output_schema=None if d["output_schema"] is None
                else json.dumps(d["output_schema"]),
                safety=_wit_flags(types, d["flags"]),
                interrupt=types.InterruptBehavior[d["interrupt"].upper()],
                preflight=preflight, defer_loading=False,
                max_result_size=d["max_result_size"],
                capabilities=types.Capabilities(
                    workspace=types.WorkspaceAccess[d["workspace"].name],
                    network_hosts=d["network"], env_vars=d["env"]),
                version=d["version"])

        def classify(self, input: str) -> Any:
            if not t.classifier:
                return None
            flags = t.classifier(parse(input))
            return None if flags is None else _wit_flags(types, flags)

        def validate(self, input: str, cx: Any) -> None:
            if t.validator:
                message = t.validator(parse(input), context(cx))
                if message:
                    raise Err(message)

        def check_permissions(self, input: str, cx: Any) -> Any:
            return types.PermissionDecision_Passthrough()

        def call(self, input: str, cx: Any) -> Any:
            value = parse(input)
            here = context(cx)
            try:
                os.chdir(here.cwd)
            except OSError:
                pass
            try:
                if t.validator:
                    message = t.validator(value, here)
                    if message:
                        raise InvalidInput(message)
                out = _as_output(t, t.fn(value, here))
            except Err:
                raise
            except Exception as e:
                raise _error(types, e)
            return to_wit(types, out)

    return Tool


def to_wit(types: Any, out: Output) -> Any:
    """An :class:`Output` as the WIT ``tool-output``."""
    content = [types.ContentBlock_Text(v) if kind == "text" else types.ContentBlock_Json(v)
               for kind, v in out.content]
    changes = []
    for kind, v in out.changes:
        if kind == "set-cwd":
            changes.append(types.ContextChange_SetCwd(v))
        elif kind == "set-env":
            changes.append(types.ContextChange_SetEnv(types.EnvVar(name=v[0], value=v[1])))
        elif kind == "unset-env":
            changes.append(types.ContextChange_UnsetEnv(v))
        elif kind == "set-state":
            changes.append(types.ContextChange_SetState(types.StateEntry(key=v[0], value=v[1])))
        else:
            changes.append(types.ContextChange_RecordFileRead(v))
    structured = None if out.structured is None else json.dumps(out.structured)
    return types.ToolOutput(content=content, structured=structured, messages=[],
                            changes=changes, metadata=None)
