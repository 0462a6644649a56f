"""The two helpers every output and message goes through: atomic writes and redaction."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ptplan.core import atomic
from ptplan.core.errors import InputError
from ptplan.core.redact import redact

# --- redaction -------------------------------------------------------------------------------

PASSWORD_CHARS = string.ascii_letters + string.digits + "!$%^*()-_+=[]{}~.,/:@"


@given(st.text(PASSWORD_CHARS, min_size=4, max_size=24).filter(lambda s: "@" not in s[:1]),
       st.sampled_from(["postgresql", "postgres", "postgresql+psycopg", "mysql", "https",
                        "http", "sqlite", "postgresx", "redis"]))
def test_url_password_never_survives(password: str, scheme: str) -> None:
    url = f"{scheme}://alice:{password}@db.example.com:5432/ledger"
    for message in (url, f"--ledger: bad URL {url!r}; use postgresql://", f"({url})"):
        out = redact(message)
        assert password not in out.replace("alice", "").replace("db.example.com:5432/ledger", "")
        assert "alice" in out and "db.example.com" in out


@pytest.mark.parametrize(("text", "secret"), [
    ("host=h password=S3cretPw dbname=x", "S3cretPw"),
    ("password='two words' sslmode=require", "two words"),
    ("https://bucket.s3.amazonaws.com/k?X-Amz-Signature=deadbeef99&X-Amz-Date=1", "deadbeef99"),
    ("https://mlflow.example.com/api?token=tok_12345", "tok_12345"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG", "wJalrXUtnFEMIK7MDENG"),
    ("aws_session_token = FQoGZXIvYXdzEJr", "FQoGZXIvYXdzEJr"),
])
def test_key_value_secrets(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize("text", [
    "sqlite:///home/u/ledger.db", "https://mlflow.example.com:5000/#/experiments/1",
    "tokens per step: 4096", "error: spec.budget_usd: -3 must be > 0", "postgres://u@h/db"])
def test_ordinary_text_unchanged(text: str) -> None:
    assert redact(text) == text


# --- atomic writes ---------------------------------------------------------------------------

def test_write_atomic_replaces_and_keeps_mode(tmp_path: Path) -> None:
    p = tmp_path / "report.html"
    p.write_text("old")
    p.chmod(0o640)
    atomic.write_atomic(p, "new")
    assert p.read_text() == "new"
    assert p.stat().st_mode & 0o777 == 0o640
    assert [x.name for x in tmp_path.iterdir()] == ["report.html"]


def test_failed_write_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "report.html"
    p.write_text("old")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    with pytest.raises(InputError, match="nothing was changed"):
        atomic.write_atomic(p, "x" * 100_000)
    monkeypatch.undo()
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["report.html"]


def test_symlink_and_input_refused_unless_forced(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    with pytest.raises(InputError, match="symbolic link"):
        atomic.write_atomic(link, "x")
    assert target.read_text() == "precious"
    atomic.write_atomic(link, "x", force=True)
    assert target.read_text() == "precious" and not link.is_symlink()
    assert link.read_text() == "x"
    src = tmp_path / "plan.json"
    src.write_text("{}")
    with pytest.raises(InputError, match="also an input"):
        atomic.write_atomic(src, "y", inputs=[src])
    assert src.read_text() == "{}"


@pytest.mark.parametrize("name", ["/abs/path", "../x", "a/../../x", "a\\b", "", ".", "a//b",
                                  "a\nb", "a\x00b"])
def test_confine_refuses_escapes(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError):
        atomic.confine(tmp_path, name)


def test_confine_refuses_link_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "out"
    root.mkdir()
    (root / "stage").symlink_to(outside)
    with pytest.raises(InputError, match="outside the output directory"):
        atomic.confine(root, "stage/file.yaml")
    assert atomic.confine(root, "stage-2/file.yaml") == root.resolve() / "stage-2/file.yaml"


def test_write_tree_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "deploy"
    atomic.write_tree(root, {"a.yaml": "a1", "sub/b.yaml": "b1"})
    real_replace = os.replace
    calls = {"n": 0}

    def failing(src: str, dst: str) -> None:
        calls["n"] += 1
        # the third rename: a.yaml's backup and replacement are done, b.yaml's backup fails
        if calls["n"] == 3:
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(InputError, match="nothing was changed"):
        atomic.write_tree(root, {"a.yaml": "a2", "sub/b.yaml": "b2", "c.yaml": "c2"})
    monkeypatch.undo()
    assert (root / "a.yaml").read_text() == "a1"
    assert (root / "sub/b.yaml").read_text() == "b1"
    assert not (root / "c.yaml").exists()
    leftovers = [p.name for p in root.rglob("*") if p.name.startswith(".")]
    assert leftovers == []
    written = atomic.write_tree(root, {"a.yaml": "a3", "c.yaml": "c3"})
    assert [p.read_text() for p in written] == ["a3", "c3"]


def test_write_tree_root_link_refused_unless_forced(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "deploy"
    link.symlink_to(real)
    with pytest.raises(InputError, match="symbolic link"):
        atomic.write_tree(link, {"a.yaml": "a"})
    assert list(real.iterdir()) == []
    atomic.write_tree(link, {"a.yaml": "a"}, force=True)
    assert (real / "a.yaml").read_text() == "a"
