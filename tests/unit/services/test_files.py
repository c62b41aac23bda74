"""A folder's listing (services/files.py, runtime/inbox.py) is parsed defensively: the
box's `find` is the box's, and whatever it prints is checked."""

from __future__ import annotations

from paddockd.runtime.inbox import records
from paddockd.services.files import MAX_ENTRIES, listing


def record(kind: str, leads: str, size: str, mode: str, mtime: str, link: str, name: str) -> bytes:
    # The in-box helper's layout: type, leads to, size, symbolic mode, octal mode, owner,
    # group, mtime, link target, path, uid, gid.
    fields = [kind, leads, size, "-", mode, "abc", "abc", mtime, link, "/config/" + name]
    return b"".join(f.encode() + b"\0" for f in [*fields, "1000", "1000"])


def test_a_listing_is_parsed_and_nonsense_is_dropped() -> None:
    out = (
        record("f", "f", "12", "644", "1700000000.5", "", "b.txt")
        + record("d", "d", "4096", "755", "1700000000.0", "", "a dir")
        + record("l", "d", "4", "777", "1700000000.0", "/etc", "etc-link")
        + record("l", "N", "4", "777", "1700000000.0", "gone", "broken")
        + record("f", "f", "x", "644", "1", "", "bad-size")  # not a number
        + record("f", "f", "1", "644", "1", "", "a/b")  # deeper than the folder's entries
        + record("f", "f", "1", "644", "1", "", "<img src=x onerror=alert(1)>")
        + b"f\0f\0cut short"  # an unfinished record (the cap)
    )
    found = [i for i in records(out) if i.path.count("/") == 2]
    names = [e.name for e in listing("/config", found, False).entries]
    assert names == ["<img src=x onerror=alert(1)>", "a dir", "b.txt", "broken", "etc-link"]
    by = {e.name: e for e in listing("/config", found, False).entries}
    assert (by["b.txt"].type, by["b.txt"].size, by["b.txt"].mode) == ("file", 12, 0o644)
    assert by["a dir"].type == "dir" and by["a dir"].target is None
    assert (by["etc-link"].target, by["etc-link"].target_type) == ("/etc", "dir")
    assert by["broken"].target_type == "missing"


def test_a_listing_past_the_cap_says_so() -> None:
    out = b"".join(
        record("f", "f", "1", "644", "1", "", f"f{i:05d}") for i in range(MAX_ENTRIES + 1)
    )
    found = records(out)
    shown = listing("/config", found, len(found) > MAX_ENTRIES)
    assert len(shown.entries) == MAX_ENTRIES and shown.truncated
