"""HTTP/1.1 over a kept-alive raw socket: the benchmarks' load generator, lighter than an HTTP
client so that the service, not the generator, is what the 2 shared cores measure."""

from __future__ import annotations

import asyncio


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes
) -> tuple[int, bytes]:
    """Send one pre-built request on a kept-alive connection; the response's status and body."""
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return int(head[9:12]), body
