"""Drive names: they become engine volume names and, for sized drives, file names in a
folder host root mounts from, so only whole names of the documented alphabet pass."""

from __future__ import annotations

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.snapshot import parse_drive, validate_drive_name


@pytest.mark.parametrize("name", ["data", "a", "x.y_z-1", "9" * 63])
def test_good_names_pass(name: str) -> None:
    assert validate_drive_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "data\n", "Data", "-x", ".x", "a/b", "a..b", "a b", "9" * 64, "dätä"]
)
def test_other_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest, match="invalid drive name"):
        validate_drive_name(name)
    with pytest.raises(InvalidRequest):
        parse_drive(name + ":ro")
