"""AST checks that keep one shape per piece of data on the round path (issue 38): no class there
restates most of another project class's fields, no function only forwards its parameters to
another project function, and no money field is annotated ``float``. Each checker is shown to
fail on a planted source string before it is run on the repository."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from tests.source_ast import parse

ROOT = Path(__file__).resolve().parents[1]
PROJECT = [ROOT / "services", ROOT / "shared" / "mots"]
ROUND_PATH = [
    "services/orchestration",
    "services/pricing",
    "services/market/rounds.py",
    "services/market/worker.py",
    "shared/mots/platform/contracts.py",
    "shared/mots/platform/quotes.py",
    "shared/mots/platform/api/rounds.py",
    "shared/mots/platform/api/pricing.py",
]
"""The files a round's data passes through (the orchestration, the market's round tasks, the
pricing, the contracts)."""
RESTATED_SHARE = 0.8
MIN_FIELDS = 4
"""A class of fewer fields (a reference, a pair) may coincide with another without restating it."""
MONEY_FIELDS = {
    "amount", "balance", "captured_price", "captured_rewards", "charges", "incentive_cost",
    "payments", "price", "refunds", "reward", "rewards", "rewards_paid", "subsidy",
    "subsidy_budget", "surplus",
}  # fmt: skip
"""Field names that hold money (a type's cost C_i is a scenario parameter, a float by design)."""


def _fields(cls: ast.ClassDef) -> set[str]:
    """The names a class body declares with an annotation (pydantic, dataclass, TypedDict and
    SQLAlchemy ``Mapped`` fields alike), ``ClassVar`` and private names left out."""
    out = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
            if not name.startswith("_") and "ClassVar" not in ast.unparse(node.annotation):
                out.add(name)
    return out


def _bases(cls: ast.ClassDef) -> set[str]:
    return {ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases}


def _classes(source: str, where: str) -> list[tuple[str, ast.ClassDef]]:
    tree = parse(source)
    return [(where, n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def restated(
    checked: list[tuple[str, ast.ClassDef]], every: list[tuple[str, ast.ClassDef]]
) -> list[str]:
    """``A restates B``: a checked class holding at least 80% of another class's fields (B of at
    least four), without extending it (or being extended by it)."""
    found = []
    for where, a in checked:
        fa = _fields(a)
        for other, b in every:
            fb = _fields(b)
            same = (where, a.name) == (other, b.name)
            if same or len(fb) < MIN_FIELDS or b.name in _bases(a) or a.name in _bases(b):
                continue
            if len(fa & fb) >= RESTATED_SHARE * len(fb):
                found.append(
                    f"{where}:{a.name} restates {other}:{b.name} ({len(fa & fb)}/{len(fb)})"
                )
    return sorted(found)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return [n for n in names if n not in ("self", "cls")]


def _body(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return body


def _dotted(node: ast.expr) -> bool:
    """A name or a dotted name (``send``, ``self._call``, ``metrics.ROUND``)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _passed(arg: ast.expr, params: set[str]) -> bool:
    """An argument that only passes values on: a name (a parameter or a constant such as a
    TaskSpec), an attribute of ``self``, or a payload built from parameters alone
    (``RoundRef(round_id=round_id)``)."""
    if isinstance(arg, ast.Call):
        inner = [*arg.args, *(k.value for k in arg.keywords)]
        root = arg.func
        while isinstance(root, ast.Attribute):
            root = root.value
        return (
            _dotted(arg.func)
            and not (isinstance(root, ast.Name) and root.id in params)
            and bool(inner)
            and all(isinstance(a, ast.Name) and a.id in params for a in inner)
        )
    if isinstance(arg, ast.Attribute):
        return isinstance(arg.value, ast.Name) and arg.value.id == "self"
    return isinstance(arg, ast.Name)


def forwarders(source: str, where: str) -> list[str]:
    """Functions whose whole body hands their parameters, unchanged, to one other call, alone or
    wrapped in the payload that call takes, beside constants (``return f(a, b)``, ``f(a, b=b)``,
    ``return self._call(SPEC, RoundRef(round_id=round_id))``): a second name for that call."""
    found = []
    for fn in ast.walk(parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body, params = _body(fn), _params(fn)
        if len(body) != 1 or not params or fn.decorator_list:
            continue
        stmt = body[0]
        call = stmt.value if isinstance(stmt, ast.Return | ast.Expr) else None
        if not isinstance(call, ast.Call) or not _dotted(call.func):
            continue
        args = [*call.args, *(k.value for k in call.keywords)]
        used = {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}
        if all(_passed(a, set(params)) for a in args) and set(params) <= used:
            found.append(f"{where}:{fn.name} only forwards to {ast.unparse(call.func)}")
    return sorted(found)


def float_money(source: str, where: str) -> list[str]:
    """Money fields annotated with ``float`` (alone, optional, in a list or a dict)."""
    found = []
    for cls in ast.walk(parse(source)):
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in cls.body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id in MONEY_FIELDS
                and any(
                    isinstance(n, ast.Name) and n.id == "float" for n in ast.walk(node.annotation)
                )
            ):
                found.append(f"{where}:{cls.name}.{node.target.id}: {ast.unparse(node.annotation)}")
    return found


def _files(roots: list[Path], repo: Path = ROOT) -> list[Path]:
    """The ``.py`` files git tracks under ``roots`` (files or folders of ``repo``), alembic's left
    out. Only tracked files: a test that writes a module into the tree for a while (a planted
    class, a generated file) is not read as the project's, whichever test runs beside it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *(r.relative_to(repo).as_posix() for r in roots)],
        cwd=repo, capture_output=True, check=True, text=True,
    ).stdout  # fmt: skip
    out = [repo / name for name in sorted(set(listed.split("\0"))) if name.endswith(".py")]
    return [p for p in out if "alembic" not in p.parts and p.is_file()]


def _round_path() -> list[tuple[str, str]]:
    files = _files([ROOT / p for p in ROUND_PATH])
    return [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in files]


def _project_classes() -> list[tuple[str, ast.ClassDef]]:
    out = []
    for p in _files(PROJECT):
        out.extend(_classes(p.read_text(), p.relative_to(ROOT).as_posix()))
    return out


def test_only_the_files_git_tracks_are_read(tmp_path: Path) -> None:
    """A module another test writes into the tree while this one runs (untracked) is not read;
    the tracked ones under the roots are, a single file named as a root too."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    (tmp_path / "pkg" / "alembic").mkdir(parents=True)
    for name in ("pkg/a.py", "pkg/alembic/env.py", "pkg/notes.md", "one.py"):
        (tmp_path / name).write_text("x = 1\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    (tmp_path / "pkg" / "planted.py").write_text("class Planted: ...\n")
    got = _files([tmp_path / "pkg", tmp_path / "one.py"], repo=tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in got] == ["one.py", "pkg/a.py"]


PLANTED_RECORD = """
from pydantic import BaseModel
class Result(BaseModel):
    epsilon: float
    losses: list[float]
    artifact_path: str
    seconds: float
class Record(BaseModel):
    epsilon: float
    losses: list[float]
    artifact_path: str
    seconds: float
    dropped: list[int]
class Extended(Result):
    dropped: list[int]
"""


def test_the_restated_fields_check_fails_on_a_planted_copy() -> None:
    """A record that copies all four fields of a model is caught (and the model, holding four of
    the record's five, restates it back); one that extends the model is not."""
    classes = _classes(PLANTED_RECORD, "planted.py")
    assert restated(classes, classes) == [
        "planted.py:Record restates planted.py:Result (4/4)",
        "planted.py:Result restates planted.py:Record (4/5)",
    ]


def test_the_forwarding_check_fails_on_a_planted_forwarder() -> None:
    """A method that only passes its parameters on is caught, and so is one that only wraps them
    in the payload of a contract task (as ``CeleryRoundServices`` did, issue 38); one that
    computes something from them, or drops one, is not."""
    source = '''
class Services:
    def settle(self, payload):
        """The settle task."""
        return self._call(payload)
    def population(self, round_id):
        return self._call(MARKET_POPULATION, RoundRef(round_id=round_id))
    def evaluate(self, request):
        return self._call(EVALUATION_EVALUATE, request, self.evaluate_timeout_s)
    def next_round(self, round_id):
        return self._call(MARKET_POPULATION, RoundRef(round_id=round_id + 1))
    def close(self, round_id, note):
        return self._call(MARKET_CLOSE_ROUND, RoundRef(round_id=round_id))
def train(request, timeout):
    run(timeout=timeout, request=request)
'''
    assert forwarders(source, "planted.py") == [
        "planted.py:evaluate only forwards to self._call",
        "planted.py:population only forwards to self._call",
        "planted.py:settle only forwards to self._call",
        "planted.py:train only forwards to run",
    ]


def test_the_float_money_check_fails_on_a_planted_float_price() -> None:
    """``price: float | None`` and ``rewards: list[float]`` are caught; a float cost is not."""
    source = """
class Terms:
    price: float | None
    rewards: list[float]
    incentive_cost: Decimal
    cost: float
"""
    assert float_money(source, "planted.py") == [
        "planted.py:Terms.price: float | None",
        "planted.py:Terms.rewards: list[float]",
    ]


def test_no_money_field_on_the_round_path_is_a_float() -> None:
    """Money stays ``Money`` (or ``QuotedMoney``) from the quote to the summary."""
    found = [f for where, source in _round_path() for f in float_money(source, where)]
    assert found == []


def test_no_function_on_the_round_path_only_forwards_its_parameters() -> None:
    """A function that adds nothing to the call it makes is a second name for it."""
    found = [f for where, source in _round_path() for f in forwarders(source, where)]
    assert found == []


KNOWN_RESTATED: set[str] = set()
"""The restatements left on the round path: none since issue 38's third pass (RoundTerms and
PricingResult, TrainingRecord and TrainResult, RoundQuote and PricingResult went first; then the
orchestration's round rows became the table the machine's RoundRecord is read from, the record
extending the RoundUpdate it applies, and the round API's bodies built from it; PricingResult,
RoundSummary and the economics' SocialOptimum came to extend one generic SocialState). Kept as a
set so that a new one fails the check: a ratchet, not an allowance."""


def test_no_class_on_the_round_path_restates_another_projects_class() -> None:
    """Records extend the contract model they store (``RoundTerms`` a ``PricingResult``,
    ``TrainingRecord`` a ``TrainResult``, ``RoundRecord`` a ``RoundUpdate``) instead of copying
    its fields."""
    every = _project_classes()
    checked = [c for where, source in _round_path() for c in _classes(source, where)]
    assert set(restated(checked, every)) == KNOWN_RESTATED
