"""The cryptographic primitives of encrypted links, from OpenSSL 3's libcrypto, loaded at
run time.

exon writes no cryptography of its own: X25519 (RFC 7748), ChaCha20-Poly1305 (RFC 8439),
AES-256-GCM (NIST SP 800-38D) and randomness come from ``libcrypto.so.3`` through cffi's
ABI mode (``ffi.dlopen`` with the few prototypes below), so ``pip install`` needs no
OpenSSL headers. The library is looked up on first use; where it is missing (or lacks a
primitive) asking for encryption raises :class:`exon.errors.EncryptionUnavailable`
naming what is missing. SHA-256 and HMAC come from :mod:`hashlib` / :mod:`hmac` (OpenSSL
too).

Every call runs in C with the GIL released (cffi's ABI calls release it).
"""

from __future__ import annotations

import threading
from typing import Any, Final

from cffi import FFI

from exon.errors import EncryptionUnavailable

__all__ = [
    "KEY_LENGTH",
    "LIBRARY",
    "TAG_LENGTH",
    "aead_open",
    "aead_seal",
    "available",
    "library",
    "random_bytes",
    "x25519",
    "x25519_public",
]

LIBRARY: Final = "libcrypto.so.3"
KEY_LENGTH: Final = 32  #: X25519 keys, ChaCha20-Poly1305 keys
TAG_LENGTH: Final = 16  #: Poly1305 tag

_CDEF = """
typedef struct evp_cipher_st EVP_CIPHER;
typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
typedef struct evp_pkey_st EVP_PKEY;
typedef struct evp_pkey_ctx_st EVP_PKEY_CTX;
typedef struct engine_st ENGINE;
const EVP_CIPHER *EVP_chacha20_poly1305(void);
const EVP_CIPHER *EVP_aes_256_gcm(void);
EVP_CIPHER_CTX *EVP_CIPHER_CTX_new(void);
void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx);
int EVP_CipherInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *type, ENGINE *impl,
                      const unsigned char *key, const unsigned char *iv, int enc);
int EVP_CipherUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
                     const unsigned char *in, int inl);
int EVP_CipherFinal_ex(EVP_CIPHER_CTX *ctx, unsigned char *outm, int *outl);
int EVP_CIPHER_CTX_ctrl(EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr);
EVP_PKEY *EVP_PKEY_new_raw_private_key(int type, ENGINE *e, const unsigned char *priv,
                                       size_t len);
EVP_PKEY *EVP_PKEY_new_raw_public_key(int type, ENGINE *e, const unsigned char *pub,
                                      size_t len);
int EVP_PKEY_get_raw_public_key(const EVP_PKEY *pkey, unsigned char *pub, size_t *len);
void EVP_PKEY_free(EVP_PKEY *key);
EVP_PKEY_CTX *EVP_PKEY_CTX_new(EVP_PKEY *pkey, ENGINE *e);
void EVP_PKEY_CTX_free(EVP_PKEY_CTX *ctx);
int EVP_PKEY_derive_init(EVP_PKEY_CTX *ctx);
int EVP_PKEY_derive_set_peer(EVP_PKEY_CTX *ctx, EVP_PKEY *peer);
int EVP_PKEY_derive(EVP_PKEY_CTX *ctx, unsigned char *key, size_t *keylen);
int RAND_bytes(unsigned char *buf, int num);
"""

_NID_X25519: Final = 1034  # EVP_PKEY_X25519 (obj_mac.h)
_CTRL_AEAD_GET_TAG: Final = 0x10
_CTRL_AEAD_SET_TAG: Final = 0x11

_ffi = FFI()
_ffi.cdef(_CDEF)
_lib: Any = None
_load_error: str | None = None
_load_lock = threading.Lock()
_local = threading.local()


def library() -> Any:
    """The loaded libcrypto (cffi ABI handle); :class:`EncryptionUnavailable` when it is
    missing or lacks ChaCha20-Poly1305 or X25519."""
    global _lib, _load_error
    if _lib is not None:
        return _lib
    with _load_lock:
        if _lib is None and _load_error is None:
            try:
                lib = _ffi.dlopen(LIBRARY)
                if lib.EVP_chacha20_poly1305() == _ffi.NULL:
                    raise OSError("EVP_chacha20_poly1305() is NULL (ChaCha20-Poly1305 "
                                  "disabled in this build)")
            except (OSError, AttributeError) as exc:
                _load_error = (f"encrypted links need OpenSSL 3's {LIBRARY} (ChaCha20-Poly1305, "
                               f"X25519), which could not be loaded: {exc}; install OpenSSL 3 "
                               "(Debian/Ubuntu: apt install libssl3)")
            else:
                _lib = lib
    if _lib is None:
        raise EncryptionUnavailable(_load_error or f"{LIBRARY} is unavailable")
    return _lib


def available() -> bool:
    """Whether encrypted links can work here."""
    try:
        library()
    except EncryptionUnavailable:
        return False
    return True


def random_bytes(n: int) -> bytes:
    """``n`` bytes from OpenSSL's CSPRNG."""
    lib = library()
    buf = _ffi.new("unsigned char[]", n)
    if lib.RAND_bytes(buf, n) != 1:
        raise EncryptionUnavailable("RAND_bytes failed: OpenSSL has no entropy source")
    return bytes(_ffi.buffer(buf, n))


def _private_key(lib: Any, secret: bytes) -> Any:
    if len(secret) != KEY_LENGTH:
        raise ValueError(f"an X25519 secret key is {KEY_LENGTH} bytes, not {len(secret)}")
    key = lib.EVP_PKEY_new_raw_private_key(_NID_X25519, _ffi.NULL, secret, KEY_LENGTH)
    if key == _ffi.NULL:
        raise EncryptionUnavailable(f"{LIBRARY} refused an X25519 key (X25519 disabled?)")
    return _ffi.gc(key, lib.EVP_PKEY_free)


def x25519_public(secret: bytes) -> bytes:
    """The X25519 public key of a 32-byte secret key."""
    lib = library()
    key = _private_key(lib, secret)
    out = _ffi.new("unsigned char[32]")
    size = _ffi.new("size_t *", KEY_LENGTH)
    if lib.EVP_PKEY_get_raw_public_key(key, out, size) != 1 or size[0] != KEY_LENGTH:
        raise EncryptionUnavailable(f"{LIBRARY}: EVP_PKEY_get_raw_public_key failed")
    return bytes(out)


def x25519(secret: bytes, public: bytes) -> bytes | None:
    """The X25519 shared secret of our ``secret`` and a peer's ``public`` key; None when the
    peer's key is of the wrong size or a low-order point (the result would be all zeros,
    which OpenSSL refuses)."""
    lib = library()
    if len(public) != KEY_LENGTH:
        return None
    ours = _private_key(lib, secret)
    peer = lib.EVP_PKEY_new_raw_public_key(_NID_X25519, _ffi.NULL, public, KEY_LENGTH)
    if peer == _ffi.NULL:
        return None
    ctx = lib.EVP_PKEY_CTX_new(ours, _ffi.NULL)
    try:
        out = _ffi.new("unsigned char[32]")
        size = _ffi.new("size_t *", KEY_LENGTH)
        if (ctx == _ffi.NULL or lib.EVP_PKEY_derive_init(ctx) != 1
                or lib.EVP_PKEY_derive_set_peer(ctx, peer) != 1
                or lib.EVP_PKEY_derive(ctx, out, size) != 1 or size[0] != KEY_LENGTH):
            return None
        return bytes(out)
    finally:
        if ctx != _ffi.NULL:
            lib.EVP_PKEY_CTX_free(ctx)
        lib.EVP_PKEY_free(peer)


def _cipher_ctx(lib: Any) -> Any:
    ctx = getattr(_local, "ctx", None)  # one per thread, reused: a context is not shared
    if ctx is None:
        raw = lib.EVP_CIPHER_CTX_new()
        if raw == _ffi.NULL:
            raise MemoryError("EVP_CIPHER_CTX_new")
        ctx = _local.ctx = _ffi.gc(raw, lib.EVP_CIPHER_CTX_free)
    return ctx


def _nonce(counter: int, aes: bool) -> bytes:
    # Noise's nonces: 32 bits of zeros, then the 64-bit counter, little-endian for
    # ChaChaPoly, big-endian for AESGCM
    return b"\0\0\0\0" + counter.to_bytes(8, "big" if aes else "little")


def _evp_cipher(lib: Any, aes: bool) -> Any:
    cipher = lib.EVP_aes_256_gcm() if aes else lib.EVP_chacha20_poly1305()
    if cipher == _ffi.NULL:
        raise EncryptionUnavailable(f"{LIBRARY} lacks {'AES-256-GCM' if aes else 'ChaCha20'}")
    return cipher


def aead_seal(key: bytes, counter: int, ad: bytes, plaintext: bytes, *,
              aes: bool = False) -> bytes:
    """ChaCha20-Poly1305 (RFC 8439), or AES-256-GCM with ``aes``: ciphertext followed by
    the 16-byte tag, with Noise's nonce for ``counter``."""
    lib = library()
    ctx = _cipher_ctx(lib)
    n = len(plaintext)
    out = _ffi.new("unsigned char[]", n + TAG_LENGTH)
    outl = _ffi.new("int *")
    if lib.EVP_CipherInit_ex(ctx, _evp_cipher(lib, aes), _ffi.NULL, key,
                             _nonce(counter, aes), 1) != 1:
        raise EncryptionUnavailable(f"{LIBRARY}: AEAD init failed")
    ok = (not ad or lib.EVP_CipherUpdate(ctx, _ffi.NULL, outl, ad, len(ad)) == 1)
    ok = ok and (n == 0 or lib.EVP_CipherUpdate(ctx, out, outl, plaintext, n) == 1)
    ok = ok and lib.EVP_CipherFinal_ex(ctx, out + n, outl) == 1
    ok = ok and lib.EVP_CIPHER_CTX_ctrl(ctx, _CTRL_AEAD_GET_TAG, TAG_LENGTH, out + n) == 1
    if not ok:
        raise EncryptionUnavailable(f"{LIBRARY}: AEAD sealing failed")
    return bytes(_ffi.buffer(out, n + TAG_LENGTH))


def aead_open(key: bytes, counter: int, ad: bytes, sealed: bytes | memoryview, *,
              aes: bool = False) -> bytes | None:
    """The plaintext of ``sealed`` (ciphertext + tag; AES-256-GCM with ``aes``), or None
    when it does not authenticate (altered, another key, counter or associated data)."""
    if len(sealed) < TAG_LENGTH:
        return None
    lib = library()
    ctx = _cipher_ctx(lib)
    n = len(sealed) - TAG_LENGTH
    data = _ffi.from_buffer(sealed)
    out = _ffi.new("unsigned char[]", max(n, 1))
    outl = _ffi.new("int *")
    tag = _ffi.new("unsigned char[16]", bytes(sealed[n:]))
    if lib.EVP_CipherInit_ex(ctx, _evp_cipher(lib, aes), _ffi.NULL, key,
                             _nonce(counter, aes), 0) != 1:
        return None
    ok = lib.EVP_CIPHER_CTX_ctrl(ctx, _CTRL_AEAD_SET_TAG, TAG_LENGTH, tag) == 1
    ok = ok and (not ad or lib.EVP_CipherUpdate(ctx, _ffi.NULL, outl, ad, len(ad)) == 1)
    ok = ok and (n == 0 or lib.EVP_CipherUpdate(ctx, out, outl, data, n) == 1)
    ok = ok and lib.EVP_CipherFinal_ex(ctx, out + n, outl) == 1
    if not ok:
        return None
    return bytes(_ffi.buffer(out, n))
