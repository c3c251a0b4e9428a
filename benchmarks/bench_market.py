"""Market API benchmark (issue 4, item 5): purchases per second and latency at 32 concurrent clients.

Run with ``make bench-market`` (``.venv/bin/python -m benchmarks.bench_market``). A real market API
process (uvicorn, on PostgreSQL by default or SQLite) serves ``POST /v1/purchases`` on loopback; the
load generator (asyncio, plain HTTP/1.1 keep-alive sockets, in this process, on the same cores)
keeps 32 purchases in flight, each by a different funded client with its own token and
Idempotency-Key. Each run is bounded in count (``--purchases``) and time (``--seconds``).

Two runs on fresh databases, back to back: the baseline books each purchase in its own
transaction (``MOTS_PURCHASE_MAX_BATCH=1``), the platform's default books the purchases in flight
together (group commit); the ratio is printed. In each run the same load on ``GET /healthz``
measures the framework's floor on this machine at that moment (HTTP, routing, middleware, and
the load generator itself), so a reader can tell the purchase's own cost from the machine's pace. After each run the ledger is checked: every
transaction sums to zero, every balance equals its entries, and the round's pool holds exactly
purchases × price. Writes ``out/bench/market-<db>.json``; exits 1 if a ledger is off or a purchase
failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
import uuid
from collections.abc import Coroutine
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import uvloop

from benchmarks.raw_http import exchange
from mots.local.keys import process_secrets
from mots.local.launcher import Stack, exit_on_sigterm
from mots.platform.contracts import OpenRoundPayload
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.money import to_micros
from services.market import ledger, rounds
from services.market.auth import hash_token, issue_token, new_token
from services.market.core.config import Settings
from services.market.migrations import upgrade
from services.market.models import Client

PRICE = Decimal("1.250000")
WARMUP = 200
OPERATOR = {"Authorization": f"Bearer {process_secrets().operator_token}"}
"""This process's operator token (set in its environment: the market and Settings read it)."""
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
    settings = Settings(database_url=url)  # the token secret the market will verify with
    with sessions() as s, s.begin():
        clients = [
            Client(
                name=f"b{i}",
                type_name="buyers",
                data_size=100,
                cost_micros=0,
                token_hash=hash_token(new_token()),
            )
            for i in range(n_clients)
        ]
        s.add_all(clients)
        s.flush()
        tokens = [issue_token(c.id, settings)[0] for c in clients]
        for c, t in zip(clients, tokens, strict=True):
            c.token_hash = hash_token(t)
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


def _probe(host: str) -> bytes:
    """One ``GET /healthz`` (the app's cheapest route) as HTTP/1.1 bytes: the framework's floor."""
    return f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


async def load(
    url: str, tokens: list[str], concurrency: int, seconds: float, probe: bool = False
) -> dict[str, Any]:
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
        queue.put_nowait(_probe(f"{host}:{port}") if probe else _request(f"{host}:{port}", t))
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
                    code, _ = await exchange(reader, writer, req)
                except (asyncio.IncompleteReadError, ConnectionError):
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    code, _ = await exchange(reader, writer, req)
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
        "requests_per_second": len(latencies) / wall,
        "p50_ms": q(0.50),
        "p95_ms": q(0.95),
        "p99_ms": q(0.99),
        "mean_ms": statistics.fmean(latencies) * 1000,
    }


def _run(work: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """Run the load generator on uvloop (as uvicorn runs the API): it shares the API's cores,
    and on uvloop it costs about a fifth less CPU per request than on asyncio's own loop."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(work)


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


def run_market(
    db: str,
    purchases: int,
    concurrency: int,
    seconds: float,
    api_workers: int,
    max_batch: int,
    workdir: Path,
    writers: int | None = None,
) -> dict[str, Any]:
    """One market API on a fresh database under load; its figures and the ledger's check."""
    pg_name = None
    shutil.rmtree(workdir, ignore_errors=True)  # a stale -wal/-shm beside a new file corrupts it
    workdir.mkdir(parents=True)
    if db == "postgresql":
        pg_name, url = _pg_database()
    else:
        url = f"sqlite:///{(workdir / 'market.db').resolve()}"
    stack = Stack(
        workdir=workdir / "stack",
        database_urls={"market": url},
        api_workers={"market": api_workers},
        extra_env={
            "MOTS_PURCHASE_MAX_BATCH": str(max_batch),
            **({"MOTS_PURCHASE_WRITERS": str(writers)} if writers else {}),
        },
    )
    try:
        tokens = prepare(url, purchases)
        stack.start(services=("market",), timeout_s=120)
        base = stack.url("market")
        warm = _run(load(base, tokens[:WARMUP], concurrency, seconds))
        floor = _run(load(base, tokens[WARMUP:], concurrency, seconds, probe=True))
        result = _run(load(base, tokens[WARMUP:], concurrency, seconds))
        with httpx.Client(base_url=base, timeout=120) as http:
            check = http.get("/v1/ledger/check", headers=OPERATOR).json()
            batching = batch_stats(http.get("/metrics").text)
    finally:
        stack.stop()
        if pg_name:
            _drop_pg(pg_name)
    booked = warm["status_codes"].get(201, 0) + result["status_codes"].get(201, 0)
    pool = Decimal(check["accounts"]["round_pools"])
    balanced = (
        check["unbalanced_transactions"] == 0
        and check["mismatched_accounts"] == 0
        and Decimal(check["total"]) == 0
        and pool == PRICE * booked
    )
    return {
        "db": db,
        "api_workers": api_workers,
        "max_batch": max_batch,
        "writers": writers
        or Settings(database_url=url, api_processes=api_workers).purchase_writer_count,
        "concurrency": concurrency,
        "warmup_requests": warm["requests"],
        **result,
        "batching": batching,
        "healthz_floor": floor,
        "booked": booked,
        "ledger": {**check, "pool_expected": str(PRICE * booked), "balanced_exactly": balanced},
    }


def _line(name: str, r: dict[str, Any]) -> str:
    return (
        f"  {name:<34} {r['purchases_per_second']:>7.0f} /s  p50 {r['p50_ms']:>6.1f} ms  "
        f"p95 {r['p95_ms']:>6.1f} ms  p99 {r['p99_ms']:>6.1f} ms  status {r['status_codes']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: make bench-market, or python -m benchmarks.bench_market --db sqlite",
    )
    parser.add_argument(
        "--purchases", type=int, default=4000, help="purchases per run (bound on count)"
    )
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="bound on each load's wall time"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="purchases kept in flight")
    parser.add_argument("--db", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--api-workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument(
        "--max-batch",
        type=int,
        default=256,
        help="purchases per transaction (MOTS_PURCHASE_MAX_BATCH)",
    )
    parser.add_argument(
        "--writers",
        type=int,
        choices=range(1, 17),
        metavar="1..16",
        help="batches booked at once (MOTS_PURCHASE_WRITERS; default: the platform's, 2 on"
        " PostgreSQL, 1 on SQLite)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the baseline run (one transaction per purchase, --max-batch 1)",
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args()
    if args.purchases <= WARMUP:
        parser.error(f"--purchases: must exceed the {WARMUP} warm-up purchases")
    exit_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)

    def run(max_batch: int) -> dict[str, Any]:
        return run_market(
            args.db,
            args.purchases,
            args.concurrency,
            args.seconds,
            args.api_workers,
            max_batch,
            args.out / "market-run",
            args.writers,
        )

    baseline = None if args.no_baseline else run(1)
    result = run(args.max_batch)
    report = {
        **result,
        "baseline": baseline,
        "targets": {"purchases_per_second": 1000, "p99_ms": 50},
    }
    (args.out / f"market-{args.db}.json").write_text(json.dumps(report, indent=2))
    print(
        f"market API on {args.db}, {args.api_workers} worker(s), {result['writers']} batch "
        f"writer(s), {args.concurrency} concurrent "
        f"clients, {result['requests']} purchases measured after {WARMUP} warm-up:"
    )
    if baseline is not None:
        print(_line("baseline: one transaction each", baseline))
    print(_line(f"batched: up to {args.max_batch} per transaction", result))
    if baseline is not None:
        speedup = result["purchases_per_second"] / max(baseline["purchases_per_second"], 1e-9)
        p99 = baseline["p99_ms"] / max(result["p99_ms"], 1e-9)
        tail = f"{p99:.2f}× lower" if p99 >= 1 else f"{1 / p99:.2f}× higher"
        print(f"  ratio batched/baseline: {speedup:.2f}× purchases/s, p99 {tail}")
    floor = result["healthz_floor"]
    print(
        f"  {'floor: GET /healthz, same app':<34} {floor['requests_per_second']:>7.0f} /s  "
        f"p50 {floor['p50_ms']:>6.1f} ms  p99 {floor['p99_ms']:>6.1f} ms  (purchases run at "
        f"{result['purchases_per_second'] / max(floor['requests_per_second'], 1e-9):.2f}× its rate)"
    )
    for name, b in result["batching"].items():
        print(
            f"  batcher {name}: {b['batches']:.0f} batches, mean size {b['mean_size']:.1f}, "
            f"mean {b['mean_ms']:.1f} ms per batch"
        )
    failed = False
    for label, r in (("baseline", baseline), ("batched", result)):
        if r is None:
            continue
        ok = r["ledger"]["balanced_exactly"]
        print(
            f"  ledger ({label}): {r['ledger']['transactions']} transactions, pool "
            f"{r['ledger']['accounts'].get('round_pools')} = {r['booked']} × {PRICE}: "
            f"{'balanced exactly' if ok else 'NOT BALANCED'}"
        )
        errors = {c: n for c, n in r["status_codes"].items() if c != 201}
        if errors:
            print(f"  {label}: {sum(errors.values())} purchases were not booked: {errors}")
        failed |= not ok or bool(errors)
    met = result["purchases_per_second"] >= 1000 and result["p99_ms"] <= 50
    print(f"  targets: ≥ 1000 purchases/s, p99 ≤ 50 ms: {'met' if met else 'NOT met'}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
