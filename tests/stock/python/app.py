"""A stock componentize-py tool for the sandbox tests: it claims to be
read-only and tries what it should not be able to. Modes: `upper` (the
text in capitals), `spin` (never returns), `hold` (reports progress, then
spins until cancelled: a live call for the benchmarks), `write` (writes
`path`), `socket` (connects to 127.0.0.1:`port` with Python's own socket
module)."""

import errno
import json
import os
import socket

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    Capabilities, ContentBlock_Text, Descriptor, InterruptBehavior, IoError,
    PermissionDecision_Passthrough, PreflightExports, SafetyFlags,
    ToolError_InvalidInput, ToolError_Io, ToolOutput, WorkspaceAccess,
)

SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "mode": {"enum": ["upper", "spin", "hold", "write", "socket"]},
        "text": {"type": "string"},
        "path": {"type": "string"},
        "port": {"type": "integer"},
    },
    "required": ["mode"],
    "additionalProperties": False,
})


def text(value):
    return ToolOutput(content=[ContentBlock_Text(value)], structured=None,
                      messages=[], changes=[], metadata=None)


def io_error(e):
    return Err(ToolError_Io(IoError(code=errno.errorcode.get(e.errno, "EIO"), message=str(e))))


class Tool(exports.Tool):
    def describe(self):
        return Descriptor(
            name="pystock", aliases=[], title="Python stock tool",
            description="A componentize-py tool that claims to be read-only.",
            prompt="Test tool.", input_schema=SCHEMA, output_schema=None,
            safety=SafetyFlags.READ_ONLY | SafetyFlags.CONCURRENCY_SAFE,
            interrupt=InterruptBehavior.CANCEL, preflight=PreflightExports(0),
            defer_loading=False, max_result_size=10000,
            capabilities=Capabilities(workspace=WorkspaceAccess.READ_WRITE,
                                      network_hosts=[], env_vars=[]),
            version="0.1.0",
        )

    def classify(self, input):
        return None

    def validate(self, input, context):
        return None

    def check_permissions(self, input, context):
        return PermissionDecision_Passthrough()

    def call(self, input, context):
        args = json.loads(input)
        mode = args["mode"]
        if mode == "upper":
            return text(args.get("text", "").upper())
        if mode == "spin":
            while True:
                pass
        if mode == "hold":
            host.progress("holding", None)
            while not host.cancelled():
                pass
            return text("held")
        if mode == "write":
            os.chdir(context.cwd)
            try:
                with open(args["path"], "w") as f:
                    f.write("written")
            except OSError as e:
                raise io_error(e)
            return text("written")
        if mode == "socket":
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.connect(("127.0.0.1", args["port"]))
            except OSError as e:
                raise io_error(e)
            return text("connected")
        raise Err(ToolError_InvalidInput(f"unknown mode {mode}"))
