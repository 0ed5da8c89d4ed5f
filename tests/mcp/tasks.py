"""Tasks (MCP 2025-11-25) driven through the official Python `mcp` SDK's
typed requests and read back through its own models, over stdio and
Streamable HTTP: the `tasks` capability and each tool's
`execution.taskSupport`; a call run as a task answered at once, polled,
listed and its result fetched (tied to the task); a long one cancelled,
which stops it; an unknown task, an ended task's cancel, and another
session's task are -32602; a plain call is answered as before.

Usage: python3 tests/mcp/tasks.py AIRLOCK WORKSPACE
"""

import sys
import time

import anyio
import mcp.types as types
from http_client import serve
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

INVALID_PARAMS = -32602
RELATED_TASK = "io.modelcontextprotocol/related-task"


async def as_task(
    session: ClientSession, name: str, arguments: dict, ttl: int
) -> types.CreateTaskResult:
    """Calls `name` as a task. The SDK reads any `tools/call` reply as a
    CallToolResult (its task types are types-only), so this request, built
    from its types, goes out through its dispatcher, and the reply is read
    as its CreateTaskResult."""
    params = types.CallToolRequestParams(
        name=name, arguments=arguments, task=types.TaskMetadata(ttl=ttl)
    )
    data = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    raw = await session._dispatcher.send_raw_request("tools/call", data, {"timeout": 30.0})
    return types.CreateTaskResult.model_validate(raw)


async def get(session: ClientSession, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await session.send_request(request, types.GetTaskResult)


async def result(session: ClientSession, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(
        params=types.GetTaskPayloadRequestParams(task_id=task_id)
    )
    return await session.send_request(request, types.CallToolResult)


async def cancel(session: ClientSession, task_id: str) -> types.CancelTaskResult:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await session.send_request(request, types.CancelTaskResult)


async def listed(session: ClientSession) -> list:
    request = types.ListTasksRequest(params=types.PaginatedRequestParams())
    page = await session.send_request(request, types.ListTasksResult)
    assert page.next_cursor is None, page
    return [t.task_id for t in page.tasks]


async def refused(attempt) -> str:
    try:
        await attempt
    except MCPError as e:
        assert e.error.code == INVALID_PARAMS, e.error
        return e.error.message
    raise AssertionError("not refused")


async def exercise(connect, workspace: str, meanwhile=None) -> None:
    """`meanwhile(task_id)`, if given, runs while this session is open and
    holds the task."""
    async with connect() as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60.0) as session:
            init = await session.initialize()
            tasks = init.capabilities.tasks
            assert tasks is not None and tasks.list is not None, init.capabilities
            assert tasks.cancel is not None and tasks.requests.tools.call is not None, tasks

            tools = (await session.list_tools()).tools
            assert tools and all(t.execution.task_support == "optional" for t in tools), tools

            plain = await session.call_tool("sleep", {"ms": 0})
            assert not plain.is_error and plain.content[0].text == "Slept 0 ms.", plain
            assert plain.meta is None, plain

            # Long enough that a loaded machine still polls it working.
            started = time.monotonic()
            created = await as_task(session, "sleep", {"ms": 1500}, 60_000)
            task = created.task
            assert task.status == "working" and task.ttl == 60_000, task
            assert task.created_at and task.last_updated_at and task.poll_interval, task
            polled = await get(session, task.task_id)
            assert polled.task_id == task.task_id and polled.status == "working", polled
            assert await listed(session) == [task.task_id]
            done = await result(session, task.task_id)
            assert time.monotonic() - started >= 1.5, "tasks/result waited for the call"
            assert not done.is_error and done.content[0].text == "Slept 1500 ms.", done
            assert done.meta[RELATED_TASK] == {"taskId": task.task_id}, done.meta
            assert (await get(session, task.task_id)).status == "completed"
            message = await refused(cancel(session, task.task_id))
            assert "completed" in message, message
            if meanwhile is not None:
                await meanwhile(task.task_id)
            assert await listed(session) == [task.task_id], "still this session's"

            # A long call cancelled: the exclusive `write` after it runs only
            # once nothing runs, so its finishing fast proves it was stopped.
            long = await as_task(session, "sleep", {"ms": 60_000}, 600_000)
            await anyio.sleep(0.3)
            cancelled = await cancel(session, long.task.task_id)
            assert cancelled.status == "cancelled", cancelled
            with anyio.fail_after(10):
                wrote = await session.call_tool(
                    "write", {"file_path": f"{workspace}/after.txt", "content": "x"}
                )
            assert not wrote.is_error, wrote
            assert (await get(session, long.task.task_id)).status == "cancelled"
            try:
                await result(session, long.task.task_id)
                raise AssertionError("a cancelled task has no result")
            except MCPError as e:
                assert "cancelled" in e.error.message, e.error

            unknown = "0123456789abcdef0123456789abcdef"
            await refused(get(session, unknown))
            await refused(result(session, unknown))
            await refused(cancel(session, unknown))


async def another_session_sees_none(connect, task_id: str) -> None:
    async with connect() as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30.0) as session:
            await session.initialize()
            assert await listed(session) == []
            await refused(get(session, task_id))
            await refused(result(session, task_id))
            await refused(cancel(session, task_id))


async def main(binary: str, workspace: str) -> None:
    args = ["--workspace", workspace, "--mode", "acceptEdits"]
    stdio = lambda: stdio_client(StdioServerParameters(command=binary, args=[*args, "mcp"]))
    await exercise(stdio, workspace)
    with serve(binary, *args) as url:
        http = lambda: streamable_http_client(url)
        await exercise(http, workspace, lambda task_id: another_session_sees_none(http, task_id))
    print("ok: tasks over stdio and http")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
