"""bpmon's one atomic write: a file is replaced whole or not at all, and an exclusive write never
replaces one. The runs directory, the manifest, the history's parts and ``analyze --out`` all
write through it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from bpmon.history.atomic import atomic_write


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_reader_sees_the_old_file_until_the_new_one_is_whole(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old\n")
    with atomic_write(target) as out:
        out.write(b"new, half")
        assert target.read_bytes() == b"old\n"
        out.write(b" and the rest\n")
    assert target.read_bytes() == b"new, half and the rest\n"
    assert _names(tmp_path) == ["report.json"]


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_write_that_fails_leaves_the_file_as_it_was_and_no_temporary_file(
    tmp_path: Path, exclusive: bool
) -> None:
    target = tmp_path / "part-0.parquet"
    if not exclusive:
        target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk on fire"), atomic_write(target) as out:
        out.write(b"half")
        raise RuntimeError("disk on fire")
    assert _names(tmp_path) == ([] if exclusive else ["part-0.parquet"])
    if not exclusive:
        assert target.read_bytes() == b"old"


def test_an_exclusive_write_never_replaces_a_file(tmp_path: Path) -> None:
    target = tmp_path / "report-1.json"
    with atomic_write(target, exclusive=True) as out:
        out.write(b"first")
    with pytest.raises(FileExistsError), atomic_write(target, exclusive=True) as out:
        out.write(b"second")
    assert target.read_bytes() == b"first"
    assert _names(tmp_path) == ["report-1.json"]


def test_without_hard_links_an_exclusive_write_still_refuses_an_existing_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some file systems (FAT, some network mounts) refuse ``link``: a check and a rename do."""

    def refused(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", refused)
    target = tmp_path / "report.json"
    with atomic_write(target, exclusive=True) as out:
        out.write(b"first")
    with pytest.raises(FileExistsError), atomic_write(target, exclusive=True) as out:
        out.write(b"second")
    assert target.read_bytes() == b"first"
    assert _names(tmp_path) == ["report.json"]
