"""Market rounds at scale (issue 16): every phase of a round for N = 1,000 … 100,000 clients.

Run with ``make bench-scale`` (``.venv/bin/python -m benchmarks.bench_scale``). For each database
(SQLite, PostgreSQL) and each population size N (``--sizes``), starts the four services on a
fresh database with the in-process trainer on small per-client data, then, from this process (the
load generator, on the same cores): registers and funds N clients through the operator's bulk
route (clients split 2:1:1 over three types), opens a round, reads the quote and has every client
respond over REST, ``--concurrency`` requests in flight (the first K*_i of a type join, the next
B*_i buy, the rest abstain), and waits until the round is published. Writes
``out/bench/scale.json`` (one row per run: register and declare rates, seconds per state, the
platform's own seconds = the round outside collecting, training and evaluating, each process's
peak RSS, whether the round published and the ledger balanced) and prints a table, then the
issue's targets against the rows (also in scale.json as ``verdict``). On PostgreSQL each N runs
once per ``--api-processes`` value (default 1 and 2, back to back), so two market API processes
are compared with one on the same machine in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.raw_http import exchange
from mots.local.keys import process_secrets
from mots.local.launcher import Stack, exit_on_sigterm

OPERATOR_TOKEN = process_secrets().operator_token
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
OPERATOR_LINE = f"Authorization: Bearer {OPERATOR_TOKEN}\r\n"
PG_ADMIN = os.environ.get("MOTS_BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
TYPES = [  # name, share of N, D_i (small per-client data), C_i
    ("small", 2, 8, "0.08"),
    ("medium", 1, 16, "0.16"),
    ("large", 1, 32, "0.32"),
]
UTILITY = {"kind": "power", "scale": 1.0, "exponent": 8.0}
BULK = 10_000
"""Clients per bulk registration call (the route's most)."""
TARGETS = {
    "register_per_s": 2_000,
    "register_single_per_s": 1_000,
    "declare_per_s": 2_000,
    "platform_seconds_100k": 60.0,
    "platform_ratio_100k_10k": 12.0,
    "peak_rss_mib": 1024,
}


def counts(n: int) -> list[int]:
    """N split over the types by their shares (the remainder to the first)."""
    total = sum(t[1] for t in TYPES)
    out = [n * t[1] // total for t in TYPES]
    out[0] += n - sum(out)
    return out


@contextmanager
def databases(kind: str, services: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """Fresh PostgreSQL databases for ``services`` (dropped after), or none for SQLite."""
    if kind == "sqlite":
        yield {}
        return
    import psycopg

    names = {s: f"mots_scale_{s}_{uuid.uuid4().hex[:8]}" for s in services}
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {s: f"postgresql+psycopg://postgres@127.0.0.1:5432/{n}" for s, n in names.items()}
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            for name in names.values():
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident set (VmHWM) plus its children's (uvicorn's workers), in MiB."""
    total = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total = max(total, int(line.split()[1]) / 1024)
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total = max(total, peak_rss_mib(int(child)))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return total


class PeakWatch:
    """Samples every stack process's peak RSS (VmHWM) while the run goes; keeps the largest."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.peaks: dict[str, float] = {}

    def sample(self) -> None:
        for p in self.stack.processes:
            self.peaks[p.name] = max(self.peaks.get(p.name, 0.0), peak_rss_mib(p.popen.pid))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> tuple[float, float]:
    """All cores' busy and total CPU seconds since boot (/proc/stat; iowait counts as idle)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - ticks[3] - ticks[4]) / hz, sum(ticks) / hz


class CpuMeter:
    """Where a phase's CPU went: each stack process (each uvicorn worker apart), this load
    generator, and the whole machine (PostgreSQL, Redis and anything else running included), so
    that a phase's rate can be read against the two cores it had."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self._start: dict[str, float] = {}
        self._t0 = 0.0
        self.cpu: dict[str, float] = {}  # the last phase's, when a callee stops it

    def _now(self) -> dict[str, float]:
        out: dict[str, float] = {"load-generator": time.process_time()}
        for p in self.stack.processes:
            out[p.name] = cpu_seconds(p.popen.pid)
            kids = Path(f"/proc/{p.popen.pid}/task/{p.popen.pid}/children")
            try:
                for k, child in enumerate(kids.read_text().split(), start=1):
                    out[f"{p.name}.{k}"] = cpu_seconds(int(child))
            except FileNotFoundError:
                pass
        out["machine-busy"], out["machine-total"] = machine_cpu_seconds()
        return out

    def start(self) -> None:
        """Start a phase."""
        self._start, self._t0 = self._now(), time.perf_counter()

    def stop(self) -> dict[str, float]:
        """CPU seconds each used since :meth:`start` (the idle ones left out), and ``wall``."""
        end, wall = self._now(), time.perf_counter() - self._t0
        used = {k: round(v - self._start.get(k, 0.0), 2) for k, v in end.items()}
        total = used.pop("machine-total")
        used["machine-busy-share"] = round(used["machine-busy"] / total, 3) if total else 0.0
        used["wall"] = round(wall, 2)
        return {k: v for k, v in used.items() if v}


def register(market: httpx.Client, n: int) -> list[tuple[int, str, str]]:
    """Register and fund ``n`` clients in bulk calls; (id, type, token) each."""
    out: list[tuple[int, str, str]] = []
    per_type = counts(n)
    todo = [[name, c, size, cost] for (name, _, size, cost), c in zip(TYPES, per_type, strict=True)]
    while any(t[1] for t in todo):
        room, groups = BULK, []
        for t in todo:
            take = min(room, t[1])
            if take:
                groups.append(
                    {"type_name": t[0], "data_size": t[2], "cost": t[3], "count": take,
                     "name_prefix": f"{t[0]}-"}
                )  # fmt: skip
                t[1] -= take
                room -= take
        r = market.post(
            "/v1/clients/bulk", json={"types": groups, "deposit": "100"}, headers=OPERATOR
        )
        r.raise_for_status()
        out.extend((c["id"], c["type_name"], c["token"]) for c in r.json()["clients"])
    return out


def enrolment_codes(market: httpx.Client, n: int) -> list[str]:
    """One operator-issued enrolment code per type for its share of ``n`` devices (``uses`` =
    that share): the code each single registration presents, in the order the phase sends them."""
    codes: list[str] = []
    for (name, _, size, cost), c in zip(TYPES, counts(n), strict=True):
        if c == 0:
            continue
        r = market.post(
            "/v1/enrolments",
            json={"type_name": name, "data_size": size, "cost": cost, "uses": c},
            headers=OPERATOR,
        )
        r.raise_for_status()
        codes.extend([r.json()["code"]] * c)
    return codes


def registration_request(host: str, code: str, k: int) -> bytes:
    """One device's ``POST /v1/clients`` with its enrolment code, as HTTP/1.1 bytes (keep-alive)."""
    body = f'{{"name":"single-{k:07d}","enrolment_code":"{code}"}}'.encode()
    return (
        f"POST /v1/clients HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def send_all(base: str, requests: list[tuple[bytes, str]], concurrency: int) -> list[bytes]:
    """Pre-built requests over ``concurrency`` kept-alive raw connections; their response bodies
    in the requests' order. A 503 is retried (up to 5 times, 1 s apart); any other answer but
    200/201 fails the run (``what`` names the request in the error)."""
    url = httpx.URL(base)
    host, port = url.host, url.port or 80
    todo = iter(enumerate(requests))
    bodies: list[bytes] = [b""] * len(requests)

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for k, (req, what) in todo:
                status, body = await exchange(reader, writer, req)
                for _ in range(5):  # a 503 (database briefly unavailable) is retried, as clients do
                    if status != 503:
                        break
                    await asyncio.sleep(1.0)
                    status, body = await exchange(reader, writer, req)
                if status not in (200, 201):
                    raise RuntimeError(f"{what}: {status} {body[:300]!r}")
                bodies[k] = body
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return bodies


def register_single(
    market: httpx.Client, base: str, n: int, concurrency: int, meter: CpuMeter | None = None
) -> tuple[list[tuple[int, str, str]], float]:
    """Register and fund ``n`` devices one ``POST /v1/clients`` each (its type's enrolment code),
    ``concurrency`` in flight: (id, type, token) each, and registrations per second (the codes
    are issued before the clock, the deposits after it)."""
    codes = enrolment_codes(market, n)
    host = f"{httpx.URL(base).host}:{httpx.URL(base).port}"
    requests = [
        (registration_request(host, c, k), f"registration {k}") for k, c in enumerate(codes)
    ]
    if meter is not None:
        meter.start()
    t0 = time.perf_counter()
    bodies = asyncio.run(send_all(base, requests, concurrency))
    rate = n / (time.perf_counter() - t0)
    if meter is not None:
        meter.cpu = meter.stop()
    out = [(b["id"], b["type_name"], b["token"]) for b in map(json.loads, bodies)]
    asyncio.run(
        send_all(base, [(deposit_request(host, c[0]), f"deposit {c[0]}") for c in out], concurrency)
    )
    return out, rate


def deposit_request(host: str, client_id: int) -> bytes:
    """The operator's deposit of 100 into a client's wallet, as HTTP/1.1 bytes (keep-alive)."""
    body = f'{{"client_id":{client_id},"amount":"100"}}'.encode()
    return (
        f"POST /v1/deposits HTTP/1.1\r\nHost: {host}\r\n{OPERATOR_LINE}"
        f"Idempotency-Key: fund-{client_id:08d}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def plan(clients: list[tuple[int, str, str]], quote: dict[str, Any]) -> list[tuple[str, str, int]]:
    """Each client's move at the quote: (join | buy | abstain, token, client id), by type rank."""
    targets = {t["type_name"]: t for t in quote["types"]}
    seen: dict[str, int] = {}
    moves = []
    for cid, type_name, token in sorted(clients):
        k = seen.get(type_name, 0)
        seen[type_name] = k + 1
        t = targets.get(type_name, {"target_participants": 0, "target_buyers": 0})
        if k < t["target_participants"]:
            moves.append(("join", token, cid))
        elif k < t["target_participants"] + t["target_buyers"]:
            moves.append(("buy", token, cid))
        else:
            moves.append(("abstain", token, cid))
    return moves


def move_request(host: str, round_id: int, move: str, token: str, cid: int) -> bytes:
    """A client's move as HTTP/1.1 bytes (keep-alive), built before the clock starts."""
    if move == "buy":
        body = f'{{"round_id":{round_id}}}'.encode()
        line = f"POST /v1/purchases HTTP/1.1\r\nIdempotency-Key: buy-{round_id}-{cid:08d}\r\n"
    else:
        body = f'{{"strategy":"{move}"}}'.encode()
        line = f"PUT /v1/rounds/{round_id}/decision HTTP/1.1\r\n"
    return (
        f"{line}Host: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def respond(
    base: str, round_id: int, moves: list[tuple[str, str, int]], concurrency: int
) -> None:
    """Every client's move over REST, ``concurrency`` keep-alive connections in flight. Plain
    sockets writing pre-built requests, as ``bench-market``'s generator: it shares the API's
    cores, so it must cost little CPU per request (httpx costs about as much as the request)."""
    url = httpx.URL(base)
    hostport = f"{url.host}:{url.port or 80}"
    requests = [
        (move_request(hostport, round_id, m, t, c), f"{m} of client {c}") for m, t, c in moves
    ]
    await send_all(base, requests, concurrency)


def wait_for_quote(market: httpx.Client, token: str, round_id: int) -> dict[str, Any]:
    """The round's quote once the market publishes it."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        r = market.get(f"/v1/rounds/{round_id}/quote", headers={"Authorization": f"Bearer {token}"})
        if r.status_code == 200:
            body: dict[str, Any] = r.json()
            return body
        time.sleep(0.2)
    raise TimeoutError(f"round {round_id}: no quote within 600 s")


def wait_round(orch: httpx.Client, round_id: int, watch: PeakWatch) -> dict[str, Any]:
    """The round's record once it is published or settled by rule."""
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        r = orch.get(f"/v1/rounds/{round_id}", headers=OPERATOR)
        r.raise_for_status()
        body: dict[str, Any] = r.json()
        watch.sample()
        if body["state"] in ("published", "settled_by_rule", "failed"):
            return body
        time.sleep(0.5)
    raise TimeoutError(f"round {round_id} did not finish within an hour")


def run_one(database: str, n: int, args: argparse.Namespace, processes: int = 1) -> dict[str, Any]:
    """One full round at population ``n`` on ``database`` with ``processes`` market API
    processes; its row."""
    workdir = args.out / "scale-run" / f"{database}-{n}-x{processes}"
    shutil.rmtree(workdir, ignore_errors=True)
    with databases(database, ("market", "orchestration")) as urls:
        stack = Stack(
            workdir=workdir,
            database_urls=urls,
            api_workers={"market": processes},
            extra_env={
                "MOTS_TRAINER": "inprocess",
                "MOTS_TRAIN_ROUNDS": "1",
                "MOTS_TRAIN_LOCAL_STEPS": "1",
                "MOTS_TRAIN_BATCH_SIZE": "8",
                "MOTS_TRAIN_TEST_SUBSET": "1000",
                "MOTS_UTILITY": json.dumps(UTILITY),
                "MOTS_COLLECT_TIMEOUT_S": "3600",
                "MOTS_TRAIN_TIMEOUT_S": "3600",
                "MOTS_BROKER_VISIBILITY_TIMEOUT_S": "7200",
                "MOTS_MAX_TYPES": "32",
            },
        )
        watch = PeakWatch(stack)
        try:
            stack.start(timeout_s=180)
            market = httpx.Client(base_url=stack.url("market"), timeout=600)
            orch = httpx.Client(base_url=stack.url("orchestration"), timeout=600)
            single = min(args.single, n // 2)
            meter, cpu = CpuMeter(stack), {}
            t0 = time.perf_counter()
            clients = register(market, n - single)
            register_s = time.perf_counter() - t0
            watch.sample()
            # the rest one request each: the round's population is both
            singles, single_per_s = (
                register_single(market, stack.url("market"), single, args.concurrency, meter)
                if single
                else ([], 0.0)
            )
            cpu["register_single"] = meter.cpu
            clients += singles
            watch.sample()
            round_id = orch.post("/v1/rounds", headers=OPERATOR).json()["round_id"]
            quote = wait_for_quote(market, clients[0][2], round_id)
            moves = plan(clients, quote)
            meter.start()
            t0 = time.perf_counter()
            asyncio.run(respond(stack.url("market"), round_id, moves, args.concurrency))
            declare_s = time.perf_counter() - t0
            cpu["declare"] = meter.stop()
            watch.sample()
            body = wait_round(orch, round_id, watch)
            check = market.get("/v1/ledger/check", headers=OPERATOR).json()
            market.close()
            orch.close()
        finally:
            watch.sample()
            stack.stop(timeout_s=60)
    summary = body.get("summary") or {}
    phases: dict[str, float] = summary.get("phase_seconds", {})
    own = sum(v for k, v in phases.items() if k not in ("collecting", "training", "evaluating"))
    moved = {m: sum(1 for x in moves if x[0] == m) for m in ("join", "buy", "abstain")}
    return {
        "clients": n,
        "database": database,
        "api_processes": processes,
        "register_per_s": (n - single) / register_s,
        "single_registrations": single,
        "register_single_per_s": single_per_s,
        "declare_per_s": n / declare_s,
        "moves": moved,
        "cpu_seconds": cpu,
        "state_seconds": phases,
        "platform_seconds": own,
        "peak_rss_mib": {k: round(v, 1) for k, v in sorted(watch.peaks.items())},
        "published": body["state"] == "published",
        "state": body["state"],
        "ledger_balanced": check["unbalanced_transactions"] == 0
        and check["mismatched_accounts"] == 0
        and float(check["total"]) == 0.0,
    }


def _pg(rows: list[dict[str, Any]], processes: int = 1) -> dict[int, dict[str, Any]]:
    """The PostgreSQL rows with ``processes`` market API processes, by N."""
    return {
        r["clients"]: r
        for r in rows
        if r["database"] == "postgresql" and r["api_processes"] == processes
    }


def verdict(rows: list[dict[str, Any]]) -> list[tuple[str, str, bool | None]]:
    """The issue's targets (PostgreSQL) against the rows: (target, what was measured, met;
    None where the sweep did not measure it, e.g. ``--sizes`` without 10,000 and 100,000)."""
    one, two = _pg(rows), _pg(rows, 2)
    out: list[tuple[str, str, bool | None]] = []

    def every(what: str, key: str, floor: float, where: list[dict[str, Any]]) -> None:
        got = [(r["clients"], r[key]) for r in where]
        shown = ", ".join(f"{v:,.0f} (N={n:,})" for n, v in got) or "not measured"
        out.append((what, shown, all(v >= floor for _, v in got) if got else None))

    big = one.get(100_000)
    out.append((
        "N = 100,000 published, ledger exact",
        "not measured" if big is None else f"{big['state']}, ledger "
        + ("exact" if big["ledger_balanced"] else "BROKEN"),
        None if big is None else bool(big["published"] and big["ledger_balanced"]),
    ))  # fmt: skip
    every("bulk registration ≥ 2,000/s", "register_per_s", TARGETS["register_per_s"],
          list(one.values()))  # fmt: skip
    every("single registrations ≥ 1,000/s", "register_single_per_s",
          TARGETS["register_single_per_s"], [r for r in one.values() if r["single_registrations"]])  # fmt: skip
    every("declarations ≥ 2,000/s", "declare_per_s", TARGETS["declare_per_s"], list(one.values()))
    ten = one.get(10_000)
    if big is None or ten is None:
        out.append(("platform s: 100k ≤ 12× 10k and < 60 s", "not measured", None))
    else:
        ratio = big["platform_seconds"] / ten["platform_seconds"]
        out.append((
            "platform s: 100k ≤ 12× 10k and < 60 s",
            f"{big['platform_seconds']:.2f} s = {ratio:.1f}× {ten['platform_seconds']:.2f} s",
            ratio <= TARGETS["platform_ratio_100k_10k"]
            and big["platform_seconds"] < TARGETS["platform_seconds_100k"],
        ))  # fmt: skip
    pg_rows = list(one.values()) + list(two.values())
    peak = max((v for r in pg_rows for v in r["peak_rss_mib"].values()), default=None)
    out.append((
        "every process's peak RSS < 1 GiB",
        "not measured" if peak is None else f"largest {peak:,.0f} MiB",
        None if peak is None else peak < TARGETS["peak_rss_mib"],
    ))  # fmt: skip
    pairs = sorted(set(one) & set(two))
    out.append((
        "two API processes: correct and faster than one",
        ", ".join(
            f"N={n:,}: {two[n]['declare_per_s']:,.0f} vs {one[n]['declare_per_s']:,.0f} decl/s "
            f"({two[n]['declare_per_s'] / one[n]['declare_per_s']:.2f}×)"
            for n in pairs
        ) or "not measured",
        all(
            two[n]["published"] and two[n]["ledger_balanced"]
            and two[n]["declare_per_s"] > one[n]["declare_per_s"]
            for n in pairs
        ) if pairs else None,
    ))  # fmt: skip
    return out


def verdict_table(rows: list[dict[str, Any]]) -> Table:
    """:func:`verdict` as a rich table."""
    t = Table(title="bench-scale: the issue's targets (PostgreSQL, one API process unless stated)")
    for col in ("target", "measured", "met"):
        t.add_column(col)
    for what, shown, met in verdict(rows):
        t.add_row(what, shown, {True: "yes", False: "NO", None: "-"}[met])
    return t


def table(rows: list[dict[str, Any]]) -> Table:
    """The rows as a rich table."""
    t = Table(title="bench-scale: one market round per row (in-process trainer)")
    for col in (
        "N", "db", "register/s", "single reg/s", "declare/s", "collecting s", "training s", "platform s",
        "max peak RSS MiB (process)", "published", "ledger",
    ):  # fmt: skip
        t.add_column(col, justify="right")
    for r in rows:
        ph = r["state_seconds"]
        name, rss = max(r["peak_rss_mib"].items(), key=lambda kv: kv[1], default=("-", 0.0))
        t.add_row(
            f"{r['clients']:,}",
            r["database"] + (f" ×{r['api_processes']}" if r["api_processes"] > 1 else ""),
            f"{r['register_per_s']:,.0f}",
            f"{r['register_single_per_s']:,.0f}",
            f"{r['declare_per_s']:,.0f}",
            f"{ph.get('collecting', 0.0):.1f}",
            f"{ph.get('training', 0.0):.1f}",
            f"{r['platform_seconds']:.2f}",
            f"{rss:,.0f} ({name})",
            "yes" if r["published"] else r["state"],
            "exact" if r["ledger_balanced"] else "BROKEN",
        )
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: python -m benchmarks.bench_scale --sizes 1000,10000 --databases sqlite",
    )
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="populations N, comma-separated"
    )
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite and/or postgresql")
    parser.add_argument(
        "--api-processes",
        default="1,2",
        help="market API processes on PostgreSQL, comma-separated: one row each, back to back at"
        " each N, so that two can be compared with one (SQLite runs one)",
    )
    parser.add_argument("--concurrency", type=int, default=64, help="REST requests in flight")
    parser.add_argument(
        "--single",
        type=int,
        default=2000,
        help="clients also registered one POST /v1/clients each (enrolment code), at most N",
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    exit_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    processes = [int(p) for p in args.api_processes.split(",")]
    for database in args.databases.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            for p in processes if database == "postgresql" else [1]:
                rows.append(run_one(database, n, args, p))
                Console(width=160).print(table(rows[-1:]))
                Console(width=160).print("CPU seconds by phase:", rows[-1]["cpu_seconds"])
                # after every run, so that a long sweep stopped early keeps what it measured
                met = [{"target": t, "measured": m, "met": ok} for t, m, ok in verdict(rows)]
                (args.out / "scale.json").write_text(
                    json.dumps({"rows": rows, "targets": TARGETS, "verdict": met}, indent=2)
                )
    Console(width=160).print(table(rows))
    Console(width=160).print(verdict_table(rows))
    return 0 if all(r["published"] and r["ledger_balanced"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
