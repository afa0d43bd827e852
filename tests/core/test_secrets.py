"""Secrets stay where they belong.

`TRAINKIT_API_TOKEN` is the web API's alone: no job and no warm inference worker gets
it. A token no client could send is refused when the settings are read. The warm
worker's own token check answers 401 to any header, never a traceback.
"""

from __future__ import annotations

import http.client
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import UsageError
from trainkit_core.local.inference_server import TOKEN_HEADER, LocalInferenceServer, worker_dir
from trainkit_core.local.warm_worker import token_ok
from trainkit_core.settings import ApiSettings, Settings, child_environ

TOKEN = "api-token-never-in-a-child-9f3e"

needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/<pid>/environ")


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def test_child_environ_leaves_the_api_token_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_API_TOKEN", TOKEN)
    settings = Settings.from_env()
    assert settings.to_env()["TRAINKIT_API_TOKEN"] == TOKEN  # the settings still carry it...
    env = child_environ(settings)
    assert "TRAINKIT_API_TOKEN" not in env and TOKEN not in env.values()  # ...a child does not
    assert env["TRAINKIT_HOME"] == str(settings.provider.home)


@pytest.mark.slow
@needs_proc
def test_a_job_process_does_not_get_the_api_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINKIT_API_TOKEN", TOKEN)
    provider = get_provider("local", Settings.from_env())
    release = tmp_path / "release"
    handle = provider.spawn("sleep", seconds=120, until_file=str(release), result="ok")
    try:
        deadline = time.monotonic() + 60
        while handle.status().state != "running" or handle.pid is None:
            assert time.monotonic() < deadline, handle.status()
            time.sleep(0.05)
        env = environ_of(handle.pid)
        assert "TRAINKIT_HOME" in env  # it is the job's environment we read
        assert "TRAINKIT_API_TOKEN" not in env and TOKEN not in env.values()
    finally:
        release.touch()
    assert handle.wait(timeout=60) == "ok"


@needs_proc
def test_the_warm_worker_lacks_the_token_and_answers_401_to_any_header(
    monkeypatch: pytest.MonkeyPatch, trainkit_home: Path
) -> None:
    monkeypatch.setenv("TRAINKIT_API_TOKEN", TOKEN)
    record = LocalInferenceServer(trainkit_home, idle_timeout_s=20).ensure()
    env = environ_of(record["pid"])
    assert "TRAINKIT_API_TOKEN" not in env and TOKEN not in env.values()

    for value in (b"\xc3\xa9t\xc3\xa9", b"\xff\xfe", "é".encode("latin-1") + record["token"].encode(), b""):
        conn = http.client.HTTPConnection("127.0.0.1", record["port"], timeout=10)
        conn.putrequest("GET", "/health")
        conn.putheader(TOKEN_HEADER, value)
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 401, value
        response.read()
        conn.close()
    log = (worker_dir(trainkit_home) / "worker.log").read_text(errors="replace")
    assert "Traceback" not in log


def test_token_check_compares_any_text() -> None:
    assert token_ok("abc", "abc")
    assert not token_ok(None, "abc") and not token_ok("", "abc")
    assert not token_ok("é", "abc") and not token_ok("\udcff", "abc") and not token_ok("abç", "abç" + "x")


@pytest.mark.parametrize("token", [" ", "   ", "\t", "\n", " \t\r\n ", " tok", "tok\n", "\ttok"])
def test_a_token_no_client_could_send_is_refused(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    with pytest.raises(ValueError):
        ApiSettings(api_token=token)
    monkeypatch.setenv("TRAINKIT_API_TOKEN", token)
    with pytest.raises(UsageError, match="TRAINKIT_API_TOKEN") as caught:
        Settings.from_env()
    assert token.strip() == "" or token.strip() not in caught.value.message


def test_an_empty_token_is_still_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "")
    assert Settings.from_env().api.api_token is None


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("demo", "demo"),
        ("trained/run-20260101-000000-abcdef", "trained/run-20260101-000000-abcdef"),
        ("a b", "NAME"),
        ("x; rm -rf ~", "NAME"),
        ("$(id)", "NAME"),
        ("`id`", "NAME"),
        ("-rf", "NAME"),
        ("../etc", "NAME"),
        ("", "NAME"),
        ("é", "NAME"),
        (None, "NAME"),
        ("a" * 200, "NAME"),
    ],
)
def test_hints_put_only_plain_words_into_commands(value: object, shown: str) -> None:
    """No hint turns raw input into a command line: anything but a plain word is a placeholder."""
    from trainkit_core.errors import hint_word

    assert hint_word(value, "NAME") == shown
