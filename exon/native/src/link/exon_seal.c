/*
 * exon_seal.c: sealed frames of encrypted links; see exon_seal.h. ChaCha20-Poly1305 and
 * AES-256-GCM from libcrypto.so.3, loaded at run time, or from libsodium when
 * exon_crypto_use_sodium found it (the same AEADs: the two interoperate byte for byte).
 *
 * Why libsodium when it is there: a frame is sealed or opened right after a wake-up, with
 * cold caches and TLB. OpenSSL's EVP path (five calls per frame through the provider layer,
 * OSSL_PARAM look-ups for the IV length and the tag) touches many more pages than
 * libsodium's one call: measured in the req/rep round trip of `exon bench sockets
 * --encrypted`, a 64 B seal took a median 2.6 us and an open 5.7 us with OpenSSL, 1.5 and
 * 3.0 us with libsodium (hot in a loop both are near 1 us). libsodium also checks the tag
 * before it writes any plaintext.
 *
 * Why AES-256-GCM where both hosts have AES-NI: in thread CPU time on the project's
 * machine (libsodium, hot loop) a 64 B seal costs 0.58 us with ChaCha20-Poly1305 and
 * 0.26 us with AES-256-GCM, a 1 KiB one 2.3 us and 1.0 us. Its key schedule and GHASH
 * table are computed once per key (libsodium's beforenm state, kept per direction).
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
typedef const evp_cipher_t *(*evp_aes_256_gcm_fn)(void);

#define SEAL_CTRL_AEAD_GET_TAG 0x10 /* EVP_CTRL_AEAD_GET_TAG (= EVP_CTRL_GCM_GET_TAG) */
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
    const evp_cipher_t *cipher;    /* ChaCha20-Poly1305 */
    const evp_cipher_t *aes_gcm;   /* AES-256-GCM; NULL: this libcrypto lacks it */
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
typedef int (*sodium_aes_available_fn)(void);
typedef int (*sodium_aes_key_fn)(void *state, const unsigned char *k);
typedef int (*sodium_aes_seal_fn)(unsigned char *c, unsigned char *mac,
                                  unsigned long long *maclen, const unsigned char *m,
                                  unsigned long long mlen, const unsigned char *ad,
                                  unsigned long long adlen, const unsigned char *nsec,
                                  const unsigned char *npub, const void *state);
typedef int (*sodium_aes_open_fn)(unsigned char *m, unsigned char *nsec, const unsigned char *c,
                                  unsigned long long clen, const unsigned char *mac,
                                  const unsigned char *ad, unsigned long long adlen,
                                  const unsigned char *npub, const void *state);

/* libsodium's crypto_aead_aes256gcm_state: 512 bytes, 16-byte aligned (checked against
 * crypto_aead_aes256gcm_statebytes() at load) */
#define SEAL_AES_STATE_BYTES 512
#define SEAL_AES_STATE_ALIGN 64

/* The libsodium backend: set once (under sodium_mutex) by exon_crypto_use_sodium; `active`
 * picks it for every seal (exon_crypto_backend). Stateless per call: only the key. */
static struct
{
    sodium_seal_fn seal;
    sodium_open_fn open;
    sodium_aes_key_fn aes_key;     /* AES-256-GCM: NULL unless the CPU has AES-NI + CLMUL */
    sodium_aes_seal_fn aes_seal;
    sodium_aes_open_fn aes_open;
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
    void *aes = dlsym(handle, "EVP_aes_256_gcm");
    if (aes != NULL)
    {
        evp_aes_256_gcm_fn aes_fn;
        memcpy(&aes_fn, &aes, sizeof(void *));
        seal_lib.aes_gcm = aes_fn(); /* NULL when disabled: AESGCM is then never offered */
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
    void *aes_available = dlsym(handle, "crypto_aead_aes256gcm_is_available");
    void *aes_key = dlsym(handle, "crypto_aead_aes256gcm_beforenm");
    void *aes_seal = dlsym(handle, "crypto_aead_aes256gcm_encrypt_detached_afternm");
    void *aes_open = dlsym(handle, "crypto_aead_aes256gcm_decrypt_detached_afternm");
    void *aes_size = dlsym(handle, "crypto_aead_aes256gcm_statebytes");
    if (aes_available != NULL && aes_key != NULL && aes_seal != NULL && aes_open != NULL &&
        aes_size != NULL)
    {
        sodium_aes_available_fn available_fn;
        size_t (*size_fn)(void);
        memcpy(&available_fn, &aes_available, sizeof(void *));
        memcpy(&size_fn, &aes_size, sizeof(void *));
        if (available_fn() == 1 && size_fn() <= SEAL_AES_STATE_BYTES)
        {
            memcpy(&seal_sodium.aes_key, &aes_key, sizeof(void *));
            memcpy(&seal_sodium.aes_seal, &aes_seal, sizeof(void *));
            memcpy(&seal_sodium.aes_open, &aes_open, sizeof(void *));
        }
    }
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

int exon_crypto_aes_available(void)
{
    if (exon_crypto_load() < 0 || seal_lib.aes_gcm == NULL)
    {
        return 0;
    }
    if (__atomic_load_n(&seal_sodium.loaded, __ATOMIC_ACQUIRE))
    {
        return seal_sodium.aes_key != NULL;
    }
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
#else
    return 0; /* no check written for this architecture: ChaCha20-Poly1305 only */
#endif
}

/* Noise's nonces: 32 zero bits, then the counter, little-endian (ChaChaPoly) or
 * big-endian (AESGCM). */
static void seal_nonce(int32_t cipher, uint64_t counter, uint8_t nonce[12])
{
    memset(nonce, 0, 4);
    for (int k = 0; k < 8; k++)
    {
        nonce[cipher == EXON_SEAL_AESGCM ? 11 - k : 4 + k] = (uint8_t)(counter >> (8 * k));
    }
}

static const evp_cipher_t *seal_evp(int32_t cipher)
{
    return cipher == EXON_SEAL_AESGCM ? seal_lib.aes_gcm : seal_lib.cipher;
}

static void seal_aes_free(void *state)
{
    if (state != NULL)
    {
        memset(state, 0, SEAL_AES_STATE_BYTES);
        free(state);
    }
}

/* libsodium's AES-256-GCM state for `key` (NULL where libsodium has no AES-256-GCM: the
 * OpenSSL context serves); 0 or -ENOMEM. */
static int seal_aes_state(const uint8_t *key, void **out)
{
    *out = NULL;
    if (!__atomic_load_n(&seal_sodium.loaded, __ATOMIC_ACQUIRE) || seal_sodium.aes_key == NULL)
    {
        return 0;
    }
    void *state = NULL;
    if (posix_memalign(&state, SEAL_AES_STATE_ALIGN, SEAL_AES_STATE_BYTES) != 0)
    {
        return -ENOMEM;
    }
    seal_sodium.aes_key(state, key);
    *out = state;
    return 0;
}

/* (Re)key a direction for encryption (enc 1) or decryption (enc 0): its OpenSSL context
 * and, for AES-256-GCM, libsodium's state. */
static int seal_key_dir(exon_seal_dir_t *d, int32_t cipher, int enc)
{
    if (seal_lib.init(d->ctx, seal_evp(cipher), NULL, d->key, NULL, enc) != 1)
    {
        return exon_set_error(EXON_E_GENERIC, "seal: AEAD key setup failed");
    }
    if (cipher != EXON_SEAL_AESGCM)
    {
        return 0;
    }
    void *state = NULL;
    int rc = seal_aes_state(d->key, &state);
    if (rc < 0)
    {
        return rc;
    }
    seal_aes_free(d->aes);
    d->aes = state;
    return 0;
}

/* One AEAD operation with the OpenSSL context `ctx` (keyed): seal (enc 1: `tag` written)
 * or open (enc 0: `tag` checked) `n` bytes of `in` into `out` with the 20-byte `ad`. */
static int seal_evp_run(evp_cipher_ctx_t *ctx, int enc, const uint8_t *nonce, const uint8_t *ad,
                        const uint8_t *in, int32_t n, uint8_t *out, uint8_t *tag)
{
    int outl = 0;
    return seal_lib.init(ctx, NULL, NULL, NULL, nonce, enc) == 1 &&
        (enc || seal_lib.ctrl(ctx, SEAL_CTRL_AEAD_SET_TAG, EXON_SEAL_TAG_LENGTH, tag) == 1) &&
        seal_lib.update(ctx, NULL, &outl, ad, EXON_SEAL_AD_LENGTH) == 1 &&
        (n == 0 || seal_lib.update(ctx, out, &outl, in, n) == 1) &&
        seal_lib.final(ctx, out + n, &outl) == 1 &&
        (!enc || seal_lib.ctrl(ctx, SEAL_CTRL_AEAD_GET_TAG, EXON_SEAL_TAG_LENGTH, tag) == 1);
}

int exon_seal_rekey(int32_t cipher, const uint8_t *key, uint8_t *out)
{
    int rc = exon_crypto_load();
    if (rc < 0)
    {
        return rc;
    }
    if (cipher != EXON_SEAL_CHACHAPOLY && (cipher != EXON_SEAL_AESGCM || seal_lib.aes_gcm == NULL))
    {
        return exon_set_error(EXON_E_ARGUMENT, "seal: cipher %d is unknown or unavailable", cipher);
    }
    uint8_t nonce[12];
    seal_nonce(cipher, SEAL_COUNTER_LIMIT, nonce);
    static const uint8_t zeros[EXON_SEAL_KEY_LENGTH];
    uint8_t buf[EXON_SEAL_KEY_LENGTH];
    uint8_t tag[EXON_SEAL_TAG_LENGTH];
    int ok;
    if (seal_with_sodium() && cipher == EXON_SEAL_CHACHAPOLY)
    {
        ok = seal_sodium.seal(buf, tag, NULL, zeros, EXON_SEAL_KEY_LENGTH, NULL, 0, NULL, nonce,
                              key) == 0;
    }
    else
    {
        evp_cipher_ctx_t *ctx = seal_lib.ctx_new();
        if (ctx == NULL)
        {
            return -ENOMEM;
        }
        int outl = 0;
        ok = seal_lib.init(ctx, seal_evp(cipher), NULL, key, nonce, 1) == 1 &&
            seal_lib.update(ctx, buf, &outl, zeros, EXON_SEAL_KEY_LENGTH) == 1 &&
            seal_lib.final(ctx, buf + outl, &outl) == 1;
        seal_lib.ctx_free(ctx);
    }
    if (!ok)
    {
        return exon_set_error(EXON_E_GENERIC, "seal: rekey failed");
    }
    memcpy(out, buf, EXON_SEAL_KEY_LENGTH);
    memset(buf, 0, sizeof(buf));
    return 0;
}

static int seal_dir_init(exon_seal_dir_t *d, int32_t cipher, const uint8_t *key, int enc)
{
    memcpy(d->key, key, EXON_SEAL_KEY_LENGTH);
    d->next = 0;
    d->epoch = 0;
    d->bytes = 0;
    d->ctx = seal_lib.ctx_new();
    if (d->ctx == NULL)
    {
        return -ENOMEM;
    }
    return seal_key_dir(d, cipher, enc);
}

int exon_seal_init(exon_seal_t *seal, int32_t cipher, const uint8_t *send_key,
                   const uint8_t *recv_key, int32_t shift, uint64_t data_limit)
{
    memset(seal, 0, sizeof(*seal));
    if (shift < 1 || shift > 62 || data_limit < 1)
    {
        return exon_set_error(EXON_E_ARGUMENT, "seal: shift %d is not 1..62, or no data limit",
                              shift);
    }
    int rc = exon_crypto_load();
    if (rc < 0)
    {
        return rc;
    }
    if (cipher != EXON_SEAL_CHACHAPOLY && (cipher != EXON_SEAL_AESGCM || seal_lib.aes_gcm == NULL))
    {
        return exon_set_error(EXON_E_UNAVAILABLE, "seal: cipher %d is unknown, or %s", cipher,
                              "libcrypto.so.3 lacks AES-256-GCM");
    }
    seal->shift = shift;
    seal->cipher = cipher;
    seal->data_limit = data_limit;
    if ((rc = seal_dir_init(&seal->send, cipher, send_key, 1)) < 0 ||
        (rc = seal_dir_init(&seal->recv, cipher, recv_key, 0)) < 0)
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
        seal_aes_free(dirs[i]->aes);
        dirs[i]->aes = NULL;
        memset(dirs[i]->key, 0, EXON_SEAL_KEY_LENGTH);
    }
}

/* Move a direction's key forward to `epoch` (at most one step for a receiver). */
static int seal_advance(exon_seal_dir_t *d, int32_t cipher, uint64_t epoch, int enc)
{
    while (d->epoch < epoch)
    {
        uint8_t next[EXON_SEAL_KEY_LENGTH];
        int rc = exon_seal_rekey(cipher, d->key, next);
        if (rc < 0)
        {
            return rc;
        }
        memcpy(d->key, next, EXON_SEAL_KEY_LENGTH);
        memset(next, 0, sizeof(next));
        d->epoch++;
        d->bytes = 0;
        if ((rc = seal_key_dir(d, cipher, enc)) < 0)
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
    if ((counter >> seal->shift) == d->epoch && d->bytes > 0 &&
        (d->bytes >= seal->data_limit || (uint64_t)length > seal->data_limit - d->bytes))
    {
        /* the key's data limit: the first frame of the next epoch, with the next key */
        uint64_t epoch = d->epoch + 1;
        counter = epoch << seal->shift;
        if ((counter >> seal->shift) != epoch)
        {
            counter = SEAL_COUNTER_LIMIT; /* no next epoch: exhausted below */
        }
    }
    if (counter >= SEAL_COUNTER_LIMIT - 1)
    {
        return exon_set_error(EXON_E_STATE, "seal: the link's send counter is exhausted");
    }
    int rc = seal_advance(d, seal->cipher, counter >> seal->shift, 1);
    if (rc < 0)
    {
        return rc;
    }
    uint8_t nonce[12];
    seal_nonce(seal->cipher, counter, nonce);
    for (int k = 0; k < 8; k++)
    {
        out[k] = (uint8_t)(counter >> (8 * k));
    }
    uint8_t *ct = out + EXON_SEAL_COUNTER_LENGTH;
    unsigned long long n = (unsigned long long)length;
    int ok;
    if (seal->cipher == EXON_SEAL_AESGCM && d->aes != NULL && seal_with_sodium())
    {
        ok = seal_sodium.aes_seal(ct, ct + length, NULL, in, n, ad, EXON_SEAL_AD_LENGTH, NULL,
                                  nonce, d->aes) == 0;
    }
    else if (seal->cipher == EXON_SEAL_CHACHAPOLY && seal_with_sodium())
    {
        ok = seal_sodium.seal(ct, ct + length, NULL, in, n, ad, EXON_SEAL_AD_LENGTH, NULL, nonce,
                              d->key) == 0;
    }
    else
    {
        ok = seal_evp_run(d->ctx, 1, nonce, ad, in, length, ct, ct + length);
    }
    if (!ok)
    {
        return exon_set_error(EXON_E_GENERIC, "seal: sealing failed");
    }
    d->next = counter + 1;
    d->bytes += (uint64_t)length;
    seal->sealed++;
    return 0; /* not the counter: one of 2^63 or more would read as an error */
}

/* The next epoch's keys of a receiving direction, in `trial` (a copy of `d` with its own
 * context and state), committed only when a frame opens with them. */
static int seal_trial(const exon_seal_dir_t *d, int32_t cipher, exon_seal_dir_t *trial)
{
    *trial = *d;
    trial->aes = NULL;
    trial->ctx = seal_lib.ctx_new();
    if (trial->ctx == NULL)
    {
        return -ENOMEM;
    }
    int rc = exon_seal_rekey(cipher, d->key, trial->key);
    if (rc == 0)
    {
        rc = seal_key_dir(trial, cipher, 0);
    }
    trial->epoch = d->epoch + 1;
    return rc;
}

static void seal_trial_free(exon_seal_dir_t *trial)
{
    if (trial->ctx != NULL)
    {
        seal_lib.ctx_free(trial->ctx);
    }
    seal_aes_free(trial->aes);
    memset(trial, 0, sizeof(*trial));
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
    exon_seal_dir_t trial;
    const exon_seal_dir_t *k = d;
    if (epoch != d->epoch) /* the next key is tried without committing to it */
    {
        if (seal_trial(d, seal->cipher, &trial) < 0)
        {
            seal_trial_free(&trial);
            seal->failures++;
            return EXON_SEAL_NOT_OPENED;
        }
        k = &trial;
    }
    int32_t n = length - EXON_SEAL_OVERHEAD;
    const uint8_t *ct = in + EXON_SEAL_COUNTER_LENGTH;
    uint8_t tag[EXON_SEAL_TAG_LENGTH];
    memcpy(tag, ct + n, EXON_SEAL_TAG_LENGTH); /* before `out` (maybe in place) is written */
    uint8_t nonce[12];
    seal_nonce(seal->cipher, counter, nonce);
    unsigned long long clen = (unsigned long long)n;
    int ok;
    if (seal->cipher == EXON_SEAL_AESGCM && k->aes != NULL && seal_with_sodium())
    {
        ok = seal_sodium.aes_open(out, NULL, ct, clen, tag, ad, EXON_SEAL_AD_LENGTH, nonce,
                                  k->aes) == 0;
    }
    else if (seal->cipher == EXON_SEAL_CHACHAPOLY && seal_with_sodium())
    {
        ok = seal_sodium.open(out, NULL, ct, clen, tag, ad, EXON_SEAL_AD_LENGTH, nonce,
                              k->key) == 0;
    }
    else
    {
        ok = seal_evp_run(k->ctx, 0, nonce, ad, ct, n, out, tag);
    }
    if (!ok)
    {
        if (k == &trial)
        {
            seal_trial_free(&trial);
        }
        seal->failures++;
        return EXON_SEAL_NOT_OPENED;
    }
    if (k == &trial) /* the peer moved to the next key: so do we */
    {
        seal_lib.ctx_free(d->ctx);
        seal_aes_free(d->aes);
        *d = trial;
        memset(&trial, 0, sizeof(trial));
    }
    d->next = counter + 1;
    seal->opened++;
    return n;
}
