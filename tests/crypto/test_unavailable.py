"""Asking for encryption where libcrypto cannot be loaded: a clear error naming what is
missing, at the policy's creation (issue 28)."""

from __future__ import annotations

import pytest

import exon
from exon.crypto import libcrypto
from exon.errors import EncryptionUnavailable


@pytest.fixture
def no_libcrypto(monkeypatch):
    monkeypatch.setattr(libcrypto, "LIBRARY", "libcrypto-missing.so.99")
    monkeypatch.setattr(libcrypto, "_lib", None)
    monkeypatch.setattr(libcrypto, "_load_error", None)


@pytest.mark.usefixtures("no_libcrypto")
def test_encrypted_policy_names_the_missing_library() -> None:
    assert not libcrypto.available()
    with pytest.raises(EncryptionUnavailable, match=r"libcrypto-missing\.so\.99.*OpenSSL 3"):
        exon.EncryptedPolicy(object(), trusted=exon.ANY_KEY)  # type: ignore[arg-type]
    with pytest.raises(EncryptionUnavailable, match="libcrypto"):
        exon.Keypair.generate()
    assert issubclass(EncryptionUnavailable, exon.ExonError)
