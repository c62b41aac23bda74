"""`paddock e2b env`: E2B's SDKs pointed at this server only, the key only when asked."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from paddock.cli.main import main
from paddock.wire.keys import e2b_key, from_e2b_key


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
        "E2B_VOLUME_API_URL": "http://127.0.0.1:7423/e2b",
        "E2B_DOMAIN": "paddock.invalid",
        "E2B_HTTP_VERSION": "1.1",
    }
    assert "pdk_secret" not in out + err and "token create" in err
    assert main(["e2b", "env", "--with-token"]) == 0
    key = exported(capsys.readouterr().out)["E2B_API_KEY"]
    # In E2B's own key format, which SDK 2.45 checks for (its pattern, verbatim); the
    # server reads the token back from it.
    assert re.fullmatch(r"\Ae2b_[0-9a-f]+\Z", key) and from_e2b_key(key) == "pdk_secret"


@pytest.mark.parametrize(
    ("key", "token"),
    [
        ("pdk_abc", "pdk_abc"),
        ("e2b_pdk_abc", "pdk_abc"),
        (e2b_key("pdk_abc"), "pdk_abc"),
        ("e2b_" + b"not-a-token".hex(), "e2b_" + b"not-a-token".hex()),  # not ours: as is
        ("e2b_70 64", "e2b_70 64"),  # fromhex would take the space: never decoded
        ("e2b_" + "70646b5f" + "00" * 300, "e2b_" + "70646b5f" + "00" * 300),  # too long
        ("e2b_" + b"pdk_\n".hex(), "e2b_" + b"pdk_\n".hex()),
    ],
)
def test_keys_in_e2b_format_read_back_as_tokens(key: str, token: str) -> None:
    assert from_e2b_key(key) == token


def test_https_needs_no_http_version(
    logged_in: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PADDOCK_URL", "https://paddock.example.com")
    assert main(["e2b", "env", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["E2B_SANDBOX_URL"] == "https://paddock.example.com/e2b/sandbox"
    assert "E2B_HTTP_VERSION" not in found and "E2B_API_KEY" not in found
