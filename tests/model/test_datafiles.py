"""The data-file lookup: a path as is, then the override folder's KIND/NAME.toml, then the shipped.

Every test reads real files: the shipped defaults through the installed package, the overrides
from folders written under ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bpmon.collectors.profile import load_profile
from bpmon.model import datafiles
from bpmon.model.datafiles import DATA_DIR_ENV, data_file, data_names, set_data_dir, shipped_dir
from bpmon.model.errors import ConfigError
from bpmon.rules.config import load_rules

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without an override folder and leaves none behind."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    set_data_dir(None)
    yield
    set_data_dir(None)


def _override(root: Path, kind: str, name: str, text: str) -> Path:
    path = root / kind / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _renamed_profile(new_name: str) -> str:
    """The shipped bpmon-runtime profile with its ``name`` changed, to tell the copies apart."""
    text = data_file("collectors", "bpmon-runtime").read_text(encoding="utf-8")
    assert 'name = "bpmon-runtime"' in text
    return text.replace('name = "bpmon-runtime"', f'name = "{new_name}"', 1)


def test_the_shipped_files_are_the_top_level_folders_users_edit() -> None:
    for kind in ("rules", "collectors"):
        shipped = sorted(p.name for p in (REPO / kind).glob("*.toml"))
        assert shipped, f"{kind}/ holds no .toml file"
        assert sorted(e.name for e in shipped_dir(kind).iterdir() if e.name.endswith(".toml")) == (
            shipped
        )
        for name in shipped:
            resolved = data_file(kind, name.removesuffix(".toml"))
            assert resolved.read_bytes() == (REPO / kind / name).read_bytes()


def test_without_an_override_the_shipped_profile_is_used() -> None:
    assert load_profile("bpmon-runtime").name == "bpmon-runtime"


def test_the_environment_variable_overrides_a_shipped_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = _override(tmp_path, "collectors", "bpmon-runtime", _renamed_profile("from-env"))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert data_file("collectors", "bpmon-runtime") == mine
    assert load_profile("bpmon-runtime").name == "from-env"
    # Only the file it holds is overridden: other names still come from the shipped defaults.
    assert load_profile("python-queue").name == "python-queue"
    assert not data_file("rules", "backpressure").is_relative_to(tmp_path)


def test_an_explicit_folder_wins_over_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _override(tmp_path / "env", "collectors", "bpmon-runtime", _renamed_profile("from-env"))
    _override(tmp_path / "flag", "collectors", "bpmon-runtime", _renamed_profile("from-flag"))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))
    set_data_dir(tmp_path / "flag")
    assert load_profile("bpmon-runtime").name == "from-flag"
    set_data_dir(None)
    assert load_profile("bpmon-runtime").name == "from-env"


def test_an_override_adds_names_and_overrides_rules(tmp_path: Path) -> None:
    _override(tmp_path, "collectors", "my-pipeline", _renamed_profile("my-pipeline"))
    _override(tmp_path, "rules", "backpressure", "[levels]\nok_max = 0.05\n")
    set_data_dir(tmp_path)
    assert "my-pipeline" in data_names("collectors")
    assert "bpmon-runtime" in data_names("collectors")
    assert load_profile("my-pipeline").name == "my-pipeline"
    assert load_rules().levels.ok_max == 0.05


def test_a_path_to_a_file_is_used_as_is_even_with_an_override(tmp_path: Path) -> None:
    mine = _override(tmp_path / "elsewhere", "collectors", "x", _renamed_profile("by-path"))
    _override(tmp_path / "data", "collectors", "x", _renamed_profile("by-name"))
    set_data_dir(tmp_path / "data")
    assert load_profile(mine).name == "by-path"
    assert load_profile("x").name == "by-name"
    assert load_profile("x.toml").name == "by-name"  # a bare NAME.toml is a name


def test_a_missing_name_says_where_it_looked_and_the_fix(tmp_path: Path) -> None:
    set_data_dir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        data_file("collectors", "no-such-profile")
    message = str(caught.value)
    assert "\n" not in message
    assert str(tmp_path / "collectors") in message
    assert str(shipped_dir("collectors")) in message
    assert "python-queue" in message  # the known names
    assert f"put no-such-profile.toml in {tmp_path}/collectors/" in message


def test_a_missing_path_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "mine.toml"
    with pytest.raises(
        ConfigError, match=r"^no rules file named .*mine\.toml: that path does not exist; check it"
    ):
        load_rules(missing)


def test_an_override_folder_that_does_not_exist_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"^--data-dir .*: not a folder; create it"):
        set_data_dir(tmp_path / "absent")
    assert datafiles.override_dir() is None
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match=rf"^{DATA_DIR_ENV}=.*: not a folder; .* unset"):
        load_profile("bpmon-runtime")
