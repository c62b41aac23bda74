"""`paddock e2b env`: E2B's SDKs pointed at this server only, the key only when asked."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from paddock.cli.main import main


@pytest.fixture
def logged_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"url": "http://127.0.0.1:7423/", "token": "pdk_secret"}))
    monkeypatch.setenv("PADDOCK_CONFIG", str(config))
    monkeypatch.delenv("PADDOCK_URL", raising=False)
    monkeypatch.delenv("PADDOCK_TOKEN", raising=False)


def exported(text: str) -> dict[str, str]:
    pairs = [shlex.split(line)[1].split("=", 1) for line in text.splitlines()]
    return {name: value for name, value in pairs}


def test_every_url_is_this_server_and_the_key_needs_asking(
    logged_in: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["e2b", "env"]) == 0
    out, err = capsys.readouterr()
    found = exported(out)
    assert found == {
        "E2B_API_URL": "http://127.0.0.1:7423/e2b",
        "E2B_SANDBOX_URL": "http://127.0.0.1:7423/e2b/sandbox",
        "E2B_DOMAIN": "paddock.invalid",
        "E2B_HTTP_VERSION": "1.1",
    }
    assert "pdk_secret" not in out + err and "token create" in err
    assert main(["e2b", "env", "--with-token"]) == 0
    assert exported(capsys.readouterr().out)["E2B_API_KEY"] == "pdk_secret"


def test_https_needs_no_http_version(
    logged_in: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PADDOCK_URL", "https://paddock.example.com")
    assert main(["e2b", "env", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["E2B_SANDBOX_URL"] == "https://paddock.example.com/e2b/sandbox"
    assert "E2B_HTTP_VERSION" not in found and "E2B_API_KEY" not in found
