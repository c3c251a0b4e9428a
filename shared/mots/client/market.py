"""The market's REST API as a Python client (synchronous, over one ``httpx.Client``).

Every call sends and parses the platform's own pydantic schemas (:mod:`mots.platform.api.market`).
A refusal raises :class:`MarketError` carrying the HTTP status and the market's ``detail``, which
names the field and the rule. Money-moving calls (``buy``, ``deposit``) carry an Idempotency-Key
(made per call unless given) and are retried with the same key after a lost connection or a 502,
503 or 504: the market books a key at most once and answers a replay with the first result.
Reads and the strategy declaration are retried alike (they are idempotent); registration is not.

A client holds one bearer token (a client's, or the operator's); :meth:`MarketClient.with_token`
gives another credential's view over the same connection pool.
"""

from __future__ import annotations

import copy
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from mots.client.errors import MarketError, ModelIntegrityError, problem_detail, problem_ids
from mots.client.model_file import load_model, write_sidecar
from mots.platform import tokens
from mots.platform.api.base import Page, RoundState, Strategy
from mots.platform.api.market import (
    AccountOut,
    BalanceOut,
    BulkRegistered,
    BulkRegistration,
    ClientOut,
    ClientRegistration,
    DecisionIn,
    DecisionOut,
    DepositIn,
    DepositOut,
    EnrolmentIn,
    EnrolmentIssued,
    EnrolmentOut,
    EntryOut,
    LedgerCheck,
    ModelInfo,
    NodeKeyChallenge,
    NodeKeyIn,
    NodeKeyOut,
    NodeKeyProof,
    PurchaseIn,
    PurchaseOut,
    QuoteOut,
    RegisteredClient,
    TokenOut,
    TransactionOut,
)
from mots.platform.api.tasks import TaskIn, TaskOut, TaskVersions

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 3
RETRY_STATUSES = frozenset({502, 503, 504})
"""Answers after which a retry may succeed (a proxy or the ledger was briefly unavailable)."""
MODEL_DIGEST_HEADER = "X-Model-SHA256"

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
_ClientPage = Page[ClientOut]
_TransactionPage = Page[TransactionOut]
_AccountPage = Page[AccountOut]
_EntryPage = Page[EntryOut]
_EnrolmentPage = Page[EnrolmentOut]
_TaskPage = Page[TaskOut]


@dataclass(frozen=True)
class DownloadedModel:
    """A round's model saved to ``path``, its SHA-256 checked against the market's."""

    round_id: int
    path: Path
    sha256: str
    size: int
    metadata_path: Path | None = None
    """``mots-round-N.json`` beside the file: the market's :class:`ModelInfo` (None when the
    market did not answer it)."""


def new_idempotency_key() -> str:
    """A fresh Idempotency-Key (retries of one call reuse it; another call gets another)."""
    return f"mots-client-{uuid.uuid4().hex}"


class MarketClient:
    """A client of the market API: the calls of a registered client and of the operator.

    ``base_url`` is the market's address (``http://host:8000``), ``token`` the bearer credential
    the calls carry (None: only registration works). ``timeout_s`` bounds every request,
    ``retries`` the extra attempts of a retryable call (with ``backoff_s``, doubling, between).
    ``transport`` replaces the network (tests: ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url: must start with http:// or https://, got {base_url!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s}")
        http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport)
        self._setup(http, True, token, retries, backoff_s, sleep)

    @classmethod
    def over(
        cls,
        http: httpx.Client,
        token: str | None = None,
        *,
        retries: int = DEFAULT_RETRIES,
        backoff_s: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> MarketClient:
        """A client over an existing ``httpx.Client`` (its base URL, timeouts and transport);
        closing it leaves ``http`` open."""
        client = cls.__new__(cls)
        client._setup(http, False, token, retries, backoff_s, sleep)
        return client

    def _setup(
        self,
        http: httpx.Client,
        owner: bool,
        token: str | None,
        retries: int,
        backoff_s: float,
        sleep: Callable[[float], None],
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries: must be ≥ 0, got {retries}")
        if backoff_s < 0:
            raise ValueError(f"backoff_s: must be ≥ 0, got {backoff_s}")
        self._http = http
        self._owner = owner
        self._token = token
        self._retries = retries
        self._backoff_s = backoff_s
        self._sleep = sleep

    # ------------------------------------------------------------------ plumbing

    @property
    def base_url(self) -> str:
        """The market's address."""
        return str(self._http.base_url).rstrip("/")

    @property
    def token(self) -> str | None:
        """The bearer credential this client's calls carry."""
        return self._token

    def with_token(self, token: str | None) -> MarketClient:
        """The same connection pool with another credential (closing it leaves the pool open)."""
        view = copy.copy(self)
        view._token = token
        view._owner = False
        return view

    def close(self) -> None:
        """Close the connection pool (a :meth:`with_token` view leaves its owner's open)."""
        if self._owner:
            self._http.close()

    def __enter__(self) -> MarketClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry: bool = True,
        ok_missing: bool = False,
    ) -> httpx.Response | None:
        """One call, retried when ``retry`` after a lost connection or a retryable status.

        Returns the response (2xx), or None for a 404 when ``ok_missing``; raises
        :class:`MarketError` otherwise.
        """
        payload = None if body is None else body.model_dump(mode="json")
        attempts = 1 + (self._retries if retry else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                r = self._http.request(
                    method, path, json=payload, params=params, headers=self._headers(headers)
                )
            except httpx.TransportError as exc:
                if last:
                    raise MarketError(None, f"{type(exc).__name__}: {exc}", method, path) from exc
            else:
                if r.is_success:
                    return r
                if r.status_code == 404 and ok_missing:
                    return None
                if last or r.status_code not in RETRY_STATUSES:
                    raise MarketError(
                        r.status_code, problem_detail(r), method, path, **problem_ids(r)
                    )
            self._sleep(self._backoff_s * 2**attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _call(self, model: type[M], method: str, path: str, **kw: Any) -> M:
        r = self._send(method, path, **kw)
        assert r is not None  # ok_missing is not passed here
        return _parse(model, r, method, path)

    def _every_page(
        self, model: type[Page[T]], path: str, page_size: int, filters: dict[str, str]
    ) -> list[T]:
        """``GET path`` page after page (following ``next``): every item the filters select."""
        out: list[T] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": page_size, **filters}
            if cursor:
                params["cursor"] = cursor
            page = self._call(model, "GET", path, params=params)
            out.extend(page.items)
            if page.next is None:
                return out
            cursor = page.next

    def _maybe(self, model: type[M], method: str, path: str, **kw: Any) -> M | None:
        r = self._send(method, path, ok_missing=True, **kw)
        return None if r is None else _parse(model, r, method, path)

    # ------------------------------------------------------------------ a client's calls

    def register(self, registration: ClientRegistration) -> RegisteredClient:
        """``POST /v1/clients``: redeem an enrolment code (the client gets its attested task, type,
        D_i and C_i); the returned token is shown only once.

        Not retried (a lost answer would register twice): on a connection error, check with
        :meth:`clients` (operator) before registering again.
        """
        return self._call(RegisteredClient, "POST", "/v1/clients", body=registration, retry=False)

    def me(self) -> ClientOut:
        """``GET /v1/me``: the registered facts behind this client's token."""
        return self._call(ClientOut, "GET", "/v1/me")

    @property
    def token_expires_at(self) -> int | None:
        """When this client's token expires (Unix seconds, read from the token); None for a
        token that states none (the operator's)."""
        claim = tokens.parse(self._token) if self._token is not None else None
        return None if claim is None else claim.expires_at

    def renew_token(self) -> TokenOut:
        """``POST /v1/me/token``: a new token with a fresh expiry, which this client uses from
        now on; the old one is revoked. Not retried (a lost answer leaves only the new token
        valid): keep the returned token before anything else."""
        out = self._call(TokenOut, "POST", "/v1/me/token", retry=False)
        self._token = out.token
        return out

    def renew_token_if_expiring(self, within_s: float, now: float | None = None) -> TokenOut | None:
        """Renew the token (:meth:`renew_token`) when it expires within ``within_s`` seconds;
        None when it does not (or states no expiry)."""
        expires_at = self.token_expires_at
        now = time.time() if now is None else now
        if expires_at is None or expires_at - now > within_s:
            return None
        return self.renew_token()

    def renew_token_with_node_key(self, client_id: int, private_key: Path) -> TokenOut:
        """``POST /v1/clients/{id}/token/node-key``: a new token for ``client_id``, proven by the
        SuperNode key it registered (the OpenSSH key file at ``private_key`` signs a challenge
        from ``POST /v1/clients/{id}/token/challenge``); no token needed, so a device whose token
        expired while it was away gets back in. This client uses the new token from now on; the
        old one is revoked. Not retried (a lost answer leaves only the new token valid)."""
        from mots.platform.node_proof import sign_challenge

        issued = self._call(
            NodeKeyChallenge, "POST", f"/v1/clients/{client_id}/token/challenge", retry=False
        )
        body = NodeKeyProof(
            challenge=issued.challenge, signature=sign_challenge(private_key, issued.challenge)
        )
        out = self._call(
            TokenOut, "POST", f"/v1/clients/{client_id}/token/node-key", body=body, retry=False
        )
        self._token = out.token
        return out

    def leave(self) -> ClientOut:
        """``DELETE /v1/me``: leave the market (idempotent, so retried): out of every round that
        opens from now on; the wallet, entries and models stay readable with the same token."""
        return self._call(ClientOut, "DELETE", "/v1/me")

    def set_node_key(self, public_key: str | bytes, private_key: Path) -> NodeKeyOut:
        """``PUT /v1/me/node-key``: register the public key (PEM or OpenSSH) of the SuperNode this
        client trains on, proving it holds the private key (the OpenSSH key file at
        ``private_key`` signs a challenge from ``POST /v1/me/node-key/challenge``); the
        SuperLink admits the device holding it as this client. Idempotent, so it is retried."""
        from mots.platform.node_proof import sign_challenge

        text = public_key.decode() if isinstance(public_key, bytes) else public_key
        issued = self._call(NodeKeyChallenge, "POST", "/v1/me/node-key/challenge")
        body = NodeKeyIn(
            public_key=text,
            challenge=issued.challenge,
            signature=sign_challenge(private_key, issued.challenge),
        )
        return self._call(NodeKeyOut, "PUT", "/v1/me/node-key", body=body)

    def quote(self, round_id: int | None = None) -> QuoteOut | None:
        """The quote of round ``round_id`` (``GET /v1/rounds/{id}/quote``), or of the latest round
        (``GET /v1/quote``); None when there is no such round (yet)."""
        path = "/v1/quote" if round_id is None else f"/v1/rounds/{round_id}/quote"
        return self._maybe(QuoteOut, "GET", path)

    def wait_for_quote(
        self,
        round_id: int,
        *,
        state: RoundState = RoundState.COLLECTING,
        timeout_s: float = 120.0,
        poll_s: float = 0.05,
    ) -> QuoteOut:
        """Poll until round ``round_id``'s quote is in ``state`` (collecting decisions, by default).

        Raises TimeoutError when it is not within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            quote = self.quote(round_id)
            if quote is not None and quote.state == state:
                return quote
            if time.monotonic() >= deadline:
                seen = "no quote" if quote is None else f"state {quote.state.value}"
                raise TimeoutError(
                    f"round {round_id}: not {state.value} within {timeout_s}s ({seen})"
                )
            self._sleep(poll_s)

    def decision(self, round_id: int) -> DecisionOut | None:
        """``GET /v1/rounds/{id}/decision``: the strategy this client declared, or None."""
        return self._maybe(DecisionOut, "GET", f"/v1/rounds/{round_id}/decision")

    def declare(self, round_id: int, strategy: Strategy) -> DecisionOut:
        """``PUT /v1/rounds/{id}/decision``: join, buy (a purchase is still needed) or abstain."""
        return self._call(
            DecisionOut,
            "PUT",
            f"/v1/rounds/{round_id}/decision",
            body=DecisionIn(strategy=strategy),
        )

    def buy(self, round_id: int, *, idempotency_key: str | None = None) -> PurchaseOut:
        """``POST /v1/purchases``: pay the round's price from this client's wallet: while the round
        collects, or once it is published (a late sale at the round's price p*, ``late`` in the
        answer; docs/mechanisms.md §7.3). :meth:`quote`'s ``on_sale`` lists what sells now.

        Safe to retry: the call (and every retry of it) carries ``idempotency_key`` (a fresh one
        when None; pass a key derived from client and round to make retries across restarts of the
        caller safe as well).
        """
        key = idempotency_key or new_idempotency_key()
        return self._call(
            PurchaseOut,
            "POST",
            "/v1/purchases",
            body=PurchaseIn(round_id=round_id),
            headers={"Idempotency-Key": key},
        )

    def balance(self, limit: int = 100) -> BalanceOut:
        """``GET /v1/me/balance``: the wallet's balance and its ``limit`` latest ledger entries."""
        return self._call(BalanceOut, "GET", "/v1/me/balance", params={"limit": limit})

    def entries(self, limit: int | None = None, page_size: int = 500) -> list[EntryOut]:
        """``GET /v1/me/entries``: the wallet's ledger entries, newest first, following the pages'
        ``next`` until ``limit`` entries (None: all of them)."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit: must be ≥ 1, got {limit}")
        out: list[EntryOut] = []
        cursor: str | None = None
        while limit is None or len(out) < limit:
            size = page_size if limit is None else min(page_size, limit - len(out))
            params: dict[str, Any] = {"limit": size} | ({"cursor": cursor} if cursor else {})
            page = self._call(_EntryPage, "GET", "/v1/me/entries", params=params)
            out.extend(page.items)
            if page.next is None:
                break
            cursor = page.next
        return out

    def download_model(
        self, round_id: int, dest: str | os.PathLike[str], *, metadata: bool = True
    ) -> DownloadedModel:
        """``GET /v1/rounds/{id}/model`` into the file ``dest``, its SHA-256 checked against the
        digest the market publishes (``X-Model-SHA256``); with ``metadata``, the market's
        :class:`ModelInfo` is saved beside it as ``<dest stem>.json`` (readable without torch).

        The bytes land in ``dest`` only once they match; a mismatch raises
        :class:`ModelIntegrityError` and leaves no file.
        """
        path = Path(dest)
        method, url = "GET", f"/v1/rounds/{round_id}/model"
        partial = path.with_name(f".{path.name}.part")
        digest = hashlib.sha256()
        size = 0
        try:
            with self._http.stream(method, url, headers=self._headers()) as r:
                if not r.is_success:
                    r.read()
                    raise MarketError(
                        r.status_code, problem_detail(r), method, url, **problem_ids(r)
                    )
                expected = r.headers.get(MODEL_DIGEST_HEADER, "").lower()
                with partial.open("wb") as f:
                    for chunk in r.iter_bytes():
                        digest.update(chunk)
                        size += len(chunk)
                        f.write(chunk)
        except httpx.TransportError as exc:
            partial.unlink(missing_ok=True)
            raise MarketError(None, f"{type(exc).__name__}: {exc}", method, url) from exc
        got = digest.hexdigest()
        if not expected or got != expected:
            partial.unlink(missing_ok=True)
            raise ModelIntegrityError(
                r.status_code,
                f"{MODEL_DIGEST_HEADER}: the model's SHA-256 is {got}, the market published "
                f"{expected or 'none'}",
                method,
                url,
            )
        partial.replace(path)
        sidecar = None
        if metadata:
            info = self.model_info(round_id)
            if info is not None and info.sha256.lower() == got:
                sidecar = write_sidecar(path, {**info.model_dump(mode="json"), "file": path.name})
        return DownloadedModel(round_id, path, got, size, sidecar)

    def model_info(self, round_id: int) -> ModelInfo | None:
        """``GET /v1/rounds/{id}/model/info``: the model's SHA-256, size, coalition, ε and
        metadata, without downloading it (None from a market that does not serve it)."""
        return self._maybe(ModelInfo, "GET", f"/v1/rounds/{round_id}/model/info")

    def load_model(self, round_id: int, dest: str | os.PathLike[str]) -> Any:
        """Download round ``round_id``'s model into ``dest`` (SHA-256 checked, metadata beside
        it) and return its network as a ``torch.nn.Module`` in eval mode: the same meaning as
        :func:`mots.client.model_file.load_model` (plain PyTorch, from the file's own
        description)."""
        got = self.download_model(round_id, dest)
        return load_model(got.path, got.sha256)

    # ------------------------------------------------------------------ the operator's calls

    def deposit(
        self, client_id: int, amount: Decimal, *, idempotency_key: str | None = None
    ) -> DepositOut:
        """``POST /v1/deposits`` (operator): credit a client's wallet; safe to retry like
        :meth:`buy`."""
        key = idempotency_key or new_idempotency_key()
        return self._call(
            DepositOut,
            "POST",
            "/v1/deposits",
            body=DepositIn(client_id=client_id, amount=amount),
            headers={"Idempotency-Key": key},
        )

    def enrol(self, enrolment: EnrolmentIn) -> EnrolmentIssued:
        """``POST /v1/enrolments`` (operator): attest a type of a task and get a code that devices
        redeem at registration (:class:`ClientRegistration`'s ``enrolment_code``; they join the
        code's task, e.g. ``EnrolmentIn(type_name="type-1", data_size=20, cost=0.2,
        task="digits")``); shown only once, so not retried."""
        return self._call(EnrolmentIssued, "POST", "/v1/enrolments", body=enrolment, retry=False)

    def register_bulk(self, registration: BulkRegistration) -> BulkRegistered:
        """``POST /v1/clients/bulk`` (operator): register a fleet by type, each type in its task
        (:class:`BulkType`'s ``task``, fashion-mnist if omitted), each wallet funded with its
        ``deposit``; the tokens are shown only once, so not retried."""
        return self._call(
            BulkRegistered, "POST", "/v1/clients/bulk", body=registration, retry=False
        )

    def enrolments(self, page_size: int = 500) -> list[EnrolmentOut]:
        """``GET /v1/enrolments`` (operator): every enrolment (never its code), every page."""
        return self._all(_EnrolmentPage, "/v1/enrolments", page_size)

    def revoke_enrolment(self, enrolment_id: int) -> EnrolmentOut:
        """``DELETE /v1/enrolments/{id}`` (operator): its code admits no more registrations."""
        return self._call(EnrolmentOut, "DELETE", f"/v1/enrolments/{enrolment_id}")

    def approve(self, client_id: int) -> ClientOut:
        """``POST /v1/clients/{id}/approve`` (operator): a pending self-registered client becomes
        active (priced from the next round)."""
        return self._call(ClientOut, "POST", f"/v1/clients/{client_id}/approve")

    def revoke_client(self, client_id: int) -> ClientOut:
        """``DELETE /v1/clients/{id}`` (operator): the client may no longer declare or buy."""
        return self._call(ClientOut, "DELETE", f"/v1/clients/{client_id}")

    def _all(self, page: type[Page[Any]], path: str, page_size: int) -> list[Any]:
        """Every item of a paged list route, following ``next``."""
        out: list[Any] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
            got = self._call(page, "GET", path, params=params)
            out.extend(got.items)
            if got.next is None:
                return out
            cursor = got.next

    def clients(self, page_size: int = 500, status: str | None = None) -> list[ClientOut]:
        """``GET /v1/clients`` (operator): every registered client (only those in ``status``,
        when given), following the pages' ``next``."""
        filters = {} if status is None else {"status": status}
        return self._every_page(_ClientPage, "/v1/clients", page_size, filters)

    def transactions(
        self, *, limit: int = 50, cursor: str | None = None, **filters: object
    ) -> Page[TransactionOut]:
        """``GET /v1/ledger/transactions`` (operator): one page of transactions across accounts,
        newest first; ``filters``: ``account``, ``round_id``, ``kind``, ``since``, ``until``."""
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        params |= {k: str(v) for k, v in filters.items() if v is not None}
        return self._call(_TransactionPage, "GET", "/v1/ledger/transactions", params=params)

    def accounts(self, category: str | None = None, page_size: int = 500) -> list[AccountOut]:
        """``GET /v1/ledger/accounts`` (operator): every account and its balance."""
        filters = {} if category is None else {"category": category}
        return self._every_page(_AccountPage, "/v1/ledger/accounts", page_size, filters)

    def ledger_check(self) -> LedgerCheck:
        """``GET /v1/ledger/check`` (operator): the ledger's invariants."""
        return self._call(LedgerCheck, "GET", "/v1/ledger/check")

    def create_task(self, content: str) -> TaskOut:
        """``POST /v1/tasks`` (operator): store a task (or a new version) from a task file's text,
        its scenario inline (:func:`mots.tasks.task_file.inline_task_text` makes a file so); a
        malformed one raises :class:`MarketError` 422 listing every problem. Not retried."""
        return self._call(TaskOut, "POST", "/v1/tasks", body=TaskIn(content=content), retry=False)

    def tasks(self, page_size: int = 500) -> list[TaskOut]:
        """``GET /v1/tasks``: every stored task at its latest version, every page."""
        return self._all(_TaskPage, "/v1/tasks", page_size)

    def task(self, name: str, version: int | None = None) -> TaskOut:
        """``GET /v1/tasks/{name}``: the task's latest version (or ``version``)."""
        params = {} if version is None else {"version": version}
        return self._call(TaskOut, "GET", f"/v1/tasks/{name}", params=params)

    def task_versions(self, name: str) -> list[TaskOut]:
        """``GET /v1/tasks/{name}/versions``: every stored version, oldest first."""
        return self._call(TaskVersions, "GET", f"/v1/tasks/{name}/versions").versions

    def retire_task(self, name: str) -> TaskOut:
        """``DELETE /v1/tasks/{name}`` (operator): no new enrolment codes or rounds name it."""
        return self._call(TaskOut, "DELETE", f"/v1/tasks/{name}")


def _parse(model: type[M], response: httpx.Response, method: str, path: str) -> M:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise MarketError(response.status_code, f"unexpected answer: {exc}", method, path) from exc
