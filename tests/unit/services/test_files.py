"""A folder's listing (services/files.py) is parsed defensively: the box's `find` is the
box's, and whatever it prints is checked."""

from __future__ import annotations

from paddockd.services.files import MAX_ENTRIES, parse_listing


def record(*fields: str | bytes) -> bytes:
    return b"".join((f if isinstance(f, bytes) else f.encode()) + b"\0" for f in fields)


def test_a_listing_is_parsed_and_nonsense_is_dropped() -> None:
    out = (
        record("f", "f", "12", "644", "1700000000.5", "", "b.txt")
        + record("d", "d", "4096", "755", "1700000000.0", "", "a dir")
        + record("l", "d", "4", "777", "1700000000.0", "/etc", "etc-link")
        + record("l", "N", "4", "777", "1700000000.0", "gone", "broken")
        + record("f", "f", "x", "644", "1", "", "bad-size")  # not a number
        + record("f", "f", "1", "644", "1", "", "a/b")  # a name cannot hold '/'
        + record("f", "f", "1", "644", "1", "", "..")
        + record("f", "f", "1", "644", "1", "", "<img src=x onerror=alert(1)>")
        + b"f\0f\0cut short"  # an unfinished record (the cap)
    )
    listing = parse_listing("/config", out)
    names = [e.name for e in listing.entries]
    assert names == ["<img src=x onerror=alert(1)>", "a dir", "b.txt", "broken", "etc-link"]
    by = {e.name: e for e in listing.entries}
    assert (by["b.txt"].type, by["b.txt"].size, by["b.txt"].mode) == ("file", 12, 0o644)
    assert by["a dir"].type == "dir" and by["a dir"].target is None
    assert (by["etc-link"].target, by["etc-link"].target_type) == ("/etc", "dir")
    assert by["broken"].target_type == "missing"
    assert not listing.truncated


def test_a_listing_past_the_cap_says_so() -> None:
    out = b"".join(
        record("f", "f", "1", "644", "1", "", f"f{i:05d}") for i in range(MAX_ENTRIES + 1)
    )
    listing = parse_listing("/big", out)
    assert len(listing.entries) == MAX_ENTRIES and listing.truncated
