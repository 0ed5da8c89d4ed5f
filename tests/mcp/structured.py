"""Structured results over MCP, as a client that shows the model only
`structuredContent` (Claude Code) needs them: every bundled tool that
returns one lists an `outputSchema`, every `structuredContent` validates
against it and holds the whole result (the lines, paths and entries the text
shows), and a tool without an output schema sends none.

Usage: python3 tests/mcp/structured.py AIRLOCK WORKSPACE [IGNORED...]
  WORKSPACE holds a.txt ("hello mcp") and lines.txt (line k is "line-k",
  2000 lines).
"""

import sys

import anyio
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client

# What each bundled tool lists as its output schema: a document (read,
# fetch) comes back as text only.
WITH_SCHEMA = {"cd", "edit", "glob", "grep", "ls", "sleep", "write"}
WITHOUT_SCHEMA = {"read", "fetch"}

MORE = "(more "  # the start of grep's note that not everything is shown


async def main(binary: str, workspace: str) -> None:
    # A network grant, so that `fetch` is listed too.
    args = ["--workspace", workspace, "--allow-host", "localhost", "mcp"]
    server = StdioServerParameters(command=binary, args=args)
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30.0) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert WITH_SCHEMA | WITHOUT_SCHEMA <= set(tools), sorted(tools)
            for name in WITH_SCHEMA:
                schema = tools[name].output_schema
                assert schema and schema["type"] == "object", (name, schema)
                Draft202012Validator.check_schema(schema)
            for name in WITHOUT_SCHEMA:
                assert tools[name].output_schema is None, (name, tools[name].output_schema)

            async def call(name: str, arguments: dict) -> tuple[str, dict]:
                r = await session.call_tool(name, arguments)
                assert not r.is_error, (name, arguments, r.content)
                s = r.structured_content
                assert s is not None, f"{name} {arguments}: no structuredContent"
                errors = list(Draft202012Validator(tools[name].output_schema).iter_errors(s))
                assert not errors, (name, arguments, [e.message for e in errors], s)
                return r.content[0].text, s

            lines_txt = f"{workspace}/lines.txt"
            a_txt = f"{workspace}/a.txt"

            # grep, content: the lines shown are the lines in the text.
            text, s = await call("grep", {"pattern": "line-1", "output_mode": "content"})
            shown = [l for l in text.split("\n") if not l.startswith(MORE)]
            assert s["mode"] == "content" and s["lines"] == shown, (s, text[:300])
            assert len(shown) == 250 and shown[0] == f"{lines_txt}:1:line-1", shown[:3]
            assert s["truncated"] is True and s["applied_limit"] == 250, s
            assert MORE in text, text[-200:]

            text, s = await call(
                "grep",
                {"pattern": "^line-7$", "output_mode": "content", "-C": 1, "head_limit": 0},
            )
            expected = [f"{lines_txt}-6-line-6", f"{lines_txt}:7:line-7", f"{lines_txt}-8-line-8"]
            assert s["lines"] == expected and text.split("\n") == expected, (s, text)
            assert s["truncated"] is False and "applied_limit" not in s, s

            # grep, files: the paths in the text.
            text, s = await call("grep", {"pattern": "hello|line-2000"})
            assert text.split("\n")[0] == "Found 2 files", text
            assert sorted(s["filenames"]) == sorted([a_txt, lines_txt]), s
            assert text.split("\n")[1:] == s["filenames"], (text, s)

            # grep, count: each file with its count.
            text, s = await call("grep", {"pattern": "line-19", "output_mode": "count"})
            assert s["counts"] == [{"path": lines_txt, "count": 111}], s
            assert text.startswith(f"{lines_txt}:111\n"), text

            text, s = await call("grep", {"pattern": "nothing-matches-this"})
            assert s["filenames"] == [] and s["num_files"] == 0, s

            # glob: the file list.
            text, s = await call("glob", {"pattern": "*.txt"})
            assert sorted(s["filenames"]) == sorted([a_txt, lines_txt]), s
            assert text.split("\n") == s["filenames"], (text, s)
            assert s["num_files"] == 2 and s["truncated"] is False, s

            # ls: the entries, with their sizes.
            text, s = await call("ls", {})
            entries = {e["name"]: e for e in s["entries"]}
            assert set(entries) == {"a.txt", "lines.txt"}, s
            assert entries["a.txt"] == {"name": "a.txt", "type": "file", "size": 10}, entries
            for e in s["entries"]:
                assert f"  {e['name']} ({e['size']} bytes)" in text.split("\n"), (e, text)

            # cd and sleep: small, but whole.
            text, s = await call("cd", {"path": workspace})
            assert s == {"cwd": workspace} and workspace in text, (s, text)
            text, s = await call("sleep", {"ms": 1})
            assert s == {"slept_ms": 1}, s

            # A tool without an output schema sends no structuredContent.
            r = await session.call_tool("read", {"file_path": a_txt})
            assert not r.is_error and "hello mcp" in r.content[0].text, r
            assert r.structured_content is None, r.structured_content
    print("ok (structured)")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
