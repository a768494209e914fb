"""Static keys of encrypted links: :class:`Keypair`, their printable form and key files.

A key is 32 bytes (X25519). Its printable form is standard base64 (44 characters), the form
config files and ``exon keygen`` use. A key file is text::

    # exon keypair (X25519): keep this file secret
    public = <base64>
    secret = <base64>

written with mode 0600; :meth:`Keypair.load` refuses a file that the group or other users
may read or write (:class:`exon.errors.KeyFileError` says why and how to fix it).
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path
from typing import Final

from exon.crypto import libcrypto
from exon.errors import KeyFileError

__all__ = ["KEY_LENGTH", "Keypair", "key_from_text", "key_to_text"]

KEY_LENGTH: Final = libcrypto.KEY_LENGTH
_MAX_FILE: Final = 4096


def key_to_text(key: bytes) -> str:
    """The printable form of a 32-byte key (base64, 44 characters)."""
    if len(key) != KEY_LENGTH:
        raise ValueError(f"a key is {KEY_LENGTH} bytes, not {len(key)}")
    return base64.b64encode(key).decode("ascii")


def key_from_text(text: str | bytes) -> bytes:
    """A 32-byte key from its printable form (or the 32 bytes themselves); ValueError when
    it is not one."""
    if isinstance(text, bytes) and len(text) == KEY_LENGTH:
        return bytes(text)
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a key's printable form is 44 characters of base64") from None
    if len(raw) != KEY_LENGTH:
        raise ValueError(f"the key decodes to {len(raw)} bytes, not {KEY_LENGTH}")
    return raw


class Keypair:
    """An X25519 keypair: ``public`` (32 bytes, give it to peers) and ``secret`` (32 bytes,
    never leaves its owner)."""

    __slots__ = ("public", "secret")

    def __init__(self, secret: bytes) -> None:
        if len(secret) != KEY_LENGTH:
            raise ValueError(f"a secret key is {KEY_LENGTH} bytes, not {len(secret)}")
        self.secret = bytes(secret)
        self.public = libcrypto.x25519_public(self.secret)

    @classmethod
    def generate(cls) -> Keypair:
        """A new keypair from OpenSSL's CSPRNG."""
        return cls(libcrypto.random_bytes(KEY_LENGTH))

    @property
    def public_text(self) -> str:
        """The public key's printable form."""
        return key_to_text(self.public)

    def __repr__(self) -> str:  # never the secret
        return f"<Keypair public={self.public_text}>"

    def __str__(self) -> str:
        return self.public_text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keypair) and other.public == self.public

    def __hash__(self) -> int:
        return hash(self.public)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the key file with mode 0600 (created so; an existing file is replaced)."""
        target = Path(path)
        text = (
            "# exon keypair (X25519): keep this file secret\n"
            f"public = {self.public_text}\nsecret = {key_to_text(self.secret)}\n"
        )
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keypair:
        """Read a key file written by :meth:`save` (or ``exon keygen``).

        Raises :class:`~exon.errors.KeyFileError` when the group or other users may read or
        write it, when it is not a key file, or when its public key does not match its
        secret key."""
        source = Path(path)
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise KeyFileError(f"key file {source}: {exc.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise KeyFileError(f"key file {source} is not a regular file")
            loose = info.st_mode & 0o077
            if loose:
                raise KeyFileError(
                    f"key file {source} has mode {stat.S_IMODE(info.st_mode):04o}: its "
                    "secret key is open to the group or other users; `chmod 600` it "
                    "(and make a new keypair if others may have read it)")
            data = os.read(fd, _MAX_FILE + 1)
        finally:
            os.close(fd)
        if len(data) > _MAX_FILE:
            raise KeyFileError(f"key file {source} is longer than {_MAX_FILE} bytes")
        fields: dict[str, str] = {}
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise KeyFileError(f"key file {source} is not text") from None
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, value = line.partition("=")
            if not sep:
                raise KeyFileError(f"key file {source}: line {line[:20]!r} is not 'name = key'")
            fields[name.strip()] = value.strip()
        if "secret" not in fields:
            raise KeyFileError(f"key file {source} has no 'secret = ...' line")
        try:
            secret = key_from_text(fields["secret"])
        except ValueError as exc:
            raise KeyFileError(f"key file {source}: secret key: {exc}") from None
        pair = cls(secret)
        public = fields.get("public")
        if public is not None:
            try:
                matches = key_from_text(public) == pair.public
            except ValueError as exc:
                raise KeyFileError(f"key file {source}: public key: {exc}") from None
            if not matches:
                raise KeyFileError(f"key file {source}: the public key is not the secret "
                                   "key's")
        return pair
