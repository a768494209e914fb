/*
 * exon_seal.c: sealed frames of encrypted links; see exon_seal.h. ChaCha20-Poly1305 from
 * libcrypto.so.3, loaded at run time, or from libsodium when exon_crypto_use_sodium found
 * it (the same AEAD, RFC 8439: the two interoperate byte for byte).
 *
 * Why libsodium when it is there: a frame is sealed or opened right after a wake-up, with
 * cold caches and TLB. OpenSSL's EVP path (five calls per frame through the provider layer,
 * OSSL_PARAM look-ups for the IV length and the tag) touches many more pages than
 * libsodium's one call: measured in the req/rep round trip of `exon bench sockets
 * --encrypted`, a 64 B seal took a median 2.6 us and an open 5.7 us with OpenSSL, 1.5 and
 * 3.0 us with libsodium (hot in a loop both are near 1 us). libsodium also checks the tag
 * before it writes any plaintext.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exon_seal.h"

/* The EVP prototypes we call (OpenSSL 3 ABI), declared here: no OpenSSL headers needed. */
typedef void evp_cipher_t;
typedef void evp_cipher_ctx_t;
typedef const evp_cipher_t *(*evp_chacha20_poly1305_fn)(void);
typedef evp_cipher_ctx_t *(*evp_cipher_ctx_new_fn)(void);
typedef void (*evp_cipher_ctx_free_fn)(evp_cipher_ctx_t *);
typedef int (*evp_cipher_init_ex_fn)(evp_cipher_ctx_t *, const evp_cipher_t *, void *,
                                     const unsigned char *, const unsigned char *, int);
typedef int (*evp_cipher_update_fn)(evp_cipher_ctx_t *, unsigned char *, int *,
                                    const unsigned char *, int);
typedef int (*evp_cipher_final_ex_fn)(evp_cipher_ctx_t *, unsigned char *, int *);
typedef int (*evp_cipher_ctx_ctrl_fn)(evp_cipher_ctx_t *, int, int, void *);

#define SEAL_CTRL_AEAD_GET_TAG 0x10
#define SEAL_CTRL_AEAD_SET_TAG 0x11
#define SEAL_COUNTER_LIMIT UINT64_MAX   /* REKEY's nonce: never a frame's */

static struct
{
    evp_chacha20_poly1305_fn chacha20_poly1305;
    evp_cipher_ctx_new_fn ctx_new;
    evp_cipher_ctx_free_fn ctx_free;
    evp_cipher_init_ex_fn init;
    evp_cipher_update_fn update;
    evp_cipher_final_ex_fn final;
    evp_cipher_ctx_ctrl_fn ctrl;
    const evp_cipher_t *cipher;
    int loaded;                    /* 1: usable; -1: failed (reason below) */
    char reason[256];
}
seal_lib;

static pthread_once_t seal_once = PTHREAD_ONCE_INIT;

/* libsodium's prototypes (the detached IETF ChaCha20-Poly1305 AEAD), declared here too. */
typedef int (*sodium_init_fn)(void);
typedef int (*sodium_seal_fn)(unsigned char *c, unsigned char *mac,
                              unsigned long long *maclen, const unsigned char *m,
                              unsigned long long mlen, const unsigned char *ad,
                              unsigned long long adlen, const unsigned char *nsec,
                              const unsigned char *npub, const unsigned char *k);
typedef int (*sodium_open_fn)(unsigned char *m, unsigned char *nsec, const unsigned char *c,
                              unsigned long long clen, const unsigned char *mac,
                              const unsigned char *ad, unsigned long long adlen,
                              const unsigned char *npub, const unsigned char *k);

/* The libsodium backend: set once (under sodium_mutex) by exon_crypto_use_sodium; `active`
 * picks it for every seal (exon_crypto_backend). Stateless per call: only the key. */
static struct
{
    sodium_seal_fn seal;
    sodium_open_fn open;
    int loaded;                    /* 1 once found (never unloaded) */
    int active;                    /* 1: seal and open with libsodium */
}
seal_sodium;

static pthread_mutex_t sodium_mutex = PTHREAD_MUTEX_INITIALIZER;

static void seal_load_once(void)
{
    void *handle = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL)
    {
        const char *why = dlerror();
        snprintf(seal_lib.reason, sizeof(seal_lib.reason),
            "encrypted links need OpenSSL 3's libcrypto.so.3, which could not be loaded (%s)",
            why != NULL ? why : "not found");
        seal_lib.loaded = -1;
        return;
    }
    static const char *const names[] = {
        "EVP_chacha20_poly1305", "EVP_CIPHER_CTX_new", "EVP_CIPHER_CTX_free",
        "EVP_CipherInit_ex", "EVP_CipherUpdate", "EVP_CipherFinal_ex", "EVP_CIPHER_CTX_ctrl",
    };
    void *fns[7];
    for (size_t i = 0; i < 7; i++)
    {
        fns[i] = dlsym(handle, names[i]);
        if (fns[i] == NULL)
        {
            snprintf(seal_lib.reason, sizeof(seal_lib.reason),
                "libcrypto.so.3 lacks %s (encrypted links need OpenSSL 3)", names[i]);
            seal_lib.loaded = -1;
            return;
        }
    }
    /* object pointers to function pointers: POSIX dlsym guarantees the round trip */
    memcpy(&seal_lib.chacha20_poly1305, &fns[0], sizeof(void *));
    memcpy(&seal_lib.ctx_new, &fns[1], sizeof(void *));
    memcpy(&seal_lib.ctx_free, &fns[2], sizeof(void *));
    memcpy(&seal_lib.init, &fns[3], sizeof(void *));
    memcpy(&seal_lib.update, &fns[4], sizeof(void *));
    memcpy(&seal_lib.final, &fns[5], sizeof(void *));
    memcpy(&seal_lib.ctrl, &fns[6], sizeof(void *));
    seal_lib.cipher = seal_lib.chacha20_poly1305();
    if (seal_lib.cipher == NULL)
    {
        snprintf(seal_lib.reason, sizeof(seal_lib.reason),
            "libcrypto.so.3 has no ChaCha20-Poly1305 (disabled in this build)");
        seal_lib.loaded = -1;
        return;
    }
    seal_lib.loaded = 1; /* the handle stays open for the life of the process */
}

int exon_crypto_load(void)
{
    pthread_once(&seal_once, seal_load_once);
    if (seal_lib.loaded != 1)
    {
        return exon_set_error(EXON_E_UNAVAILABLE, "%s", seal_lib.reason);
    }
    return 0;
}

int exon_crypto_use_sodium(const char *path)
{
    pthread_mutex_lock(&sodium_mutex);
    if (seal_sodium.loaded)
    {
        __atomic_store_n(&seal_sodium.active, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&sodium_mutex);
        return 0;
    }
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL)
    {
        const char *why = dlerror();
        pthread_mutex_unlock(&sodium_mutex);
        return exon_set_error(EXON_E_UNAVAILABLE, "libsodium could not be loaded from %s (%s)",
                              path, why != NULL ? why : "not found");
    }
    void *init = dlsym(handle, "sodium_init");
    void *sealer = dlsym(handle, "crypto_aead_chacha20poly1305_ietf_encrypt_detached");
    void *opener = dlsym(handle, "crypto_aead_chacha20poly1305_ietf_decrypt_detached");
    sodium_init_fn init_fn = NULL;
    if (init != NULL)
    {
        memcpy(&init_fn, &init, sizeof(void *));
    }
    /* sodium_init: 0 done now, 1 done before; it picks the SIMD implementations */
    if (init_fn == NULL || sealer == NULL || opener == NULL || init_fn() < 0)
    {
        dlclose(handle);
        pthread_mutex_unlock(&sodium_mutex);
        return exon_set_error(EXON_E_UNAVAILABLE,
                              "%s is no usable libsodium (no IETF ChaCha20-Poly1305)", path);
    }
    memcpy(&seal_sodium.seal, &sealer, sizeof(void *));
    memcpy(&seal_sodium.open, &opener, sizeof(void *));
    /* release: a thread that sees `active` (acquire) sees the pointers */
    __atomic_store_n(&seal_sodium.loaded, 1, __ATOMIC_RELEASE); /* never dlclosed */
    __atomic_store_n(&seal_sodium.active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&sodium_mutex);
    return 0;
}

int exon_crypto_backend(int32_t want)
{
    if (want == EXON_CRYPTO_SODIUM && !__atomic_load_n(&seal_sodium.loaded, __ATOMIC_ACQUIRE))
    {
        return exon_set_error(EXON_E_UNAVAILABLE, "libsodium is not loaded");
    }
    if (want == EXON_CRYPTO_OPENSSL || want == EXON_CRYPTO_SODIUM)
    {
        __atomic_store_n(&seal_sodium.active, want == EXON_CRYPTO_SODIUM, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&seal_sodium.active, __ATOMIC_ACQUIRE) ? EXON_CRYPTO_SODIUM
                                                                 : EXON_CRYPTO_OPENSSL;
}

static inline int seal_with_sodium(void)
{
    return __atomic_load_n(&seal_sodium.active, __ATOMIC_ACQUIRE);
}

static void seal_nonce(uint64_t counter, uint8_t nonce[12])
{
    memset(nonce, 0, 4);
    for (int k = 0; k < 8; k++)
    {
        nonce[4 + k] = (uint8_t)(counter >> (8 * k));
    }
}

/* (Re)key a direction's context for encryption (enc 1) or decryption (enc 0). */
static int seal_key_ctx(exon_seal_dir_t *d, int enc)
{
    if (seal_lib.init(d->ctx, seal_lib.cipher, NULL, d->key, NULL, enc) != 1)
    {
        return exon_set_error(EXON_E_GENERIC, "seal: ChaCha20-Poly1305 key setup failed");
    }
    return 0;
}

int exon_seal_rekey(const uint8_t *key, uint8_t *out)
{
    int rc = exon_crypto_load();
    if (rc < 0)
    {
        return rc;
    }
    uint8_t nonce[12];
    seal_nonce(SEAL_COUNTER_LIMIT, nonce);
    uint8_t zeros[EXON_SEAL_KEY_LENGTH] = {0};
    uint8_t buf[EXON_SEAL_KEY_LENGTH + 16];
    if (seal_with_sodium())
    {
        if (seal_sodium.seal(buf, buf + EXON_SEAL_KEY_LENGTH, NULL, zeros, EXON_SEAL_KEY_LENGTH,
                             NULL, 0, NULL, nonce, key) != 0)
        {
            return exon_set_error(EXON_E_GENERIC, "seal: rekey failed");
        }
        memcpy(out, buf, EXON_SEAL_KEY_LENGTH);
        memset(buf, 0, sizeof(buf));
        return 0;
    }
    evp_cipher_ctx_t *ctx = seal_lib.ctx_new();
    if (ctx == NULL)
    {
        return -ENOMEM;
    }
    int outl = 0;
    int ok = seal_lib.init(ctx, seal_lib.cipher, NULL, key, nonce, 1) == 1 &&
        seal_lib.update(ctx, buf, &outl, zeros, EXON_SEAL_KEY_LENGTH) == 1 &&
        seal_lib.final(ctx, buf + outl, &outl) == 1;
    seal_lib.ctx_free(ctx);
    if (!ok)
    {
        return exon_set_error(EXON_E_GENERIC, "seal: rekey failed");
    }
    memcpy(out, buf, EXON_SEAL_KEY_LENGTH);
    memset(buf, 0, sizeof(buf));
    return 0;
}

static int seal_dir_init(exon_seal_dir_t *d, const uint8_t *key, int enc)
{
    memcpy(d->key, key, EXON_SEAL_KEY_LENGTH);
    d->next = 0;
    d->epoch = 0;
    d->ctx = seal_lib.ctx_new();
    if (d->ctx == NULL)
    {
        return -ENOMEM;
    }
    return seal_key_ctx(d, enc);
}

int exon_seal_init(exon_seal_t *seal, const uint8_t *send_key, const uint8_t *recv_key,
                   int32_t shift)
{
    memset(seal, 0, sizeof(*seal));
    if (shift < 1 || shift > 62)
    {
        return exon_set_error(EXON_E_ARGUMENT, "seal: shift %d is not 1..62", shift);
    }
    int rc = exon_crypto_load();
    if (rc < 0)
    {
        return rc;
    }
    seal->shift = shift;
    if ((rc = seal_dir_init(&seal->send, send_key, 1)) < 0 ||
        (rc = seal_dir_init(&seal->recv, recv_key, 0)) < 0)
    {
        exon_seal_close(seal);
        return rc;
    }
    return 0;
}

void exon_seal_close(exon_seal_t *seal)
{
    exon_seal_dir_t *dirs[2] = { &seal->send, &seal->recv };
    for (int i = 0; i < 2; i++)
    {
        if (dirs[i]->ctx != NULL)
        {
            seal_lib.ctx_free(dirs[i]->ctx);
            dirs[i]->ctx = NULL;
        }
        memset(dirs[i]->key, 0, EXON_SEAL_KEY_LENGTH);
    }
}

/* Move a direction's key forward to `epoch` (at most one step for a receiver). */
static int seal_advance(exon_seal_dir_t *d, uint64_t epoch, int enc)
{
    while (d->epoch < epoch)
    {
        uint8_t next[EXON_SEAL_KEY_LENGTH];
        int rc = exon_seal_rekey(d->key, next);
        if (rc < 0)
        {
            return rc;
        }
        memcpy(d->key, next, EXON_SEAL_KEY_LENGTH);
        memset(next, 0, sizeof(next));
        d->epoch++;
        if ((rc = seal_key_ctx(d, enc)) < 0)
        {
            return rc;
        }
    }
    return 0;
}

int64_t exon_seal_seal(exon_seal_t *seal, const uint8_t *ad, const uint8_t *in, int32_t length,
                       uint8_t *out)
{
    exon_seal_dir_t *d = &seal->send;
    if (d->ctx == NULL || length < 0)
    {
        return exon_set_error(EXON_E_STATE, "seal: closed, or a negative length");
    }
    uint64_t counter = d->next;
    if (counter >= SEAL_COUNTER_LIMIT - 1)
    {
        return exon_set_error(EXON_E_STATE, "seal: the link's send counter is exhausted");
    }
    int rc = seal_advance(d, counter >> seal->shift, 1);
    if (rc < 0)
    {
        return rc;
    }
    uint8_t nonce[12];
    seal_nonce(counter, nonce);
    for (int k = 0; k < 8; k++)
    {
        out[k] = (uint8_t)(counter >> (8 * k));
    }
    int outl = 0;
    uint8_t *ct = out + EXON_SEAL_COUNTER_LENGTH;
    int ok = seal_with_sodium()
        ? seal_sodium.seal(ct, ct + length, NULL, in, (unsigned long long)length, ad,
                           EXON_SEAL_AD_LENGTH, NULL, nonce, d->key) == 0
        : seal_lib.init(d->ctx, NULL, NULL, NULL, nonce, 1) == 1 &&
        seal_lib.update(d->ctx, NULL, &outl, ad, EXON_SEAL_AD_LENGTH) == 1 &&
        (length == 0 || seal_lib.update(d->ctx, ct, &outl, in, length) == 1) &&
        seal_lib.final(d->ctx, ct + length, &outl) == 1 &&
        seal_lib.ctrl(d->ctx, SEAL_CTRL_AEAD_GET_TAG, EXON_SEAL_TAG_LENGTH, ct + length) == 1;
    if (!ok)
    {
        return exon_set_error(EXON_E_GENERIC, "seal: ChaCha20-Poly1305 sealing failed");
    }
    d->next = counter + 1;
    seal->sealed++;
    return (int64_t)counter;
}

int32_t exon_seal_open(exon_seal_t *seal, const uint8_t *ad, const uint8_t *in, int32_t length,
                       uint8_t *out)
{
    exon_seal_dir_t *d = &seal->recv;
    if (d->ctx == NULL || length < EXON_SEAL_OVERHEAD)
    {
        seal->failures++;
        return EXON_SEAL_NOT_OPENED;
    }
    uint64_t counter = 0;
    for (int k = 7; k >= 0; k--)
    {
        counter = (counter << 8) | in[k];
    }
    uint64_t epoch = counter >> seal->shift;
    if (counter < d->next || counter >= SEAL_COUNTER_LIMIT || epoch < d->epoch ||
        epoch > d->epoch + 1)
    {
        seal->failures++;
        return EXON_SEAL_NOT_OPENED;
    }
    exon_seal_dir_t trial = *d; /* the next key is tried without committing to it */
    evp_cipher_ctx_t *fresh = NULL;
    if (epoch != d->epoch)
    {
        fresh = seal_lib.ctx_new();
        if (fresh == NULL)
        {
            seal->failures++;
            return EXON_SEAL_NOT_OPENED;
        }
        trial.ctx = fresh;
        if (exon_seal_rekey(d->key, trial.key) < 0 || seal_key_ctx(&trial, 0) < 0)
        {
            seal_lib.ctx_free(fresh);
            seal->failures++;
            return EXON_SEAL_NOT_OPENED;
        }
        trial.epoch = epoch;
    }
    int32_t n = length - EXON_SEAL_OVERHEAD;
    const uint8_t *ct = in + EXON_SEAL_COUNTER_LENGTH;
    uint8_t tag[EXON_SEAL_TAG_LENGTH];
    memcpy(tag, ct + n, EXON_SEAL_TAG_LENGTH); /* before `out` (maybe in place) is written */
    uint8_t nonce[12];
    seal_nonce(counter, nonce);
    int outl = 0;
    int ok = seal_with_sodium()
        ? seal_sodium.open(out, NULL, ct, (unsigned long long)n, tag, ad, EXON_SEAL_AD_LENGTH,
                           nonce, trial.key) == 0
        : seal_lib.init(trial.ctx, NULL, NULL, NULL, nonce, 0) == 1 &&
        seal_lib.ctrl(trial.ctx, SEAL_CTRL_AEAD_SET_TAG, EXON_SEAL_TAG_LENGTH, tag) == 1 &&
        seal_lib.update(trial.ctx, NULL, &outl, ad, EXON_SEAL_AD_LENGTH) == 1 &&
        (n == 0 || seal_lib.update(trial.ctx, out, &outl, ct, n) == 1) &&
        seal_lib.final(trial.ctx, out + n, &outl) == 1;
    if (!ok)
    {
        if (fresh != NULL)
        {
            seal_lib.ctx_free(fresh);
        }
        memset(&trial, 0, sizeof(trial));
        seal->failures++;
        return EXON_SEAL_NOT_OPENED;
    }
    if (fresh != NULL) /* the peer moved to the next key: so do we */
    {
        seal_lib.ctx_free(d->ctx);
        *d = trial;
    }
    d->next = counter + 1;
    seal->opened++;
    return n;
}
