/*
 * exon_seal.h: the sealed frames of encrypted links (docs/protocol.md 2.20), in C, so that
 * the link table seals and opens DATA and FLOW on the hot path without Python.
 *
 * No cryptography is written here. Two AEADs, the one a link's handshake chose (its
 * `cipher`): ChaCha20-Poly1305 (RFC 8439, Noise's "ChaChaPoly") and AES-256-GCM (NIST SP
 * 800-38D, Noise's "AESGCM"), the latter chosen only where both hosts have AES in hardware.
 * They come from libsodium where exon_crypto_use_sodium found it (PyNaCl's copy; its
 * AES-256-GCM only where the CPU has AES-NI and CLMUL), else from OpenSSL 3's libcrypto,
 * loaded at run time (dlopen "libcrypto.so.3", our own prototypes of the EVP functions
 * used), so exon builds without OpenSSL's headers; exon_crypto_load() says what is missing
 * when it cannot load. Both libraries give the same bytes.
 *
 * A seal is one link's keys and counters, both directions (the state of the Python
 * exon.crypto.seal.TransportSeal, which lives here: one copy, shared by the core and the
 * link table). Frame `c` of a direction is sealed with key epoch(c >> shift), where
 * epoch 0 is the handshake's key and epoch e+1 = REKEY(epoch e) (Noise 11.3). The nonce
 * is Noise's: 0^32 || LE64(c) (ChaChaPoly), 0^32 || BE64(c) (AESGCM). A sender whose
 * current key has sealed `data_limit` plaintext bytes moves its counter on to the first
 * frame of the next epoch (the receiver allows gaps), so no key seals more than
 * data_limit bytes plus one frame (AES-GCM's limit; ChaCha20-Poly1305 has none that
 * matters). Sealed bytes: LE64(c) || ciphertext || tag(16); the associated data is the
 * frame's 20-byte header.
 *
 * Thread safety: none; the caller serialises the calls on one seal (the Node's lock).
 */
#ifndef EXON_SEAL_H
#define EXON_SEAL_H

#include <stdint.h>

#include "common/exon_common.h"

#define EXON_SEAL_KEY_LENGTH 32
#define EXON_SEAL_TAG_LENGTH 16
#define EXON_SEAL_COUNTER_LENGTH 8
#define EXON_SEAL_OVERHEAD (EXON_SEAL_COUNTER_LENGTH + EXON_SEAL_TAG_LENGTH)
#define EXON_SEAL_AD_LENGTH 20
#define EXON_SEAL_NOT_OPENED (-1)   /* exon_seal_open: altered, replayed, another key */

#define EXON_SEAL_CHACHAPOLY 0        /* ChaCha20-Poly1305 */
#define EXON_SEAL_AESGCM 1            /* AES-256-GCM */
#define EXON_SEAL_NO_DATA_LIMIT UINT64_MAX
/* AES-256-GCM: at most 2^36 bytes (2^32 blocks) per key, with at most 2^32 frames: the
 * confidentiality advantage stays near 2^-57 (draft-irtf-cfrg-aead-limits, sigma + q
 * blocks, (sigma + q)^2 / 2^129); RFC 9001 6.6 allows 2^23 frames of 2^16 bytes = 2^39. */
#define EXON_SEAL_AESGCM_DATA_LIMIT (UINT64_C(1) << 36)

typedef struct exon_seal_dir_stct
{
    uint8_t key[EXON_SEAL_KEY_LENGTH];
    uint64_t next;                 /* send: next counter; receive: lowest counter accepted */
    uint64_t epoch;                /* the key's epoch (counter >> shift) */
    uint64_t bytes;                /* send: plaintext bytes sealed with the current key */
    void *ctx;                     /* EVP_CIPHER_CTX, keyed (OpenSSL) */
    void *aes;                     /* libsodium's AES-256-GCM state, keyed; NULL: none */
}
exon_seal_dir_t;

typedef struct exon_seal_stct
{
    exon_seal_dir_t send;
    exon_seal_dir_t recv;
    int32_t shift;                 /* keys renewed every 2^shift frames per direction */
    int32_t cipher;                /* EXON_SEAL_CHACHAPOLY or EXON_SEAL_AESGCM */
    uint64_t data_limit;           /* plaintext bytes a key seals before the next one */
    uint64_t sealed;
    uint64_t opened;
    uint64_t failures;             /* frames that did not open */
}
exon_seal_t;

/* Load libcrypto (once per process): 0, or EXON_E_UNAVAILABLE with the reason in the
 * error text (what is missing). Thread-safe. */
int exon_crypto_load(void);

/* Whether this host seals AES-256-GCM in hardware (libsodium's
 * crypto_aead_aes256gcm_is_available when libsodium is loaded, else the CPU's AES and
 * carry-less multiply instructions): 1 or 0. Only then does a handshake offer AESGCM. */
int exon_crypto_aes_available(void);

/* libsodium for sealing and opening (the same AEADs, fewer pages touched per frame; see
 * exon_seal.c): load it from `path` (a shared object exporting libsodium's API, once per
 * process) and make it the backend. 0, or EXON_E_UNAVAILABLE (the reason in the error
 * text; OpenSSL stays the backend). Thread-safe. libcrypto is still needed (exon_seal_init
 * and the handshake). */
int exon_crypto_use_sodium(const char *path);

#define EXON_CRYPTO_OPENSSL 0
#define EXON_CRYPTO_SODIUM 1
/* The backend of every seal and open: `want` EXON_CRYPTO_OPENSSL or EXON_CRYPTO_SODIUM
 * (loaded first) sets it, anything else only asks. Returns the backend now in use, or
 * EXON_E_UNAVAILABLE. Both give the same bytes, so it may change while links run. */
int exon_crypto_backend(int32_t want);

/* Key a seal with `cipher` (EXON_SEAL_*), shift 1..62 and data_limit >= 1 (bytes per key;
 * EXON_SEAL_NO_DATA_LIMIT: none); EXON_E_UNAVAILABLE without libcrypto, -ENOMEM. */
int exon_seal_init(exon_seal_t *seal, int32_t cipher, const uint8_t *send_key,
                   const uint8_t *recv_key, int32_t shift, uint64_t data_limit);
/* Free the contexts and wipe the keys (idempotent). */
void exon_seal_close(exon_seal_t *seal);

/* Seal `length` bytes of `in` with the 20-byte `ad`: writes 8 + length + 16 bytes to `out`
 * (which may not overlap `in`), with the next counter, or the first of the next epoch
 * when the key reached its data limit. Returns 0, or an error (EXON_E_STATE: the counter
 * is exhausted). */
int64_t exon_seal_seal(exon_seal_t *seal, const uint8_t *ad, const uint8_t *in, int32_t length,
                       uint8_t *out);

/* Open `length` sealed bytes (counter || ciphertext || tag) of `in` with the 20-byte `ad`
 * into `out` (length - 24 bytes; `out` may be `in` + 8, in place). Returns the plaintext
 * length, or EXON_SEAL_NOT_OPENED (counted in `failures`; a replayed or older counter, a
 * counter two keys ahead, or a frame that does not authenticate: nothing changes, but `out`
 * may hold garbage). */
int32_t exon_seal_open(exon_seal_t *seal, const uint8_t *ad, const uint8_t *in, int32_t length,
                       uint8_t *out);

/* Noise's REKEY for `cipher`: out = first 32 bytes of ENCRYPT(key, 2^64-1, "", 0^32). */
int exon_seal_rekey(int32_t cipher, const uint8_t *key, uint8_t *out);

#endif /* EXON_SEAL_H */
