"""Market API benchmark (issue 4, item 5): purchases per second and latency at 32 concurrent clients.

Run with ``make bench-market`` (``.venv/bin/python -m benchmarks.bench_market``). A real market API
process (uvicorn, on PostgreSQL by default or SQLite) serves ``POST /v1/purchases`` on loopback; the
load generator (asyncio, plain HTTP/1.1 keep-alive sockets, in this process, on the same cores)
keeps 32 purchases in flight, each by a different funded client with its own token and
Idempotency-Key. The run is bounded in count (``--purchases``) and time (``--seconds``). Afterwards the ledger is checked: every transaction
sums to zero, every balance equals its entries, and the round's pool holds exactly purchases × price.
Writes ``out/bench/market.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.launcher import Stack, exit_on_sigterm
from mots.platform.money import to_micros
from mots.platform.schemas import OpenRoundPayload
from services.market import ledger, rounds
from services.market.auth import hash_token, new_token
from services.market.migrations import upgrade
from services.market.models import Client

PRICE = Decimal("1.250000")
OPERATOR = {"Authorization": "Bearer dev-operator-token"}
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def _pg_database() -> tuple[str, str]:
    import psycopg

    name = f"mots_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


def _drop_pg(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def prepare(url: str, n_clients: int) -> list[str]:
    """Migrate, create ``n_clients`` funded clients (exactly one price each) and open round 1."""
    upgrade(url)
    sessions = make_sessionmaker(make_engine(url))
    tokens = [new_token() for _ in range(n_clients)]
    with sessions() as s, s.begin():
        clients = [
            Client(
                name=f"b{i}",
                type_name="buyers",
                data_size=100,
                cost_micros=0,
                token_hash=hash_token(t),
            )
            for i, t in enumerate(tokens)
        ]
        s.add_all(clients)
        s.flush()
        external = ledger.ensure_account(s, ledger.EXTERNAL)
        for c in clients:
            wallet = ledger.ensure_account(s, ledger.wallet_name(c.id), c.id)
            ledger.transfer(s, "deposit", external, wallet, to_micros(PRICE), client_id=c.id)
        rounds.open_round(
            s,
            OpenRoundPayload(
                round_id=1,
                mechanism="swan_robust",
                price=PRICE,
                rewards={"buyers": Decimal(0)},
                target_participants={"buyers": 0},
                target_buyers={"buyers": n_clients},
                epsilon=0.6,
                welfare=0.0,
                incentive_cost=Decimal(0),
            ),
        )
    return tokens


def _request(host: str, token: str) -> bytes:
    """One ``POST /v1/purchases`` as HTTP/1.1 bytes (keep-alive), built before the clock starts."""
    body = b'{"round_id":1}'
    return (
        f"POST /v1/purchases HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nIdempotency-Key: bench-{token[-16:]}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> int:
    """Send one request on a kept-alive connection and read its whole response; the status."""
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return int(head[9:12])


async def load(url: str, tokens: list[str], concurrency: int, seconds: float) -> dict[str, Any]:
    """Keep ``concurrency`` purchases in flight until the tokens or the time run out.

    Each of the ``concurrency`` connections is a plain HTTP/1.1 keep-alive socket writing
    pre-built request bytes: the generator shares the API's cores, so it must cost little CPU per
    request (httpx costs about as much as the purchase itself). A dropped connection is reopened
    and the request resent under its Idempotency-Key, so it is never booked twice.
    """
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or 80
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for t in tokens:
        queue.put_nowait(_request(f"{host}:{port}", t))
    latencies: list[float] = []
    codes: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline:
                try:
                    req = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                start = time.perf_counter()
                try:
                    code = await _exchange(reader, writer, req)
                except (asyncio.IncompleteReadError, ConnectionError):
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    code = await _exchange(reader, writer, req)
                latencies.append(time.perf_counter() - start)
                codes[code] = codes.get(code, 0) + 1
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    latencies.sort()

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    return {
        "requests": len(latencies),
        "status_codes": codes,
        "seconds": wall,
        "purchases_per_second": codes.get(201, 0) / wall,
        "p50_ms": q(0.50),
        "p95_ms": q(0.95),
        "p99_ms": q(0.99),
        "mean_ms": statistics.fmean(latencies) * 1000,
    }


def batch_stats(exposition: str) -> dict[str, dict[str, float]]:
    """Mean batch size and duration per batcher, from the API's ``/metrics`` (one process)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name in ("mots_batch_size", "mots_batch_duration_seconds"):
            for sample in family.samples:
                if sample.name.endswith(("_sum", "_count")):
                    key = (sample.labels["batcher"], sample.name)
                    sums[key] = sums.get(key, 0.0) + sample.value
    out: dict[str, dict[str, float]] = {}
    for (batcher, name), value in sums.items():
        if name == "mots_batch_size_count":
            n = max(value, 1.0)
            out[batcher] = {
                "batches": value,
                "mean_size": sums.get((batcher, "mots_batch_size_sum"), 0.0) / n,
                "mean_ms": 1000 * sums.get((batcher, "mots_batch_duration_seconds_sum"), 0.0) / n,
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--purchases", type=int, default=4000, help="purchases to make (bound on count)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="bound on the load's wall time")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--db", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--api-workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args()
    exit_on_sigterm()

    args.out.mkdir(parents=True, exist_ok=True)
    workdir = args.out / "market-run"
    pg_name = None
    if args.db == "postgresql":
        pg_name, url = _pg_database()
    else:
        shutil.rmtree(
            workdir, ignore_errors=True
        )  # a stale -wal/-shm beside a new file corrupts it
        workdir.mkdir(parents=True)
        url = f"sqlite:///{(workdir / 'market.db').resolve()}"
    stack = Stack(
        workdir=workdir, database_urls={"market": url}, api_workers={"market": args.api_workers}
    )
    try:
        tokens = prepare(url, args.purchases)
        stack.start(services=("market",), timeout_s=120)
        base = stack.url("market")
        warm = asyncio.run(load(base, tokens[:200], args.concurrency, args.seconds))
        result = asyncio.run(load(base, tokens[200:], args.concurrency, args.seconds))
        with httpx.Client(base_url=base, timeout=120) as http:
            check = http.get("/v1/ledger/check", headers=OPERATOR).json()
            batching = batch_stats(http.get("/metrics").text)
        booked = warm["status_codes"].get(201, 0) + result["status_codes"].get(201, 0)
        pool = Decimal(check["accounts"]["round_pools"])
        balanced = (
            check["unbalanced_transactions"] == 0
            and check["mismatched_accounts"] == 0
            and Decimal(check["total"]) == 0
            and pool == PRICE * booked
        )
        report = {
            "db": args.db,
            "api_workers": args.api_workers,
            "concurrency": args.concurrency,
            "warmup_requests": warm["requests"],
            **result,
            "batching": batching,
            "ledger": {**check, "pool_expected": str(PRICE * booked), "balanced_exactly": balanced},
            "targets": {"purchases_per_second": 1000, "p99_ms": 50},
        }
        (args.out / f"market-{args.db}.json").write_text(json.dumps(report, indent=2))
        print(
            f"market API on {args.db} ({args.api_workers} worker(s)), {args.concurrency} concurrent clients: "
            f"{result['purchases_per_second']:.0f} purchases/s over {result['requests']} requests, "
            f"p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms; "
            f"status {result['status_codes']}"
        )
        print(
            f"ledger: {check['transactions']} transactions, pool {pool} = {booked} × {PRICE}: "
            f"{'balanced exactly' if balanced else 'NOT BALANCED'}"
        )
        for name, b in batching.items():
            print(
                f"batcher {name}: {b['batches']:.0f} batches, mean size {b['mean_size']:.1f}, "
                f"mean {b['mean_ms']:.1f} ms per batch"
            )
        print("targets: ≥ 1000 purchases/s, p99 ≤ 50 ms")
        if not balanced:
            raise SystemExit(1)
    finally:
        stack.stop()
        if pg_name:
            _drop_pg(pg_name)


if __name__ == "__main__":
    main()
