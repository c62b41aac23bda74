"""Accounts against a real paddockd: the owner's one-time setup link, login with its
throttle, session cookies, CSRF on forms and on cookie-authenticated API calls, logout and
password changes. Each test has a server of its own (a server has one owner)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time

import httpx
import pytest

from ..harness import PADDOCKD, Server

PASSWORD = "correct horse battery"


def setup_link(server: Server) -> tuple[int, str, str]:
    done = subprocess.run(
        [PADDOCKD, "--config", str(server.config), "setup-link"], capture_output=True, text=True
    )
    return done.returncode, done.stdout.strip(), done.stderr


def csrf_of(page: str) -> str:
    found = re.search(r"name=csrf value='([^']+)'", page)
    assert found, page
    return found.group(1)


def web(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, follow_redirects=False, timeout=30)


def create_owner(server: Server, username: str = "ada") -> None:
    code, link, _ = setup_link(server)
    assert code == 0
    with web(server) as browser:
        form = browser.get(link)
        done = browser.post(
            link,
            data={
                "csrf": csrf_of(form.text),
                "username": username,
                "new": PASSWORD,
                "again": PASSWORD,
            },
        )
        assert done.status_code == 303, done.text


def log_in(
    server: Server, browser: httpx.Client, username: str = "ada", password: str = PASSWORD
) -> httpx.Response:
    page = browser.get("/login")
    return browser.post(
        "/login", data={"csrf": csrf_of(page.text), "username": username, "password": password}
    )


def test_the_setup_link_makes_one_owner_once(make_server: type[Server]) -> None:
    server = make_server()
    code, link, note = setup_link(server)
    assert code == 0 and re.fullmatch(rf"{server.url}/setup/[\w-]{{40,}}", link), link
    assert "works once" in note
    with web(server) as browser:
        form = browser.get(link)
        assert form.status_code == 200 and "Create the owner" in form.text
        # The rules are on the form, before anyone trips on them.
        assert "12 characters or more, not containing the username" in form.text
        assert form.headers["x-frame-options"] == "DENY"
        csrf = csrf_of(form.text)
        # Weak input is refused and spends nothing.
        for fields, message in [
            ({"username": "ada", "new": "short", "again": "short"}, "at least 12"),
            ({"username": "ada", "new": PASSWORD, "again": PASSWORD + "x"}, "differ"),
            ({"username": "Bad Name!", "new": PASSWORD, "again": PASSWORD}, "a username is"),
            (
                {"username": "ada", "new": "ada-is-my-password", "again": "ada-is-my-password"},
                "username",
            ),
        ]:
            refused = browser.post(link, data={"csrf": csrf_of(browser.get(link).text), **fields})
            assert refused.status_code == 400 and message in refused.text, refused.text
        # Without the form's CSRF value (another site posting it) nothing happens either.
        forged = httpx.post(link, data={"username": "eve", "new": PASSWORD, "again": PASSWORD})
        assert forged.status_code == 400
        made = browser.post(
            link,
            data={
                "csrf": csrf_of(browser.get(link).text),
                "username": "Ada",
                "new": PASSWORD,
                "again": PASSWORD,
            },
        )
        # The new owner is logged in at once, not sent to a login form.
        assert made.status_code == 303 and made.headers["location"] == "/"
        assert any(c.startswith("paddock_session=") for c in made.headers.get_list("set-cookie"))
        home = browser.get("/account")
        assert home.status_code == 200 and "Logged in as <b>ada</b> (owner)" in home.text
        assert csrf
        # The link is dead now, and no second owner can be made by any link.
        again = browser.get(link)
        assert again.status_code == 410 and "has been used" in again.text
        code, _, note = setup_link(server)
        assert code == 1 and "owner account exists" in note


def test_a_new_link_voids_the_old_and_links_expire(make_server: type[Server]) -> None:
    server = make_server()
    _, first, _ = setup_link(server)
    _, second, _ = setup_link(server)
    with web(server) as browser:
        replaced = browser.get(first)
        # A dead end no more: the page says how to get a link that works.
        assert replaced.status_code == 404 and "sudo paddockd setup-link" in replaced.text
        assert browser.get(second).status_code == 200
        db = sqlite3.connect(server.dir / "data" / "paddock.db")
        db.execute("UPDATE links SET expires_at = ?", (time.time() - 1,))
        db.commit()
        db.close()
        expired = browser.get(second)
        assert expired.status_code == 410 and "sudo paddockd setup-link" in expired.text


def test_login_sets_a_safe_session_cookie_and_logout_ends_it(make_server: type[Server]) -> None:
    server = make_server()
    create_owner(server)
    with web(server) as browser:
        done = log_in(server, browser)
        assert done.status_code == 303 and done.headers["location"] == "/"
        cookie = next(
            c for c in done.headers.get_list("set-cookie") if c.startswith("paddock_session=")
        )
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
        account = browser.get("/account")
        assert account.status_code == 200 and "Logged in as <b>ada</b> (owner)" in account.text
        csrf = csrf_of(account.text)
        # The session works for the API: reads freely, changes with its CSRF token only.
        assert browser.get("/v1/boxes").status_code == 200
        refused = browser.post("/v1/drives", json={"name": "d1"})
        assert refused.status_code == 401 and "CSRF" in refused.json()["error"]["message"]
        assert browser.get("/v1/status").status_code == 200
        # Logging out without the form's token (a forged form) does nothing.
        assert browser.post("/logout", data={"csrf": "nope"}).status_code == 400
        assert browser.get("/account").status_code == 200
        out = browser.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303
        session = cookie.split(";")[0].split("=", 1)[1]
        stale = httpx.get(f"{server.url}/v1/boxes", cookies={"paddock_session": session})
        assert stale.status_code == 401
        assert (
            httpx.get(f"{server.url}/account", cookies={"paddock_session": session}).status_code
            == 303
        )


def test_behind_https_the_cookies_are_secure(make_server: type[Server]) -> None:
    server = make_server()
    create_owner(server)
    https = {"X-Forwarded-Proto": "https"}  # as Caddy sends it, from loopback
    page = httpx.get(f"{server.url}/login", headers=https)
    login_cookie = page.headers["set-cookie"]
    # The __Host- prefix: no subdomain (a preview's PORT-BOX.HOST) can plant one.
    assert login_cookie.startswith("__Host-paddock_login_csrf=") and "Secure" in login_cookie
    assert "Path=/" in login_cookie and "Domain" not in login_cookie
    # (A client on plain HTTP would not send a Secure cookie back: pass it by hand.)
    done = httpx.post(
        f"{server.url}/login",
        headers={**https, "Cookie": login_cookie.split(";")[0]},
        data={"csrf": csrf_of(page.text), "username": "ada", "password": PASSWORD},
    )
    assert done.status_code == 303, done.text
    cookie = next(
        c for c in done.headers.get_list("set-cookie") if c.startswith("__Host-paddock_session=")
    )
    assert "Secure" in cookie and "HttpOnly" in cookie and "Path=/" in cookie
    # A same-named cookie without the prefix (as a subdomain could set) is not a session.
    value = cookie.split(";")[0].split("=", 1)[1]
    planted = httpx.get(f"{server.url}/v1/boxes", headers=https, cookies={"paddock_session": value})
    assert planted.status_code == 401
    assert (
        httpx.get(
            f"{server.url}/v1/boxes", headers=https, cookies={"__Host-paddock_session": value}
        ).status_code
        == 200
    )


def test_failed_logins_slow_down_and_never_say_which_part_was_wrong(
    make_server: type[Server],
) -> None:
    server = make_server()
    create_owner(server)
    with web(server) as browser:
        wrong_password = log_in(server, browser, "ada", "not the password!")
        no_such_user = log_in(server, browser, "nobody", "not the password!")
        assert wrong_password.status_code == no_such_user.status_code == 401
        assert "wrong username or password" in wrong_password.text
        assert "wrong username or password" in no_such_user.text
        statuses = [
            log_in(server, browser, "ada", f"guess number {i}").status_code for i in range(3)
        ]
        assert statuses[-1] == 429, statuses
        # Even the right password waits now: a flood cannot find it.
        throttled = log_in(server, browser)
        assert throttled.status_code == 429 and "try again in" in throttled.text


def test_a_password_change_ends_the_other_sessions(make_server: type[Server]) -> None:
    server = make_server()
    create_owner(server)
    new = "another long passphrase"
    with web(server) as here, web(server) as elsewhere:
        log_in(server, here)
        log_in(server, elsewhere)
        page = here.get("/account")
        wrong = here.post(
            "/account/password",
            data={
                "csrf": csrf_of(page.text),
                "password": "wrong wrong wrong",
                "new": new,
                "again": new,
            },
        )
        assert wrong.status_code == 400 and "current password is wrong" in wrong.text
        done = here.post(
            "/account/password",
            data={"csrf": csrf_of(page.text), "password": PASSWORD, "new": new, "again": new},
        )
        assert done.status_code == 200 and "Password changed" in done.text
        assert here.get("/account").status_code == 200
        assert elsewhere.get("/account").status_code == 303
    with web(server) as browser:
        assert log_in(server, browser, password=new).status_code == 303


@pytest.mark.parametrize("path", ["/account", "/v1/boxes"])
def test_no_session_no_access(make_server: type[Server], path: str) -> None:
    server = make_server()
    answer = httpx.get(f"{server.url}{path}", cookies={"paddock_session": "forged"})
    assert answer.status_code in (303, 401)
