"""Keypairs, their printable form, key files and ``exon keygen`` (issue 28)."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

import exon
from exon.cli import main
from exon.crypto import libcrypto
from exon.crypto.keys import key_from_text, key_to_text
from exon.errors import KeyFileError

pytestmark = pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing")


def test_generate_gives_distinct_32_byte_keys() -> None:
    a, b = exon.Keypair.generate(), exon.Keypair.generate()
    assert len(a.public) == 32
    assert len(a.secret) == 32
    assert a.public != b.public
    assert a.secret not in repr(a).encode()
    assert key_from_text(a.public_text) == a.public


def test_printable_form_round_trips_and_refuses_bad_text() -> None:
    key = bytes(range(32))
    assert key_from_text(key_to_text(key)) == key
    for bad in ("", "abc", key_to_text(key)[:-4], "!" * 44, key_to_text(key) + "AAAA"):
        with pytest.raises(ValueError):
            key_from_text(bad)


def test_save_writes_0600_and_load_reads_it_back(tmp_path) -> None:
    pair = exon.Keypair.generate()
    path = tmp_path / "server.key"
    old = os.umask(0)  # even with a permissive umask
    try:
        pair.save(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = exon.Keypair.load(path)
    assert loaded.secret == pair.secret
    assert loaded.public == pair.public


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_load_refuses_a_key_file_others_can_read(tmp_path, mode: int) -> None:
    path = tmp_path / "k"
    exon.Keypair.generate().save(path)
    os.chmod(path, mode)
    with pytest.raises(KeyFileError, match=f"{mode:04o}.*chmod 600"):
        exon.Keypair.load(path)


@pytest.mark.parametrize("text", [
    "", "public = x\n", "secret = AAAA\n", "secret\n", "secret = " + "A" * 43 + "=\n" + "x" * 5000,
    "\xff\xfe", "secret = " + key_to_text(bytes(32))[:-2] + "\n",
])
def test_load_refuses_files_that_are_not_key_files(tmp_path, text: str) -> None:
    path = tmp_path / "k"
    path.write_bytes(text.encode("latin-1"))
    os.chmod(path, 0o600)
    with pytest.raises(KeyFileError):
        exon.Keypair.load(path)


def test_load_refuses_a_public_key_that_is_not_the_secret_keys(tmp_path) -> None:
    a, b = exon.Keypair.generate(), exon.Keypair.generate()
    path = tmp_path / "k"
    path.write_text(f"public = {b.public_text}\nsecret = {key_to_text(a.secret)}\n")
    os.chmod(path, 0o600)
    with pytest.raises(KeyFileError, match="not the secret"):
        exon.Keypair.load(path)


def test_load_of_a_missing_file_is_a_key_file_error(tmp_path) -> None:
    with pytest.raises(KeyFileError, match="No such file"):
        exon.Keypair.load(tmp_path / "missing")


def test_keygen_writes_the_file_and_prints_the_public_key(tmp_path) -> None:
    path = tmp_path / "node.key"
    result = CliRunner().invoke(main, ["keygen", str(path)])
    assert result.exit_code == 0, result.output
    pair = exon.Keypair.load(path)
    assert result.output.strip() == pair.public_text
    again = CliRunner().invoke(main, ["keygen", str(path)])
    assert again.exit_code != 0
    assert "exists" in again.output
