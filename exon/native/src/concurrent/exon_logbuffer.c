/* exon_logbuffer.c: create, open (validated), close and clean Aeron log buffer files. */
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "concurrent/exon_logbuffer.h"

static bool is_power_of_two(int64_t value)
{
    return value > 0 && (value & (value - 1)) == 0;
}

static int64_t log_file_length(int32_t term_length, int32_t page_size)
{
    int64_t raw = (int64_t)EXON_LOG_PARTITION_COUNT * term_length + EXON_LOG_META_DATA_LENGTH;
    return (raw + page_size - 1) & ~((int64_t)page_size - 1);
}

static void log_bind(exon_log_t *log, uint8_t *addr, int64_t length)
{
    exon_log_metadata_t *meta = (exon_log_metadata_t *)(addr + length - EXON_LOG_META_DATA_LENGTH);
    const exon_data_header_t *hdr = (const exon_data_header_t *)meta->default_header;

    log->addr = addr;
    log->length = length;
    log->meta = meta;
    log->term_length = meta->term_length;
    log->position_bits_to_shift = exon_log_bits_to_shift(meta->term_length);
    log->initial_term_id = meta->initial_term_id;
    log->mtu = meta->mtu_length;
    log->page_size = meta->page_size;
    log->session_id = hdr->session_id;
    log->stream_id = hdr->stream_id;
    log->max_message_length = exon_log_compute_max_message_length(meta->term_length);
    log->correlation_id = meta->correlation_id;
    for (int i = 0; i < EXON_LOG_PARTITION_COUNT; i++)
    {
        log->terms[i] = addr + (int64_t)i * meta->term_length;
    }
}

static int check_params(const char *path, const exon_log_params_t *p, int32_t page_size)
{
    if (!is_power_of_two(p->term_length) || p->term_length < EXON_TERM_MIN_LENGTH ||
        p->term_length > EXON_TERM_MAX_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "log %s: term_length %d must be a power of two in [%d, %d]",
            path, p->term_length, EXON_TERM_MIN_LENGTH, EXON_TERM_MAX_LENGTH);
    }
    if (!is_power_of_two(page_size) || page_size < EXON_PAGE_MIN_SIZE || page_size > EXON_PAGE_MAX_SIZE)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "log %s: page_size %d must be a power of two in [%d, %d]",
            path, page_size, EXON_PAGE_MIN_SIZE, EXON_PAGE_MAX_SIZE);
    }
    if (p->mtu < 2 * EXON_DATA_HEADER_LENGTH || p->mtu > EXON_MAX_UDP_PAYLOAD_LENGTH ||
        (p->mtu % EXON_FRAME_ALIGNMENT) != 0 || p->mtu > p->term_length)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "log %s: mtu %d must be a multiple of 32 in [64, %d] and <= term_length",
            path, p->mtu, EXON_MAX_UDP_PAYLOAD_LENGTH);
    }
    if (strlen(path) >= EXON_LOG_PATH_MAX)
    {
        return exon_set_error(EXON_E_ARGUMENT, "log path too long (%zu bytes)", strlen(path));
    }
    return 0;
}

static void init_metadata(exon_log_metadata_t *meta, const exon_log_params_t *p, int32_t page_size)
{
    int32_t window = p->publication_window_length > 0 ? p->publication_window_length : p->term_length / 2;
    int32_t rcv_window = p->receiver_window_length > 0 ? p->receiver_window_length : 128 * 1024;
    exon_data_header_t *hdr = (exon_data_header_t *)meta->default_header;

    if (window > p->term_length / 2)
    {
        window = p->term_length / 2;
    }
    if (rcv_window > p->term_length / 2)
    {
        rcv_window = p->term_length / 2;
    }

    meta->term_tail_counters[0] = exon_log_pack_tail(p->initial_term_id, 0);
    for (int i = 1; i < EXON_LOG_PARTITION_COUNT; i++)
    {
        int32_t expected_term_id = (int32_t)((uint32_t)p->initial_term_id + (uint32_t)i - EXON_LOG_PARTITION_COUNT);
        meta->term_tail_counters[i] = exon_log_pack_tail(expected_term_id, 0);
    }
    meta->active_term_count = 0;
    meta->exon_waiters = 0;
    meta->end_of_stream_position = INT64_MAX;
    meta->is_connected = p->is_connected;
    meta->active_transport_count = 0;
    meta->exon_layout_version = EXON_LOG_LAYOUT_VERSION;
    meta->exon_doorbell_count = 0;
    meta->correlation_id = p->correlation_id;
    meta->initial_term_id = p->initial_term_id;
    meta->default_frame_header_length = EXON_DATA_HEADER_LENGTH;
    meta->mtu_length = p->mtu;
    meta->term_length = p->term_length;
    meta->page_size = page_size;
    meta->publication_window_length = window;
    meta->receiver_window_length = rcv_window;
    meta->type = (uint8_t)p->type;
    meta->signal_eos = 1;
    meta->reliable = 1;
    meta->tether = 1;
    meta->sparse = (uint8_t)(p->sparse != 0);

    memset(meta->default_header, 0, sizeof(meta->default_header));
    hdr->frame_header.frame_length = 0;
    hdr->frame_header.version = EXON_FRAME_VERSION;
    hdr->frame_header.flags = EXON_DATA_FLAG_UNFRAGMENTED;
    hdr->frame_header.type = EXON_HDR_TYPE_DATA;
    hdr->term_offset = 0;
    hdr->session_id = p->session_id;
    hdr->stream_id = p->stream_id;
    hdr->term_id = p->initial_term_id;
    hdr->reserved_value = 0;

    /* Last, with release: a reader that sees the magic sees everything above. */
    EXON_STORE_REL(&meta->exon_magic, (int32_t)EXON_LOG_MAGIC);
}

int exon_log_create(exon_log_t *log, const char *path, const exon_log_params_t *params)
{
    int32_t page_size = params->page_size > 0 ? params->page_size : EXON_PAGE_MIN_SIZE;
    int rc = check_params(path, params, page_size);
    if (rc < 0)
    {
        return rc;
    }

    memset(log, 0, sizeof(*log));
    int64_t length = log_file_length(params->term_length, page_size);
    mode_t mode = params->file_mode > 0 ? (mode_t)(params->file_mode & 0666) : 0600;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
    {
        int err = errno;
        return exon_set_error(-err, "log %s: create failed: %s", path, strerror(err));
    }
    if (fchmod(fd, mode) < 0) /* exactly the mode asked for, whatever the umask */
    {
        int err = errno;
        close(fd);
        unlink(path);
        return exon_set_error(-err, "log %s: chmod failed: %s", path, strerror(err));
    }
    if (ftruncate(fd, length) < 0)
    {
        int err = errno;
        close(fd);
        unlink(path);
        return exon_set_error(-err, "log %s: ftruncate(%lld) failed: %s", path, (long long)length, strerror(err));
    }
    if (!params->sparse)
    {
        /* Reserve the pages now so a full /dev/shm fails here, not with SIGBUS later. */
        int err = posix_fallocate(fd, 0, length);
        if (err != 0 && err != EOPNOTSUPP && err != EINVAL)
        {
            close(fd);
            unlink(path);
            return exon_set_error(-err, "log %s: cannot reserve %lld bytes: %s", path, (long long)length, strerror(err));
        }
    }
    /* A log that is not sparse is mapped with its pages in place: its first pass then
     * costs no page fault per 4 KiB, in the driver or in any client (see open below). */
    int populate = params->sparse ? 0 : MAP_POPULATE;
    void *addr = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED | populate, fd, 0);
    int map_err = errno;
    close(fd);
    if (addr == MAP_FAILED)
    {
        unlink(path);
        return exon_set_error(-map_err, "log %s: mmap failed: %s", path, strerror(map_err));
    }

    exon_log_metadata_t *meta = (exon_log_metadata_t *)((uint8_t *)addr + length - EXON_LOG_META_DATA_LENGTH);
    init_metadata(meta, params, page_size);
    log_bind(log, (uint8_t *)addr, length);
    snprintf(log->path, sizeof(log->path), "%s", path);
    return 0;
}

static int corrupt(const char *path, const char *fmt, long long got, long long want)
{
    char what[256];
    snprintf(what, sizeof(what), fmt, got, want);
    return exon_set_error(EXON_E_LOG_CORRUPT, "log buffer %s: %s", path, what);
}

int exon_log_open(exon_log_t *log, const char *path)
{
    memset(log, 0, sizeof(*log));
    if (strlen(path) >= EXON_LOG_PATH_MAX)
    {
        return exon_set_error(EXON_E_ARGUMENT, "log path too long (%zu bytes)", strlen(path));
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
    {
        int err = errno;
        return exon_set_error(-err, "log %s: open failed: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
    {
        int err = errno;
        close(fd);
        return exon_set_error(-err, "log %s: fstat failed: %s", path, strerror(err));
    }
    int64_t length = st.st_size;
    int64_t min_length = (int64_t)EXON_LOG_PARTITION_COUNT * EXON_TERM_MIN_LENGTH + EXON_LOG_META_DATA_LENGTH;
    if (length < min_length)
    {
        close(fd);
        return corrupt(path, "file length %lld is shorter than the smallest log (%lld)", length, min_length);
    }
    /* the creator's choice, from the metadata's sparse flag: a log that is not sparse is
     * populated in this mapping too (a flag that cannot be read maps lazily: the checks
     * below then report what is wrong with the file) */
    uint8_t sparse = 1;
    off_t sparse_at = (off_t)(length - EXON_LOG_META_DATA_LENGTH) + (off_t)offsetof(exon_log_metadata_t, sparse);
    if (pread(fd, &sparse, 1, sparse_at) != 1)
    {
        sparse = 1;
    }
    int populate = sparse ? 0 : MAP_POPULATE;
    void *addr = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED | populate, fd, 0);
    int map_err = errno;
    close(fd);
    if (addr == MAP_FAILED)
    {
        return exon_set_error(-map_err, "log %s: mmap failed: %s", path, strerror(map_err));
    }

    const exon_log_metadata_t *meta = (const exon_log_metadata_t *)((uint8_t *)addr + length - EXON_LOG_META_DATA_LENGTH);
    int rc = 0;
    int32_t magic = EXON_LOAD_ACQ(&meta->exon_magic);
    int32_t term_length = meta->term_length;
    int32_t page_size = meta->page_size;
    if (magic != (int32_t)EXON_LOG_MAGIC)
    {
        rc = corrupt(path, "exon_magic 0x%llx is not 0x%llx (not an exon log, or not initialised)",
            (long long)(uint32_t)magic, (long long)EXON_LOG_MAGIC);
    }
    else if (meta->exon_layout_version != EXON_LOG_LAYOUT_VERSION)
    {
        rc = corrupt(path, "exon_layout_version %lld is not %lld (log from another exon version)",
            meta->exon_layout_version, EXON_LOG_LAYOUT_VERSION);
    }
    else if (!is_power_of_two(term_length) || term_length < EXON_TERM_MIN_LENGTH || term_length > EXON_TERM_MAX_LENGTH)
    {
        rc = corrupt(path, "term_length %lld is not a power of two in [65536, %lld]", term_length, EXON_TERM_MAX_LENGTH);
    }
    else if (!is_power_of_two(page_size) || page_size < EXON_PAGE_MIN_SIZE || page_size > EXON_PAGE_MAX_SIZE)
    {
        rc = corrupt(path, "page_size %lld is not a power of two in [4096, %lld]", page_size, EXON_PAGE_MAX_SIZE);
    }
    else if (log_file_length(term_length, page_size) != length)
    {
        rc = corrupt(path, "file length %lld does not match term_length/page_size (expected %lld)",
            length, log_file_length(term_length, page_size));
    }
    else if (meta->mtu_length < 2 * EXON_DATA_HEADER_LENGTH || meta->mtu_length > EXON_MAX_UDP_PAYLOAD_LENGTH ||
        (meta->mtu_length % EXON_FRAME_ALIGNMENT) != 0)
    {
        rc = corrupt(path, "mtu_length %lld is not a multiple of 32 in [64, %lld]", meta->mtu_length, EXON_MAX_UDP_PAYLOAD_LENGTH);
    }
    else if (meta->default_frame_header_length != EXON_DATA_HEADER_LENGTH)
    {
        rc = corrupt(path, "default_frame_header_length %lld is not %lld", meta->default_frame_header_length, EXON_DATA_HEADER_LENGTH);
    }
    else if (meta->active_term_count < 0)
    {
        rc = corrupt(path, "active_term_count %lld is below %lld", meta->active_term_count, 0);
    }
    if (rc < 0)
    {
        munmap(addr, (size_t)length);
        return rc;
    }
    log_bind(log, (uint8_t *)addr, length);
    snprintf(log->path, sizeof(log->path), "%s", path);
    return 0;
}

int exon_log_close(exon_log_t *log)
{
    if (log->addr != NULL)
    {
        if (munmap(log->addr, (size_t)log->length) < 0)
        {
            int err = errno;
            return exon_set_error(-err, "log %s: munmap failed: %s", log->path, strerror(err));
        }
        log->addr = NULL;
        log->meta = NULL;
        for (int i = 0; i < EXON_LOG_PARTITION_COUNT; i++)
        {
            log->terms[i] = NULL;
        }
    }
    return 0;
}

int exon_log_path_format(char *path, size_t length, const char *dir, const char *folder, int64_t id)
{
    int n = snprintf(path, length, "%s/%s/%lld.logbuffer", dir, folder, (long long)id);
    if (n < 0 || (size_t)n >= length)
    {
        if (length > 0)
        {
            path[0] = '\0';
        }
        return exon_set_error(EXON_E_ARGUMENT,
            "log file path in driver dir %.64s... (%zu bytes) would be %d bytes, longer than the %zu a path may have",
            dir, strlen(dir), n, length > 0 ? length - 1 : 0);
    }
    return n;
}

int exon_log_unlink(const char *path)
{
    if (unlink(path) < 0)
    {
        int err = errno;
        return exon_set_error(-err, "log %s: unlink failed: %s", path, strerror(err));
    }
    return 0;
}

int64_t exon_log_clean_to(exon_log_t *log, int64_t *clean_position, int64_t position)
{
    int64_t cleaned = 0;
    int64_t clean = *clean_position;
    int32_t term_length = log->term_length;
    /* Never clean more than one term behind `position`: bytes older than that share their
     * partition with positions a publisher may be using now (stale frames there are
     * refused by readers through their term id anyway). */
    if (clean < position - term_length)
    {
        clean = position - term_length;
    }
    while (position > clean)
    {
        int32_t index = exon_log_index_by_position(clean, log->position_bits_to_shift);
        int32_t term_offset = exon_log_term_offset_by_position(clean, term_length);
        int64_t to_term_end = term_length - term_offset;
        int64_t length = position - clean < to_term_end ? position - clean : to_term_end;
        uint8_t *dirty = log->terms[index] + term_offset;
        if (length > (int64_t)sizeof(int64_t))
        {
            memset(dirty + sizeof(int64_t), 0, (size_t)(length - (int64_t)sizeof(int64_t)));
        }
        /* length is a multiple of 32 in practice (positions are frame aligned). */
        EXON_STORE_REL((int64_t *)dirty, 0);
        clean += length;
        cleaned += length;
    }
    *clean_position = clean;
    return cleaned;
}

int64_t exon_log_producer_position(const exon_log_t *log)
{
    exon_log_metadata_t *meta = log->meta;
    int32_t term_count = EXON_LOAD_ACQ(&meta->active_term_count);
    int64_t raw_tail = EXON_LOAD_ACQ(&meta->term_tail_counters[exon_log_index_by_term_count(term_count)]);
    return exon_log_compute_position(exon_log_tail_term_id(raw_tail),
        exon_log_tail_term_offset(raw_tail, log->term_length), log->position_bits_to_shift, log->initial_term_id);
}

void exon_log_set_end_of_stream(exon_log_t *log, int64_t position)
{
    EXON_STORE_REL(&log->meta->end_of_stream_position, position);
}
