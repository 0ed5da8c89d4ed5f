"""FastMCP's client of MCP's Skills extension (SEP-2640) against `airlock
mcp` over stdio, in its default `auto` mode: the extension is advertised,
`list_skills` lists the skill, `read_skill` reads every file and checks it
against its digest, and the files are the ones on disk; a missing skill is
an MCP error.

Usage: skills_client.py BINARY WORKSPACE SKILL_DIR (the environment names
HOME and XDG_DATA_HOME for the server)."""

import asyncio
import hashlib
import os
import pathlib
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.skills import SkillsClientExtension
from mcp import MCPError

binary, workspace, skill_dir = sys.argv[1:4]


async def main():
    transport = StdioTransport(
        binary, ["--workspace", workspace, "mcp"], env=dict(os.environ), keep_alive=False
    )
    client = Client(
        transport, extensions=[SkillsClientExtension()], timeout=120, init_timeout=180
    )
    async with client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        extensions = client.server_capabilities.extensions
        assert extensions["io.modelcontextprotocol/skills"] == {"directoryRead": True}, extensions
        skills = await client.list_skills()
        uris = sorted(s.uri for s in skills)
        assert uris == ["skill://pdf-forms/SKILL.md", "skill://release-notes/SKILL.md"], uris
        pdf = next(s for s in skills if s.uri == "skill://pdf-forms/SKILL.md")
        assert pdf.frontmatter.root["license"] == "MIT", pdf.frontmatter
        read = await client.read_skill("skill://pdf-forms/SKILL.md")
        on_disk = {
            str(p.relative_to(skill_dir)): p.read_bytes()
            for p in pathlib.Path(skill_dir).rglob("*")
            if p.is_file()
        }
        assert sorted(read.files) == sorted(on_disk), (sorted(read.files), sorted(on_disk))
        for path, data in read.files.items():
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            assert data == on_disk[path], path
            assert read.manifest.files[path].digest == digest, path
        try:
            await client.get_skill("skill://nope/SKILL.md")
            raise AssertionError("a missing skill was served")
        except MCPError as e:
            assert "skill://nope" in str(e), e
        print(f"fastmcp read {len(read.files)} files of pdf-forms, digests matching")


asyncio.run(main())
