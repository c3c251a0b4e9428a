"""Where the client's settings come from: flags > environment > profile > endpoints.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.client.config import ConfigError, resolve, save_profile


def _endpoints(folder: Path, market: str = "http://ep-market") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    body = {
        "market": market,
        "pricing": "http://ep-pricing",
        "orchestration": "http://ep-rounds",
        "prometheus": None,
        "operator_token": "ep-op",
    }
    (folder / "endpoints.json").write_text(json.dumps(body))
    return folder


def _profiles(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return {"MOTS_PROFILES": str(path)}


def test_each_setting_comes_from_the_first_source_that_has_it(tmp_path: Path) -> None:
    """A flag beats the environment, which beats the profile, which beats endpoints.json."""
    work = _endpoints(tmp_path / "work")
    env = _profiles(
        tmp_path,
        f'default = "lab"\n[profiles.lab]\nworkdir = "{work}"\ntoken = "prof-tok"\n'
        'orchestration_url = "http://prof-rounds"\n',
    )
    env["MOTS_ORCHESTRATION_URL"] = "http://env-rounds"
    c = resolve({"token": "flag-tok"}, env=env)
    assert (c.market_url, c.orchestration_url, c.token, c.operator_token) == (
        "http://ep-market",
        "http://env-rounds",
        "flag-tok",
        None,  # a client's profile: never the operator's token from endpoints.json
    )
    assert c.sources["token"] == "flag"
    assert c.sources["orchestration_url"] == "env MOTS_ORCHESTRATION_URL"
    assert c.sources["market_url"] == str(work / "endpoints.json")
    env.pop("MOTS_ORCHESTRATION_URL")
    c = resolve({}, env=env)
    assert (c.orchestration_url, c.token) == ("http://prof-rounds", "prof-tok")
    assert c.sources["token"] == "profile lab"


def test_the_work_folder_comes_from_the_flag_then_mots_workdir(tmp_path: Path) -> None:
    """--workdir, else MOTS_WORKDIR; with neither and nothing else, settings are unset and
    ``require`` says how to give them."""
    a = _endpoints(tmp_path / "a", "http://a")
    b = _endpoints(tmp_path / "b", "http://b")
    env = {"MOTS_WORKDIR": str(b), "MOTS_PROFILES": str(tmp_path / "none.toml")}
    assert resolve({}, workdir=a, env=env).market_url == "http://a"
    assert resolve({}, env=env).market_url == "http://b"
    empty = resolve({}, env={**env, "MOTS_WORKDIR": str(tmp_path / "nothing")})
    assert empty.market_url is None
    with pytest.raises(ConfigError, match="market_url: not configured; pass --market-url"):
        empty.require("market_url")
    with pytest.raises(ConfigError, match="MOTS_TOKEN"):
        empty.require("token")


def test_bad_profiles_and_endpoints_are_config_errors(tmp_path: Path) -> None:
    """An unknown profile, an unknown key, unreadable TOML or JSON: errors naming the file."""
    env = _profiles(tmp_path, '[profiles.a]\nmarket_url = "http://a"\nmarket = "typo"\n')
    with pytest.raises(ConfigError, match=re.escape("profiles.a.market: unknown setting")):
        resolve({}, profile="a", env=env)
    with pytest.raises(ConfigError, match=re.escape("profile 'b': no [profiles.b] table")):
        resolve({}, profile="b", env=env)
    env = _profiles(tmp_path, "this is = = not toml")
    with pytest.raises(ConfigError, match="not a readable TOML file"):
        resolve({}, env=env)
    with pytest.raises(ConfigError, match="does not exist"):
        resolve({}, env={"MOTS_PROFILES": str(tmp_path / "x.toml"), "MOTS_PROFILE": "p"})
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "endpoints.json").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not a readable endpoints file"):
        resolve({}, workdir=tmp_path / "w", env={"MOTS_PROFILES": str(tmp_path / "x.toml")})


def test_saved_profiles_are_read_back_and_private(tmp_path: Path) -> None:
    """save_profile writes a TOML the resolver reads (other profiles and the default kept), the
    file readable by its owner only; bad names and foreign keys are refused."""
    env = _profiles(tmp_path, 'default = "a"\n[profiles.a]\nmarket_url = "http://a"\n')
    path = save_profile("b-2", {"token": 'to"k', "workdir": str(tmp_path)}, env=env)
    assert path.stat().st_mode & 0o077 == 0
    assert resolve({}, env=env).market_url == "http://a"
    assert resolve({}, profile="b-2", env=env).token == 'to"k'
    save_profile("b-2", {"token": "new"}, env=env)
    again = resolve({}, profile="b-2", env=env)
    assert again.token == "new" and again.sources["token"] == "profile b-2"
    with pytest.raises(ConfigError, match="letters, digits"):
        save_profile("a b", {"token": "x"}, env=env)
    with pytest.raises(ConfigError, match="unknown setting"):
        save_profile("c", {"password": "x"}, env=env)
    bad = _profiles(tmp_path, 'colour = "blue"\n')
    with pytest.raises(ConfigError, match="would drop"):
        save_profile("c", {"token": "x"}, env=bad)


def test_a_client_profile_never_reads_the_operator_token(tmp_path: Path) -> None:
    """Issue 26: under a client profile (explicit role, or a token and no operator token) the
    operator token is read from no source: not endpoints.json, not the environment, not a flag;
    an operator profile and no profile still read it."""
    work = _endpoints(tmp_path / "work")
    env = _profiles(
        tmp_path,
        f'[profiles.alice]\nworkdir = "{work}"\ntoken = "alice-tok"\n'
        f'[profiles.bob]\nrole = "client"\nmarket_url = "http://m"\ntoken = "bob-tok"\n'
        f'[profiles.op]\nrole = "operator"\nworkdir = "{work}"\n',
    )
    env.update(MOTS_WORKDIR=str(work), MOTS_OPERATOR_TOKEN="env-op")
    for name in ("alice", "bob"):
        c = resolve({"operator_token": "flag-op"}, profile=name, env=env)
        assert (c.role, c.operator_token, c.profile) == ("client", None, name)
        assert c.sources["operator_token"] == f"none: profile {name} is a client's"
    c = resolve({}, profile="op", env={**env, "MOTS_OPERATOR_TOKEN": ""})
    assert (c.role, c.operator_token) == ("operator", "ep-op")
    assert resolve({}, env=env).operator_token == "env-op"
    bad = _profiles(tmp_path, '[profiles.x]\nrole = "admin"\n')
    with pytest.raises(ConfigError, match=r"profiles\.x\.role: must be one of client, operator"):
        resolve({}, profile="x", env=bad)


@given(
    st.lists(
        st.sampled_from([*"ab1:/[]@%?#. -_\\x\u00e9", "http://", "https://", "::", "99999"]),
        max_size=12,
    ).map(lambda parts: "http://" + "".join(parts))
)
@settings(max_examples=120, deadline=None)
def test_any_url_is_refused_as_a_setting_or_usable(url: str) -> None:
    """Whatever URL a user gives (broken IPv6 host, bad port, no host, blanks): a ConfigError that
    names the setting (the CLI's one-line usage error), or a URL httpx can build a request on:
    never an exception from inside httpx (issue 26: a 34-line traceback)."""
    import httpx

    try:
        c = resolve({"market_url": url}, env={"MOTS_PROFILES": "/nonexistent/profiles.toml"})
    except ConfigError as exc:
        assert str(exc).startswith("market_url: ")
        return
    assert c.market_url is not None
    httpx.Client(base_url=c.market_url).build_request("GET", "/v1/me")


def test_a_url_with_v1_is_refused_naming_its_source(tmp_path: Path) -> None:
    """Issue 40: a base URL ending in /v1 (the client adds it) is refused before any request,
    with the URL to give instead and where the wrong one came from."""
    env = {"MOTS_PROFILES": str(tmp_path / "p.toml"), "MOTS_MARKET_URL": "http://h:8101/v1/"}
    with pytest.raises(ConfigError, match=r"market_url: give the base URL http://h:8101, .*env"):
        resolve({}, workdir=tmp_path, env=env)
    with pytest.raises(ConfigError, match=r"without /v1.*profile bob"):
        save_profile("bob", {"market_url": "http://h:8101/v1"}, env=env)


def test_profiles_are_removed_and_made_default(tmp_path: Path) -> None:
    """`mots profile rm/set --default`'s functions: the default follows, the file stays private."""
    from mots.client.config import read_profiles, remove_profile, set_default_profile

    env = {"MOTS_PROFILES": str(tmp_path / "p.toml")}
    save_profile("a", {"market_url": "http://h:1", "token": "t"}, env=env)
    save_profile("b", {"workdir": "/w", "role": "operator"}, env=env)
    set_default_profile("a", env=env)
    path, default, profiles = read_profiles(env)
    assert default == "a" and set(profiles) == {"a", "b"}
    assert (
        resolve({}, workdir=tmp_path, env=env).origin("market_url") == "market_url from profile a"
    )
    remove_profile("a", env=env)
    path, default, profiles = read_profiles(env)
    assert default is None and set(profiles) == {"b"} and path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(ConfigError, match="profile 'a': no"):
        remove_profile("a", env=env)
