"""The Python MCP SDK against `airlock mcp --http` with [auth]: a bearer
token gets a session and calls; without one, or with one for another
audience, the SDK is refused, and the 401 carries the challenge that names
the protected resource metadata, which is served.

Arguments: BINARY (unused: the test started the server) URL TOKEN
WRONG_AUDIENCE_TOKEN FILE.
"""

import json
import sys
import urllib.error
import urllib.request

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def session_with(url: str, token: str | None, file: str) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    client = create_mcp_http_client(headers=headers)
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30.0) as session:
                await session.initialize()
                tools = await session.list_tools()
                assert any(t.name == "read" for t in tools.tools), tools
                r = await session.call_tool("read", {"file_path": file})
                assert not r.is_error, r
                return r.content[0].text


def refused(url: str, token: str | None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        url, data=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=headers
    )
    try:
        urllib.request.urlopen(request)
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("WWW-Authenticate", "")
    raise AssertionError("served without a valid token")


async def main(url: str, token: str, wrong: str, file: str) -> None:
    text = await session_with(url, token, file)
    assert "one" in text, text
    print("bearer token: served")
    for name, bad in [("no token", None), ("another audience", wrong)]:
        failed = False
        try:
            with anyio.fail_after(30):
                await session_with(url, bad, file)
        except Exception:  # the SDK's error for a 401 (no OAuth provider given)
            failed = True
        assert failed, f"{name}: the SDK was served"
        status, challenge = refused(url, bad)
        assert status == 401, (name, status)
        assert 'resource_metadata="' in challenge, challenge
        if bad:
            assert 'error="invalid_token"' in challenge, challenge
        print(f"{name}: 401")
    metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
    path = metadata_url.split("://", 1)[1].split("/", 1)[1]
    served = url.rsplit("/mcp", 1)[0] + "/" + path
    with urllib.request.urlopen(served) as response:
        metadata = json.load(response)
    assert metadata["authorization_servers"], metadata
    print("metadata: served")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[2:6])
