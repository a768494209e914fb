/* cdef: sealed frames of encrypted links (exon_seal.h). */
#define EXON_SEAL_KEY_LENGTH ...
#define EXON_SEAL_TAG_LENGTH ...
#define EXON_SEAL_OVERHEAD ...
#define EXON_SEAL_NOT_OPENED ...
#define EXON_SEAL_CHACHAPOLY ...
#define EXON_SEAL_AESGCM ...
#define EXON_SEAL_NO_DATA_LIMIT ...
#define EXON_SEAL_AESGCM_DATA_LIMIT ...
typedef struct exon_seal_dir_stct {
    uint64_t next;
    uint64_t epoch;
    uint64_t bytes;
    ...;
} exon_seal_dir_t;
typedef struct exon_seal_stct {
    exon_seal_dir_t send;
    exon_seal_dir_t recv;
    int32_t shift;
    int32_t cipher;
    uint64_t data_limit;
    uint64_t sealed;
    uint64_t opened;
    uint64_t failures;
    ...;
} exon_seal_t;
#define EXON_CRYPTO_OPENSSL ...
#define EXON_CRYPTO_SODIUM ...
int exon_crypto_load(void);
int exon_crypto_aes_available(void);
int exon_crypto_use_sodium(const char *path);
int exon_crypto_backend(int32_t want);
int exon_seal_init(exon_seal_t *seal, int32_t cipher, const uint8_t *send_key, const uint8_t *recv_key, int32_t shift, uint64_t data_limit);
void exon_seal_close(exon_seal_t *seal);
int64_t exon_seal_seal(exon_seal_t *seal, const uint8_t *ad, const uint8_t *in, int32_t length, uint8_t *out);
int32_t exon_seal_open(exon_seal_t *seal, const uint8_t *ad, const uint8_t *in, int32_t length, uint8_t *out);
int exon_seal_rekey(int32_t cipher, const uint8_t *key, uint8_t *out);
