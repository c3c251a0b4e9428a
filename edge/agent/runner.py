"""The agent's loop: register once (and the device's SuperNode key), then answer each round's quote
with the best response.

A device in several tasks (``--data TASK=PATH`` each) is one client per task (issue 36): one
:class:`Agent` per task, each registered with its task's enrolment code, each registering the
device's one SuperNode key, polled in turn by :func:`run_agents`.

State on disk (``MOTS_EDGE_STATE_DIR``; another task's below it in ``tasks/<task>``):
``registration.json`` (client id and token, mode 0600), ``decision.json`` (the latest round's
choice and payoffs) and, for the device, ``heartbeat`` (last successful poll of any task).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edge.agent.settings import AgentSettings
from mots.client import ClientFacts, MarketClient, MarketError, draw_place, respond
from mots.economics.best_response import Choice
from mots.platform.api.base import RoundState, Strategy
from mots.platform.api.market import ClientRegistration
from mots.platform.api.tasks import DEFAULT_TASK

if TYPE_CHECKING:
    from mots.tasks.task_file import DataSpec

log = logging.getLogger("edge.agent")

PAYMENT_REQUIRED = 402
UNAUTHORIZED = 401
NOT_FOUND = 404
CONFLICT = 409


@dataclass(frozen=True)
class Registration:
    """This device's identity at the market: its client id and bearer token."""

    client_id: int
    token: str


class Agent:
    """One device's market agent."""

    def __init__(
        self,
        settings: AgentSettings,
        market: MarketClient,
        data: dict[str, str] | None = None,
        task: str = DEFAULT_TASK,
    ) -> None:
        self.settings = settings
        self.data = dict(data or {})
        self.task = task
        self.market = market
        self.facts = ClientFacts(settings.client_type, settings.data_size, settings.cost)
        self.utility = settings.utility_model()
        self._registration: Registration | None = None
        self._node_key: str | None = None
        self._answered: set[int] = set()
        self._no_code_logged = False

    @property
    def state_dir(self) -> Path:
        """Where this task's registration and latest decision are kept."""
        return self.settings.task_state_dir(self.task)

    def without_code(self) -> bool:
        """True (logged once) when this device's client of a task other than the default has no
        registration and no enrolment code for it: it does not take part in that task."""
        if self.task == DEFAULT_TASK or self._registration is not None:
            return False
        if (self.state_dir / "registration.json").exists() or self.settings.enrolment(self.task):
            return False
        if not self._no_code_logged:
            log.warning(
                "task %s: no enrolment code (%s) and no registration: not taking part",
                self.task, self.settings.task_code_file(self.task),
            )  # fmt: skip
            self._no_code_logged = True
        return True

    def ensure_registered(self) -> Registration:
        """Reuse the stored credential if the market still knows it with the same facts."""
        if self._registration is not None:
            return self._registration
        path = self.state_dir / "registration.json"
        if path.exists():
            stored = json.loads(path.read_text())
            reg = Registration(int(stored["client_id"]), str(stored["token"]))
            try:
                me = self.market.with_token(reg.token).me()
            except MarketError as exc:
                if exc.status != UNAUTHORIZED:
                    raise
                rejoined = self.rejoin_with_node_key(reg.client_id)
                if rejoined is not None:
                    return self.ensure_registered()  # the renewed token, its facts checked
                log.warning("stored credential refused by the market; registering again")
            else:
                if (me.type_name, me.data_size, me.cost) == (
                    self.facts.type_name,
                    self.facts.data_size,
                    self.facts.cost,
                ):
                    self._registration = reg
                    return reg
                log.warning("this device's facts changed since it registered; registering again")
        registered = self.market.register(
            ClientRegistration(
                name=self.settings.device_name(),
                enrolment_code=self.settings.enrolment(self.task),
                type_name=self.facts.type_name,
                data_size=self.facts.data_size,
                cost=self.facts.cost,
            )
        )
        reg = Registration(registered.id, registered.token)
        self._store(reg)
        log.info(
            "registered as client %d (task %s, type %s)",
            reg.client_id, self.task, self.facts.type_name,
        )  # fmt: skip
        self._registration = reg
        return reg

    def renew_if_expiring(self, reg: Registration) -> Registration:
        """Renew the market token before it expires (``token_renew_before_s``) and store the new
        one first: the market has revoked the old one."""
        market = self.market.with_token(reg.token)
        try:
            renewed = market.renew_token_if_expiring(self.settings.token_renew_before_s)
        except MarketError as exc:  # expired while the device could not reach the market
            if exc.status != UNAUTHORIZED:
                raise
            rejoined = self.rejoin_with_node_key(reg.client_id)
            if rejoined is None:
                raise
            return rejoined
        if renewed is None:
            return reg
        reg = Registration(reg.client_id, renewed.token)
        self._store(reg)
        log.info("renewed the market token (expires at %s)", renewed.expires_at)
        self._registration = reg
        return reg

    def rejoin_with_node_key(self, client_id: int) -> Registration | None:
        """A new token for ``client_id`` proven by this device's SuperNode key (the one it
        registered with the market), stored first; None when that is not possible (no key on
        the device, no key registered, a market that does not know the client): then the
        device registers anew with its enrolment code."""
        key = self.settings.node_key_path()
        if not key.is_file():
            return None
        try:
            renewed = self.market.with_token(None).renew_token_with_node_key(client_id, key)
        except MarketError as exc:
            if exc.status not in (UNAUTHORIZED, NOT_FOUND, CONFLICT):
                raise
            log.warning("could not renew the token with the node key: %s", exc.detail)
            return None
        reg = Registration(client_id, renewed.token)
        self._store(reg)
        log.info("renewed the expired market token with the node key (client %d)", client_id)
        self._registration = reg
        return reg

    def _store(self, reg: Registration) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        _write_private(
            self.state_dir / "registration.json",
            json.dumps({"client_id": reg.client_id, "token": reg.token}),
        )

    def ensure_node_key(self, reg: Registration) -> str:
        """Register this device's SuperNode public key with the market (made on first use), once
        per process unless the market's record differs; the key's SHA-256."""
        from edge.agent.supernode import node_public_key
        from mots.training.pki import fingerprint

        digest = fingerprint(node_public_key(self.settings))
        if self._node_key != digest:
            market = self.market.with_token(reg.token)
            if market.me().node_key_sha256 != digest:
                market.set_node_key(node_public_key(self.settings), self.settings.node_key_path())
                log.info("registered this device's SuperNode key %s…", digest[:16])
            self._node_key = digest
        return digest

    def step(self) -> Choice | None:
        """Poll once; when a round collects decisions and this device has not answered, answer."""
        if self.without_code():
            return None
        reg = self.renew_if_expiring(self.ensure_registered())
        try:
            self.ensure_node_key(reg)
        except (MarketError, OSError, ValueError) as exc:  # answering quotes must go on
            log.warning("SuperNode key not registered with the market (retried): %s", exc)
        market = self.market.with_token(reg.token)
        try:
            quote = market.quote()
        except MarketError as exc:
            if exc.status == UNAUTHORIZED:  # the market forgot us (a new database): register anew
                self._registration = None
                self._node_key = None
                (self.state_dir / "registration.json").unlink(missing_ok=True)
            raise
        self._beat()
        if (
            quote is None
            or quote.state is not RoundState.COLLECTING
            or quote.round_id in self._answered
        ):
            return None
        if market.decision(quote.round_id) is not None:
            self._answered.add(quote.round_id)
            return None
        u = float(self.utility.value(quote.epsilon))
        place = draw_place(quote, self.facts.type_name, reg.client_id)
        choice = self._fit(respond(self.facts, quote, u, place), market)
        choice = self._act(market, reg, quote.round_id, choice)
        self._answered.add(quote.round_id)
        self._record(quote.round_id, u, choice)
        log.info(
            "round %d: %s (%s; task %s)",
            quote.round_id, choice.strategy.value, choice.reason, self.task,
        )  # fmt: skip
        return choice

    def data_problem(self, market: MarketClient | None = None) -> str | None:
        """Why this device cannot train the market's task on its own data (``--data``), in plain
        words; None when its folder fits and holds at least its attested D, or when it names no
        folder at all (a device of the public-set layout)."""
        if not self.data:
            return None
        if self.task not in self.data:
            return f"no data for task {self.task} (--data names {', '.join(sorted(self.data))})"
        from mots.tasks.local_data import check_data

        try:
            spec = self._data_spec(market or self.market)
        except (MarketError, ValueError) as err:  # TaskFileError and pydantic's are ValueErrors
            return f"cannot learn what task {self.task}'s data looks like: {err}"
        check = check_data(self.task, spec, self.data[self.task], int(self.settings.data_size))
        return None if check.ok else check.summary()

    def _data_spec(self, market: MarketClient) -> DataSpec:
        """What the task's data looks like: its task file where the device has one (or the
        platform's image set of that name), else the market's stored task (an edge image ships
        no task files, and a task may be created at the market after the image was built;
        ``market`` carries the device's token: the route wants a principal)."""
        from mots.tasks.task_file import DataSpec, TaskFileError
        from mots.training.flower_messages import task_data_spec

        try:
            return DataSpec.model_validate(task_data_spec({}, self.task))
        except TaskFileError:
            stored = market.task(self.task).spec
        return DataSpec.model_validate(stored["data"])

    def _fit(self, choice: Choice, market: MarketClient | None = None) -> Choice:
        """A join becomes an abstention, with the reason logged, when the device's data does not
        fit the task: it never trains on something else."""
        if choice.strategy is not Strategy.JOIN:
            return choice
        problem = self.data_problem(market)
        if problem is None:
            return choice
        log.error("not joining: %s", problem)
        return Choice(Strategy.ABSTAIN, choice.payoffs, f"data does not fit: {problem}")

    def _act(
        self, market: MarketClient, reg: Registration, round_id: int, choice: Choice
    ) -> Choice:
        if choice.strategy is Strategy.BUY:
            try:  # one key per (client, round): a retry, even after a restart, books once
                market.buy(round_id, idempotency_key=f"edge-agent-{reg.client_id}-round-{round_id}")
                return choice
            except MarketError as exc:
                if exc.status != PAYMENT_REQUIRED:
                    raise
                choice = Choice(Strategy.ABSTAIN, choice.payoffs, f"cannot pay: {exc.detail}")
        try:
            market.declare(round_id, choice.strategy)
        except MarketError as exc:  # a join whose fee the wallet cannot hold (issue 37)
            if exc.status != PAYMENT_REQUIRED or choice.strategy is not Strategy.JOIN:
                raise
            choice = Choice(Strategy.ABSTAIN, choice.payoffs, f"cannot pay the fee: {exc.detail}")
            market.declare(round_id, choice.strategy)
        return choice

    def _record(self, round_id: int, utility: float, choice: Choice) -> None:
        body = {
            "round_id": round_id,
            "strategy": choice.strategy.value,
            "reason": choice.reason,
            "utility": utility,
            "payoffs": {s.value: v for s, v in choice.payoffs.items()},
        }
        (self.state_dir / "decision.json").write_text(json.dumps(body, indent=2))

    def _beat(self) -> None:
        """The device's heartbeat (the agent's health check reads it), whichever task polled."""
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        (self.settings.state_dir / "heartbeat").write_text(f"{time.time():.3f}\n")

    def run(
        self, max_steps: int | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        """Poll forever (or ``max_steps`` times); a failed poll is logged and retried."""
        run_agents([self], max_steps, sleep)


def run_agents(
    agents: list[Agent], max_steps: int | None = None, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Poll every task's agent in turn, then wait one poll interval; forever (or ``max_steps``
    times). A failed poll is logged with its task and retried; it never stops another task's."""
    steps = 0
    while max_steps is None or steps < max_steps:
        steps += 1
        for agent in agents:
            try:
                agent.step()
            except (MarketError, OSError, ValueError) as exc:
                log.error("poll failed (%s): %s", agent.task, exc)
            except Exception as exc:  # httpx transport errors and the like: keep polling
                log.error("poll failed (%s, %s): %s", agent.task, type(exc).__name__, exc)
        sleep(min(a.settings.poll_interval_s for a in agents))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
