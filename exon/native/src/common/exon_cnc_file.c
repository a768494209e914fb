/* exon_cnc_file.c: create, open and validate cnc.dat. Contract in exon_cnc_file.h. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/exon_cnc_file.h"

#define CNC_ALIGN(v) (((v) + (EXON_CNC_SECTION_ALIGNMENT - 1)) & ~((int64_t)EXON_CNC_SECTION_ALIGNMENT - 1))

_Static_assert(sizeof(exon_cnc_header_t) == EXON_CNC_HEADER_LENGTH, "CnC header must be 1024 bytes");
_Static_assert(offsetof(exon_cnc_header_t, agent_state) == 128, "agent_state at 128");
_Static_assert(offsetof(exon_cnc_header_t, to_clients_doorbell) == 320, "to_clients_doorbell at 320");

void exon_cnc_config_defaults(exon_cnc_config_t *config)
{
    memset(config, 0, sizeof(*config));
    config->to_driver_capacity = 1024 * 1024;
    config->to_clients_capacity = 1024 * 1024;
    config->counters_values_length = 1024 * 1024;
    config->error_log_length = 1024 * 1024;
    config->client_liveness_timeout_ns = 10LL * 1000 * 1000 * 1000;
    config->driver_timeout_ms = 10 * 1000;
    config->threading_mode = EXON_THREADING_SHARED;
    config->file_page_size = 4096;
    for (int i = 0; i < EXON_AGENT_COUNT; i++)
    {
        config->agent_thread_index[i] = 0;
    }
}

static int64_t raw_section_length(const exon_cnc_header_t *header, int32_t section)
{
    switch (section)
    {
        case EXON_CNC_SECTION_TO_DRIVER: return header->to_driver_buffer_length;
        case EXON_CNC_SECTION_TO_CLIENTS: return header->to_clients_buffer_length;
        case EXON_CNC_SECTION_COUNTERS_METADATA: return header->counters_metadata_buffer_length;
        case EXON_CNC_SECTION_COUNTERS_VALUES: return header->counters_values_buffer_length;
        case EXON_CNC_SECTION_ERROR_LOG: return header->error_log_buffer_length;
        default: return -1;
    }
}

int64_t exon_cnc_section_length(const exon_cnc_header_t *header, int32_t section)
{
    return raw_section_length(header, section);
}

int64_t exon_cnc_section_offset(const exon_cnc_header_t *header, int32_t section)
{
    if (section < 0 || section > EXON_CNC_SECTION_COUNT)
    {
        return -1;
    }
    int64_t offset = EXON_CNC_HEADER_LENGTH;
    for (int32_t i = 0; i < section; i++)
    {
        offset = CNC_ALIGN(offset + raw_section_length(header, i));
    }
    return offset;
}

int64_t exon_cnc_file_length(const exon_cnc_header_t *header)
{
    return exon_cnc_section_offset(header, EXON_CNC_SECTION_COUNT);
}

static bool power_of_two_in(int64_t v, int64_t min, int64_t max)
{
    return v >= min && v <= max && (v & (v - 1)) == 0;
}

/* Every missing directory of `dir` is created with `mode`; the last one (the driver's own)
 * is then set to exactly `mode` when we made it, or when it is a driver directory already
 * (it holds a cnc.dat: an older driver made it 0777) that we own. A directory that merely
 * exists (say /tmp, for a driver configured there) is never changed. */
static int mkdirs(const char *dir, mode_t mode)
{
    bool created = false;
    char path[EXON_MAX_PATH_LENGTH];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(path))
    {
        return exon_set_error(EXON_E_ARGUMENT, "cnc: directory name empty or too long");
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
    {
        if (path[i] == '/' || path[i] == '\0')
        {
            char saved = path[i];
            path[i] = '\0';
            int made = mkdir(path, mode);
            if (made == 0 && i == n)
            {
                created = true;
            }
            if (made < 0 && errno != EEXIST)
            {
                int err = errno;
                return exon_set_error(-err, "cnc: cannot create directory %s: %s", path, strerror(err));
            }
            path[i] = saved;
        }
    }
    char cnc_file[EXON_MAX_PATH_LENGTH + 16];
    snprintf(cnc_file, sizeof(cnc_file), "%s/%s", dir, EXON_CNC_FILE);
    struct stat st;
    bool ours = created || (access(cnc_file, F_OK) == 0 && stat(dir, &st) == 0 &&
                            st.st_uid == geteuid());
    if (ours && chmod(dir, mode) < 0)
    {
        int err = errno;
        return exon_set_error(-err, "cnc: cannot chmod directory %s: %s", dir, strerror(err));
    }
    return 0;
}

static int cnc_path(exon_cnc_t *cnc, const char *dir)
{
    int n = snprintf(cnc->path, sizeof(cnc->path), "%s/%s", dir, EXON_CNC_FILE);
    if (n < 0 || (size_t)n >= sizeof(cnc->path))
    {
        return exon_set_error(EXON_E_ARGUMENT, "cnc: directory name too long");
    }
    return 0;
}

static void set_pointers(exon_cnc_t *cnc)
{
    exon_cnc_header_t *h = cnc->header;
    cnc->to_driver_buffer = cnc->base + exon_cnc_section_offset(h, EXON_CNC_SECTION_TO_DRIVER);
    cnc->to_clients_buffer = cnc->base + exon_cnc_section_offset(h, EXON_CNC_SECTION_TO_CLIENTS);
    cnc->counters_metadata_buffer = cnc->base + exon_cnc_section_offset(h, EXON_CNC_SECTION_COUNTERS_METADATA);
    cnc->counters_values_buffer = cnc->base + exon_cnc_section_offset(h, EXON_CNC_SECTION_COUNTERS_VALUES);
    cnc->error_log_buffer = cnc->base + exon_cnc_section_offset(h, EXON_CNC_SECTION_ERROR_LOG);
}

int exon_cnc_create(exon_cnc_t *cnc, const char *dir, const exon_cnc_config_t *config)
{
    memset(cnc, 0, sizeof(*cnc));
    if (!power_of_two_in(config->to_driver_capacity, EXON_RING_MIN_CAPACITY, 1LL << 30) ||
        !power_of_two_in(config->to_clients_capacity, EXON_BROADCAST_MIN_CAPACITY, 1LL << 30))
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "cnc: to-driver (%d) and to-clients (%d) capacities must be powers of two >= 64",
            config->to_driver_capacity, config->to_clients_capacity);
    }
    if (config->counters_values_length < EXON_COUNTER_VALUE_LENGTH * EXON_SYSTEM_COUNTER_COUNT ||
        config->counters_values_length % EXON_COUNTER_VALUE_LENGTH != 0 ||
        config->counters_values_length > (1 << 28))
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "cnc: counters values length %d must be a multiple of %d between %d and %d",
            config->counters_values_length, EXON_COUNTER_VALUE_LENGTH,
            EXON_COUNTER_VALUE_LENGTH * EXON_SYSTEM_COUNTER_COUNT, 1 << 28);
    }
    if (config->error_log_length < EXON_ERROR_LOG_ALIGNMENT ||
        config->error_log_length % EXON_ERROR_LOG_ALIGNMENT != 0)
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "cnc: error log length %d must be a positive multiple of %d",
            config->error_log_length, EXON_ERROR_LOG_ALIGNMENT);
    }
    mode_t dir_mode = config->dir_mode > 0 ? (mode_t)(config->dir_mode & 07777) : 0700;
    int rc = mkdirs(dir, dir_mode);
    if (rc < 0)
    {
        return rc;
    }
    if ((rc = cnc_path(cnc, dir)) < 0)
    {
        return rc;
    }

    exon_cnc_header_t lengths;
    memset(&lengths, 0, sizeof(lengths));
    lengths.to_driver_buffer_length = config->to_driver_capacity + EXON_RING_TRAILER_LENGTH;
    lengths.to_clients_buffer_length = config->to_clients_capacity + EXON_BROADCAST_TRAILER_LENGTH;
    lengths.counters_values_buffer_length = config->counters_values_length;
    lengths.counters_metadata_buffer_length =
        config->counters_values_length / EXON_COUNTER_VALUE_LENGTH * EXON_COUNTER_METADATA_LENGTH;
    lengths.error_log_buffer_length = config->error_log_length;
    int64_t file_length = exon_cnc_file_length(&lengths);

    if (unlink(cnc->path) < 0 && errno != ENOENT)
    {
        int err = errno;
        return exon_set_error(-err, "cnc: cannot remove old %s: %s", cnc->path, strerror(err));
    }
    mode_t file_mode = dir_mode & 0666;
    int fd = open(cnc->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, file_mode);
    if (fd < 0)
    {
        int err = errno;
        return exon_set_error(-err, "cnc: cannot create %s: %s", cnc->path, strerror(err));
    }
    if (fchmod(fd, file_mode) < 0)
    {
        int err = errno;
        close(fd);
        unlink(cnc->path);
        return exon_set_error(-err, "cnc: cannot chmod %s: %s", cnc->path, strerror(err));
    }
    if (ftruncate(fd, file_length) < 0)
    {
        int err = errno;
        close(fd);
        unlink(cnc->path);
        return exon_set_error(-err, "cnc: cannot size %s to %lld bytes: %s",
            cnc->path, (long long)file_length, strerror(err));
    }
    void *base = mmap(NULL, (size_t)file_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int map_errno = errno;
    close(fd);
    if (MAP_FAILED == base)
    {
        unlink(cnc->path);
        return exon_set_error(-map_errno, "cnc: cannot map %s: %s", cnc->path, strerror(map_errno));
    }
    cnc->base = (uint8_t *)base;
    cnc->length = file_length;
    cnc->header = (exon_cnc_header_t *)base;

    exon_cnc_header_t *h = cnc->header;
    h->to_driver_buffer_length = lengths.to_driver_buffer_length;
    h->to_clients_buffer_length = lengths.to_clients_buffer_length;
    h->counters_metadata_buffer_length = lengths.counters_metadata_buffer_length;
    h->counters_values_buffer_length = lengths.counters_values_buffer_length;
    h->error_log_buffer_length = lengths.error_log_buffer_length;
    h->client_liveness_timeout_ns = config->client_liveness_timeout_ns;
    h->start_timestamp_ms = exon_epoch_ms();
    h->pid = (int64_t)getpid();
    h->driver_instance_id = config->driver_instance_id;
    h->file_page_size = config->file_page_size;
    h->threading_mode = config->threading_mode;
    for (int i = 0; i < EXON_AGENT_COUNT; i++)
    {
        h->agent_thread_index[i] = config->agent_thread_index[i];
    }
    h->driver_timeout_ms = config->driver_timeout_ms;
    h->magic = EXON_CNC_MAGIC;
    set_pointers(cnc);
    exon_cnc_set_driver_heartbeat_ms(cnc, h->start_timestamp_ms);
    EXON_STORE_REL(&h->cnc_version, EXON_CNC_VERSION);
    return 0;
}

static int open_fail(exon_cnc_t *cnc, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int open_fail(exon_cnc_t *cnc, int code, const char *fmt, ...)
{
    char what[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(what, sizeof(what), fmt, args);
    va_end(args);
    exon_cnc_close(cnc);
    return exon_set_error(code, "%s: %s", cnc->path, what);
}

static bool section_lengths_sane(const exon_cnc_header_t *h)
{
    return h->to_driver_buffer_length > EXON_RING_TRAILER_LENGTH &&
        power_of_two_in((int64_t)h->to_driver_buffer_length - EXON_RING_TRAILER_LENGTH, EXON_RING_MIN_CAPACITY, 1LL << 30) &&
        h->to_clients_buffer_length > EXON_BROADCAST_TRAILER_LENGTH &&
        power_of_two_in((int64_t)h->to_clients_buffer_length - EXON_BROADCAST_TRAILER_LENGTH, EXON_BROADCAST_MIN_CAPACITY, 1LL << 30) &&
        h->counters_metadata_buffer_length >= 0 && h->counters_values_buffer_length >= 0 &&
        h->error_log_buffer_length >= 0;
}

int exon_cnc_open(exon_cnc_t *cnc, const char *dir)
{
    memset(cnc, 0, sizeof(*cnc));
    int rc = cnc_path(cnc, dir);
    if (rc < 0)
    {
        return rc;
    }
    int fd = open(cnc->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
    {
        int err = errno;
        if (ENOENT == err)
        {
            return exon_set_error(-ENOENT, "%s: no such file (no driver has used directory %s)", cnc->path, dir);
        }
        return exon_set_error(-err, "%s: cannot open: %s", cnc->path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
    {
        int err = errno;
        close(fd);
        return exon_set_error(-err, "%s: cannot stat: %s", cnc->path, strerror(err));
    }
    if (st.st_size < EXON_CNC_HEADER_LENGTH)
    {
        close(fd);
        return exon_set_error(EXON_E_CNC_CORRUPT, "%s: truncated: %lld bytes, the header alone needs %d",
            cnc->path, (long long)st.st_size, EXON_CNC_HEADER_LENGTH);
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int map_errno = errno;
    close(fd);
    if (MAP_FAILED == base)
    {
        return exon_set_error(-map_errno, "%s: cannot map: %s", cnc->path, strerror(map_errno));
    }
    cnc->base = (uint8_t *)base;
    cnc->length = st.st_size;
    cnc->header = (exon_cnc_header_t *)base;
    exon_cnc_header_t *h = cnc->header;

    int32_t version = EXON_LOAD_ACQ(&h->cnc_version);
    int64_t magic = EXON_LOAD_RLX(&h->magic);
    if (EXON_CNC_MAGIC != magic)
    {
        if (0 == magic && 0 == version)
        {
            return open_fail(cnc, -EAGAIN, "not ready: the driver is still creating it (or died doing so)");
        }
        return open_fail(cnc, EXON_E_CNC_CORRUPT, "wrong magic 0x%llx (expected 0x%llx): not an exon CnC file",
            (long long)magic, (long long)EXON_CNC_MAGIC);
    }
    if (0 == version)
    {
        return open_fail(cnc, -EAGAIN, "not ready: the driver is still creating it (or died doing so)");
    }
    if (EXON_CNC_VERSION != version)
    {
        return open_fail(cnc, EXON_E_CNC_VERSION, "CnC version %lld, this exon reads version %lld",
            (long long)version, (long long)EXON_CNC_VERSION);
    }
    if (!section_lengths_sane(h))
    {
        return open_fail(cnc, EXON_E_CNC_CORRUPT,
            "inconsistent section lengths in the header (to-driver %lld, to-clients %lld)",
            (long long)h->to_driver_buffer_length, (long long)h->to_clients_buffer_length);
    }
    int64_t needed = exon_cnc_file_length(h);
    if (needed > cnc->length)
    {
        return open_fail(cnc, EXON_E_CNC_CORRUPT, "truncated: %lld bytes, its sections need %lld",
            (long long)cnc->length, (long long)needed);
    }
    set_pointers(cnc);
    return 0;
}

void exon_cnc_close(exon_cnc_t *cnc)
{
    if (NULL != cnc->base)
    {
        munmap(cnc->base, (size_t)cnc->length);
    }
    cnc->base = NULL;
    cnc->header = NULL;
    cnc->length = 0;
    cnc->to_driver_buffer = NULL;
    cnc->to_clients_buffer = NULL;
    cnc->counters_metadata_buffer = NULL;
    cnc->counters_values_buffer = NULL;
    cnc->error_log_buffer = NULL;
}

static int require_open(const exon_cnc_t *cnc)
{
    if (NULL == cnc->base)
    {
        return exon_set_error(EXON_E_STATE, "cnc: not open");
    }
    return 0;
}

int exon_cnc_to_driver_ring(exon_cnc_t *cnc, exon_ring_t *ring)
{
    int rc = require_open(cnc);
    return rc < 0 ? rc : exon_ring_init(ring, cnc->to_driver_buffer, cnc->header->to_driver_buffer_length);
}

int exon_cnc_to_clients_transmitter(exon_cnc_t *cnc, exon_broadcast_transmitter_t *tx)
{
    int rc = require_open(cnc);
    return rc < 0 ? rc :
        exon_broadcast_transmitter_init(tx, cnc->to_clients_buffer, cnc->header->to_clients_buffer_length);
}

int exon_cnc_to_clients_receiver(exon_cnc_t *cnc, exon_broadcast_receiver_t *rx)
{
    int rc = require_open(cnc);
    return rc < 0 ? rc :
        exon_broadcast_receiver_init(rx, cnc->to_clients_buffer, cnc->header->to_clients_buffer_length);
}

int exon_cnc_counters(exon_cnc_t *cnc, exon_counters_t *counters, int64_t free_to_reuse_timeout_ms)
{
    int rc = require_open(cnc);
    return rc < 0 ? rc : exon_counters_init(
        counters, cnc->counters_metadata_buffer, cnc->header->counters_metadata_buffer_length,
        cnc->counters_values_buffer, cnc->header->counters_values_buffer_length, free_to_reuse_timeout_ms);
}

int exon_cnc_error_log(exon_cnc_t *cnc, exon_error_log_t *log)
{
    int rc = require_open(cnc);
    return rc < 0 ? rc : exon_error_log_init(log, cnc->error_log_buffer, cnc->header->error_log_buffer_length);
}

static int64_t *heartbeat_ptr(const exon_cnc_t *cnc)
{
    return (int64_t *)(cnc->to_driver_buffer + cnc->header->to_driver_buffer_length - EXON_RING_TRAILER_LENGTH +
        EXON_RING_CONSUMER_HEARTBEAT_OFFSET);
}

int64_t exon_cnc_driver_heartbeat_ms(const exon_cnc_t *cnc)
{
    return NULL == cnc->base ? 0 : EXON_LOAD_ACQ(heartbeat_ptr(cnc));
}

void exon_cnc_set_driver_heartbeat_ms(exon_cnc_t *cnc, int64_t now_ms)
{
    if (NULL != cnc->base)
    {
        EXON_STORE_REL(heartbeat_ptr(cnc), now_ms);
    }
}

int exon_cnc_driver_is_alive(const exon_cnc_t *cnc, int64_t now_ms, int64_t timeout_ms)
{
    return NULL != cnc->base && now_ms - exon_cnc_driver_heartbeat_ms(cnc) <= timeout_ms ? 1 : 0;
}

int exon_cnc_is_active(const char *dir, int64_t now_ms, int64_t timeout_ms)
{
    exon_cnc_t cnc;
    if (exon_cnc_open(&cnc, dir) < 0)
    {
        return 0;
    }
    int alive = exon_cnc_driver_is_alive(&cnc, now_ms, timeout_ms);
    exon_cnc_close(&cnc);
    return alive;
}
