"""Merging the repro directories of a split run's shards into one: a case per directory, a case
of two shards kept once and said so, links never followed, nothing written outside the target."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchcompile.run.merge_repros import ReproDirError, merge_repro_dirs


def case(root: Path, name: str, repro: str = "# repro\n") -> Path:
    directory = root / name
    (directory / "tensors").mkdir(parents=True)
    (directory / "repro.py").write_text(repro)
    (directory / "tensors" / "abc.pt").write_bytes(b"\x00\x01")
    (root / f"{name}.claimed").touch()
    (root / f"{name}.lock").touch()
    return directory


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, None for a directory."""
    return {
        path.relative_to(root).as_posix(): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def test_cases_of_all_shards_merge_and_a_case_of_two_shards_is_kept_once(tmp_path: Path) -> None:
    one, two, three = tmp_path / "shard-1", tmp_path / "shard-2", tmp_path / "shard-3"
    case(one, "tests_m.py__test_a")
    case(two, "tests_m.py__test_b")
    case(two, "tests_m.py__test_a")  # the same case, run in two shards
    case(three, "tests_m.py__test_b", repro="# written differently\n")
    (one / ".queue" / "run-1").mkdir(parents=True)
    (one / ".claims.lock").touch()
    into = tmp_path / "merged"

    lines = merge_repro_dirs([one, two, three], into)

    assert lines == [
        f"repros: case tests_m.py__test_a is in {one} and {two} with the same files: kept one",
        f"repros: case tests_m.py__test_b is in {two} and {three} with different files: "
        f"kept {two / 'tests_m.py__test_b'}",
        f"repros: 2 cases merged into {into}",
    ]
    assert tree(into) == {
        "tests_m.py__test_a": None,
        "tests_m.py__test_a/repro.py": b"# repro\n",
        "tests_m.py__test_a/tensors": None,
        "tests_m.py__test_a/tensors/abc.pt": b"\x00\x01",
        "tests_m.py__test_b": None,
        "tests_m.py__test_b/repro.py": b"# repro\n",
        "tests_m.py__test_b/tensors": None,
        "tests_m.py__test_b/tensors/abc.pt": b"\x00\x01",
    }


def test_links_are_neither_followed_nor_copied(tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not a repro")
    shard = tmp_path / "shard-1"
    directory = case(shard, "tests_m.py__test_a")
    (directory / "leak.txt").symlink_to(secret)
    (directory / "tensors" / "up").symlink_to(secret.parent, target_is_directory=True)
    (shard / "tests_m.py__test_linked").symlink_to(secret.parent, target_is_directory=True)
    into = tmp_path / "merged"

    lines = merge_repro_dirs([shard], into)

    assert set(tree(into)) == {
        "tests_m.py__test_a",
        "tests_m.py__test_a/repro.py",
        "tests_m.py__test_a/tensors",
        "tests_m.py__test_a/tensors/abc.pt",
    }
    assert lines == [
        f"repros: {directory / 'leak.txt'} is a symbolic link or not a regular file: left out",
        f"repros: {directory / 'tensors' / 'up'} is a symbolic link or not a regular file: left out",
        f"repros: {shard / 'tests_m.py__test_linked'} is a symbolic link or not a directory: left out",
        f"repros: 1 cases merged into {into}",
    ]


def test_a_missing_shard_directory_is_said_and_skipped(tmp_path: Path) -> None:
    shard = tmp_path / "shard-1"
    case(shard, "tests_m.py__test_a")
    lines = merge_repro_dirs([tmp_path / "shard-2", shard], tmp_path / "merged")
    assert lines[0] == f"repros: {tmp_path / 'shard-2'} is not a directory: nothing taken from it"
    assert (tmp_path / "merged" / "tests_m.py__test_a" / "repro.py").is_file()


def test_the_target_must_be_new_or_empty_and_apart_from_the_sources(tmp_path: Path) -> None:
    shard = tmp_path / "shard-1"
    case(shard, "tests_m.py__test_a")
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(ReproDirError, match="exists and is not an empty directory"):
        merge_repro_dirs([shard], used)
    assert tree(used) == {"keep.txt": b"mine"}
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(ReproDirError, match="is a symbolic link"):
        merge_repro_dirs([shard], linked)
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(ReproDirError, match="overlap"):
        merge_repro_dirs([shard], shard / "merged")
    assert not (shard / "merged").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert merge_repro_dirs([shard], empty)[-1] == f"repros: 1 cases merged into {empty}"
