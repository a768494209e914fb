/*
 * exon_conductor_ipc_publications.c: the conductor's IPC publications (conductor thread).
 *
 * An IPC publication is a log under <dir>/publications/<registration id>.logbuffer with a
 * pub-pos and a pub-lmt counter, shared by the non-exclusive ADD_PUBLICATIONs of a stream.
 * Each subscription of its stream reads it through a subscriber position (a sub-pos counter,
 * ON_AVAILABLE_IMAGE with source "aeron:ipc"). Every duty cycle sets pub-pos, is_connected,
 * cleans behind the slowest subscriber and moves pub-lmt; once its last link is gone it
 * drains to its end of stream, tells its subscribers ON_UNAVAILABLE_IMAGE, lingers, and is
 * unmapped and unlinked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_doorbell.h"
#include "driver/exon_conductor_internal.h"

static int64_t exon_dc_ipc_producer_position(exon_dc_ipc_publication_t *pub)
{
    return exon_log_producer_position(&pub->log);
}

static void exon_dc_ipc_unavailable_image(
    exon_driver_conductor_t *c, exon_dc_subscriber_position_t *sp)
{
    exon_image_message_t *m = (exon_image_message_t *)c->msg;
    m->correlation_id = sp->publication->registration_id;
    m->subscription_registration_id = sp->subscription->registration_id;
    m->stream_id = sp->publication->stream_id;
    m->channel_length = 9;
    memcpy(c->msg + sizeof(*m), "aeron:ipc", 9);
    exon_dc_transmit(c, EXON_RSP_ON_UNAVAILABLE_IMAGE, c->msg, (int32_t)sizeof(*m) + 9);
}

/* Remove one link; notify = send ON_UNAVAILABLE_IMAGE to the subscription's client. */
static void exon_dc_remove_subscriber_position(
    exon_driver_conductor_t *c, exon_dc_subscriber_position_t *sp, bool notify)
{
    exon_dc_ipc_publication_t *pub = sp->publication;
    exon_dc_subscription_t *sub = sp->subscription;
    exon_dc_array_remove(&c->subscriber_positions, sp);
    bool doorbell_still_used = false;
    for (int32_t i = 0; i < c->subscriber_positions.length; i++)
    {
        exon_dc_subscriber_position_t *other = c->subscriber_positions.items[i];
        if (other->publication == pub && other->subscription->doorbell_id == sub->doorbell_id)
        {
            doorbell_still_used = true;
        }
    }
    if (!doorbell_still_used && sub->doorbell_id >= 0)
    {
        exon_log_remove_doorbell(pub->log.meta, sub->doorbell_id);
    }
    if (sp->counter_id >= 0)
    {
        exon_counters_free(&c->counters, sp->counter_id, exon_epoch_ms());
    }
    if (notify)
    {
        exon_dc_ipc_unavailable_image(c, sp);
        exon_dc_ring_subscription(c, sub);
    }
    free(sp);
}

static int exon_dc_link(
    exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub, exon_dc_subscription_t *sub)
{
    int64_t join_position = exon_dc_ipc_producer_position(pub);
    char label[160];
    int n = snprintf(label, sizeof(label), "sub-pos: %lld %d %d aeron:ipc @%lld",
        (long long)sub->registration_id, pub->session_id, pub->stream_id, (long long)join_position);
    int32_t counter_id = exon_counters_allocate(
        &c->counters, EXON_COUNTER_TYPE_SUBSCRIBER_POSITION, NULL, 0, label, n,
        sub->registration_id, sub->client_id, exon_epoch_ms());
    if (counter_id < 0)
    {
        exon_driver_conductor_error(c, "no counter for sub-pos of subscription %lld: %s",
            (long long)sub->registration_id, exon_last_error());
        return counter_id;
    }
    exon_counter_set(&c->counters, counter_id, join_position);

    exon_dc_subscriber_position_t *sp = calloc(1, sizeof(*sp));
    if (NULL == sp || exon_dc_array_add(&c->subscriber_positions, sp) < 0)
    {
        free(sp);
        exon_counters_free(&c->counters, counter_id, exon_epoch_ms());
        return -ENOMEM;
    }
    sp->publication = pub;
    sp->subscription = sub;
    sp->counter_id = counter_id;

    if (sub->doorbell_id >= 0)
    {
        int rc = exon_log_add_doorbell(pub->log.meta, sub->doorbell_id);
        if (rc < 0 && rc != -EEXIST)
        {
            exon_driver_conductor_error(c, "log %s: doorbell table full for subscription %lld",
                pub->log.path, (long long)sub->registration_id);
        }
    }

    /* ON_AVAILABLE_IMAGE: header, log file, source identity */
    exon_image_ready_t *m = (exon_image_ready_t *)c->msg;
    int32_t log_length = (int32_t)strlen(pub->log.path);
    m->correlation_id = pub->registration_id;
    m->subscription_registration_id = sub->registration_id;
    m->session_id = pub->session_id;
    m->stream_id = pub->stream_id;
    m->subscriber_position_counter_id = counter_id;
    m->log_file_length = log_length;
    uint8_t *p = c->msg + sizeof(*m);
    memcpy(p, pub->log.path, (size_t)log_length);
    p += log_length;
    int32_t source_length = 9;
    memcpy(p, &source_length, sizeof(source_length));
    p += sizeof(source_length);
    memcpy(p, "aeron:ipc", 9);
    p += 9;
    exon_dc_transmit(c, EXON_RSP_ON_AVAILABLE_IMAGE, c->msg, (int32_t)(p - c->msg));
    exon_dc_ring_subscription(c, sub);
    return 0;
}

int32_t exon_dc_next_session_id(exon_driver_conductor_t *c, int32_t stream_id)
{
    for (int attempt = 0; attempt < 1000; attempt++)
    {
        int32_t session_id = (int32_t)(uint32_t)exon_dc_random(c);
        if (session_id >= -1 && session_id <= 1000)
        {
            continue;
        }
        bool used = false;
        for (int32_t i = 0; i < c->publications.length; i++)
        {
            exon_dc_ipc_publication_t *pub = c->publications.items[i];
            if (pub->stream_id == stream_id && pub->session_id == session_id)
            {
                used = true;
                break;
            }
        }
        if (!used)
        {
            return session_id;
        }
    }
    return 1001;
}

/* linger_ns: the channel's `linger` (-1: the driver's publication linger); sparse: the
 * channel's `sparse` (-1: the driver's term_buffer_sparse_file). */
exon_dc_ipc_publication_t *exon_dc_create_ipc_publication(exon_driver_conductor_t *c, int64_t registration_id,
    int32_t stream_id, bool exclusive, int64_t linger_ns, int32_t sparse, char *why, size_t why_length)
{
    exon_dc_ipc_publication_t *pub = calloc(1, sizeof(*pub));
    if (NULL == pub)
    {
        snprintf(why, why_length, "out of memory");
        return NULL;
    }
    pub->registration_id = registration_id;
    pub->stream_id = stream_id;
    pub->session_id = exon_dc_next_session_id(c, stream_id);
    pub->exclusive = exclusive;
    pub->state = EXON_DC_PUB_ACTIVE;
    pub->refcount = 1;
    pub->pub_pos_id = -1;
    pub->pub_lmt_id = -1;
    pub->end_of_stream_position = INT64_MAX;
    pub->linger_timeout_ns = linger_ns >= 0 ? linger_ns : c->config.publication_linger_timeout_ns;
    int32_t term_length = c->config.ipc_term_buffer_length;
    int32_t window = c->config.ipc_publication_term_window_length;
    pub->window = (window > 0 && window < term_length / 2) ? window : term_length / 2;

    char path[EXON_LOG_PATH_MAX];
    if (exon_log_path_format(path, sizeof(path), c->config.dir, "publications", registration_id) < 0)
    {
        snprintf(why, why_length, "%s", exon_last_error());
        free(pub);
        return NULL;
    }
    exon_log_params_t params;
    memset(&params, 0, sizeof(params));
    params.term_length = term_length;
    params.mtu = c->config.ipc_mtu_length;
    params.page_size = c->config.file_page_size;
    params.initial_term_id = (int32_t)(uint32_t)exon_dc_random(c);
    params.session_id = pub->session_id;
    params.stream_id = stream_id;
    params.correlation_id = registration_id;
    params.publication_window_length = pub->window;
    params.type = exclusive ? EXON_LOG_TYPE_EXCLUSIVE_PUBLICATION : EXON_LOG_TYPE_CONCURRENT_PUBLICATION;
    params.is_connected = 0;
    params.sparse = exon_dc_publication_sparse(c, sparse);
    params.file_mode = c->config.dir_mode;
    int rc = exon_log_create(&pub->log, path, &params);
    if (rc < 0)
    {
        snprintf(why, why_length, "cannot create log %s: %s", path, exon_last_error());
        free(pub);
        return NULL;
    }
    pub->log.meta->linger_timeout_ns = pub->linger_timeout_ns;
    pub->log.meta->signal_eos = 1;

    char label[160];
    int64_t now_ms = exon_epoch_ms();
    int n = snprintf(label, sizeof(label), "pub-pos: %lld %d %d aeron:ipc",
        (long long)registration_id, pub->session_id, stream_id);
    pub->pub_pos_id = exon_counters_allocate(&c->counters, EXON_COUNTER_TYPE_PUBLISHER_POSITION,
        NULL, 0, label, n, registration_id, EXON_COUNTER_OWNER_DRIVER, now_ms);
    n = snprintf(label, sizeof(label), "pub-lmt: %lld %d %d aeron:ipc",
        (long long)registration_id, pub->session_id, stream_id);
    pub->pub_lmt_id = exon_counters_allocate(&c->counters, EXON_COUNTER_TYPE_PUBLISHER_LIMIT,
        NULL, 0, label, n, registration_id, EXON_COUNTER_OWNER_DRIVER, now_ms);
    if (pub->pub_pos_id < 0 || pub->pub_lmt_id < 0 || exon_dc_array_add(&c->publications, pub) < 0)
    {
        snprintf(why, why_length, "no counters left for publication %lld", (long long)registration_id);
        if (pub->pub_pos_id >= 0)
        {
            exon_counters_free(&c->counters, pub->pub_pos_id, now_ms);
        }
        if (pub->pub_lmt_id >= 0)
        {
            exon_counters_free(&c->counters, pub->pub_lmt_id, now_ms);
        }
        exon_log_close(&pub->log);
        exon_log_unlink(path);
        free(pub);
        return NULL;
    }
    exon_counter_set(&c->counters, pub->pub_lmt_id, 0);
    return pub;
}

void exon_dc_free_ipc_publication(exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub)
{
    for (int32_t i = c->subscriber_positions.length - 1; i >= 0; i--)
    {
        exon_dc_subscriber_position_t *sp = c->subscriber_positions.items[i];
        if (sp->publication == pub)
        {
            exon_dc_remove_subscriber_position(c, sp, true);
            i = c->subscriber_positions.length; /* the array was reordered: restart */
        }
    }
    int64_t now_ms = exon_epoch_ms();
    exon_counters_free(&c->counters, pub->pub_pos_id, now_ms);
    exon_counters_free(&c->counters, pub->pub_lmt_id, now_ms);
    char path[EXON_LOG_PATH_MAX];
    snprintf(path, sizeof(path), "%s", pub->log.path);
    exon_log_close(&pub->log);
    exon_log_unlink(path);
    exon_dc_array_remove(&c->publications, pub);
    free(pub);
}

/* A publication lost its last link: it drains, then its images go, then it lingers. */
void exon_dc_release_ipc_publication(exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub, int64_t now_ns)
{
    if (--pub->refcount > 0 || pub->state != EXON_DC_PUB_ACTIVE)
    {
        return;
    }
    pub->state = EXON_DC_PUB_DRAINING;
    pub->end_of_stream_position = exon_dc_ipc_producer_position(pub);
    exon_log_set_end_of_stream(&pub->log, pub->end_of_stream_position);
    pub->drain_deadline_ns = now_ns + c->config.client_liveness_timeout_ns;
    /* subscribers asleep should wake to see end of stream */
    for (int32_t i = 0; i < c->subscriber_positions.length; i++)
    {
        exon_dc_subscriber_position_t *sp = c->subscriber_positions.items[i];
        if (sp->publication == pub)
        {
            exon_dc_ring_subscription(c, sp->subscription);
        }
    }
}

exon_dc_ipc_publication_t *exon_dc_find_ipc_publication(exon_driver_conductor_t *c, int32_t stream_id)
{
    for (int32_t i = 0; i < c->publications.length; i++)
    {
        exon_dc_ipc_publication_t *candidate = c->publications.items[i];
        if (!candidate->exclusive && candidate->state == EXON_DC_PUB_ACTIVE && candidate->stream_id == stream_id)
        {
            return candidate;
        }
    }
    return NULL;
}

void exon_dc_ipc_link_subscriptions(exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub)
{
    for (int32_t i = 0; i < c->subscriptions.length; i++)
    {
        exon_dc_subscription_t *sub = c->subscriptions.items[i];
        if (!sub->udp && sub->stream_id == pub->stream_id)
        {
            exon_dc_link(c, pub, sub);
        }
    }
}

void exon_dc_ipc_link_publications(exon_driver_conductor_t *c, exon_dc_subscription_t *sub)
{
    for (int32_t i = 0; i < c->publications.length; i++)
    {
        exon_dc_ipc_publication_t *pub = c->publications.items[i];
        if (pub->state == EXON_DC_PUB_ACTIVE && pub->stream_id == sub->stream_id)
        {
            exon_dc_link(c, pub, sub);
        }
    }
}

void exon_dc_ipc_unlink_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub)
{
    for (int32_t i = c->subscriber_positions.length - 1; i >= 0; i--)
    {
        exon_dc_subscriber_position_t *sp = c->subscriber_positions.items[i];
        if (sp->subscription == sub)
        {
            exon_dc_remove_subscriber_position(c, sp, false);
            i = c->subscriber_positions.length;
        }
    }
}

int exon_dc_update_ipc_publications(exon_driver_conductor_t *c, int64_t now_ns)
{
    int work = 0;
    for (int32_t i = c->publications.length - 1; i >= 0; i--)
    {
        exon_dc_ipc_publication_t *pub = c->publications.items[i];
        int64_t producer = exon_dc_ipc_producer_position(pub);
        exon_counter_set(&c->counters, pub->pub_pos_id, producer);

        int64_t min_position = INT64_MAX;
        int32_t subscribers = 0;
        for (int32_t j = 0; j < c->subscriber_positions.length; j++)
        {
            exon_dc_subscriber_position_t *sp = c->subscriber_positions.items[j];
            if (sp->publication == pub)
            {
                int64_t position = exon_counter_get(&c->counters, sp->counter_id);
                if (position < min_position)
                {
                    min_position = position;
                }
                subscribers++;
            }
        }

        if (pub->state == EXON_DC_PUB_ACTIVE)
        {
            if (subscribers > 0)
            {
                if (0 == EXON_LOAD_RLX(&pub->log.meta->is_connected))
                {
                    EXON_STORE_REL(&pub->log.meta->is_connected, 1);
                    work++;
                }
                int64_t limit = exon_counter_get(&c->counters, pub->pub_lmt_id);
                if (producer >= limit)
                {
                    if (!pub->back_pressured)
                    {
                        pub->back_pressured = true;
                        exon_counter_add(&c->counters, EXON_SYSTEM_COUNTER_BACK_PRESSURE_EVENTS, 1);
                    }
                }
                else
                {
                    pub->back_pressured = false;
                }
                int64_t clean_to = min_position - pub->log.term_length;
                if (clean_to > pub->clean_position)
                {
                    exon_log_clean_to(&pub->log, &pub->clean_position, clean_to);
                }
                int64_t new_limit = min_position + pub->window;
                if (new_limit != limit)
                {
                    exon_counter_set(&c->counters, pub->pub_lmt_id, new_limit);
                    /* only a publisher near its limit needs the conductor awake: counting
                     * every move as work would keep the conductor spinning on 2 cores */
                    if (producer >= limit - pub->window / 2)
                    {
                        work++;
                    }
                }
            }
            else if (0 != EXON_LOAD_RLX(&pub->log.meta->is_connected))
            {
                EXON_STORE_REL(&pub->log.meta->is_connected, 0);
                work++;
            }
        }
        else if (pub->state == EXON_DC_PUB_DRAINING)
        {
            if (subscribers == 0 || min_position >= pub->end_of_stream_position || now_ns >= pub->drain_deadline_ns)
            {
                for (int32_t j = c->subscriber_positions.length - 1; j >= 0; j--)
                {
                    exon_dc_subscriber_position_t *sp = c->subscriber_positions.items[j];
                    if (sp->publication == pub)
                    {
                        exon_dc_remove_subscriber_position(c, sp, true);
                        j = c->subscriber_positions.length;
                    }
                }
                EXON_STORE_REL(&pub->log.meta->is_connected, 0);
                pub->state = EXON_DC_PUB_LINGER;
                pub->linger_deadline_ns = exon_dc_add_ns(now_ns, pub->linger_timeout_ns);
                work++;
            }
        }
        else if (now_ns >= pub->linger_deadline_ns)
        {
            exon_dc_free_ipc_publication(c, pub);
            work++;
        }
    }
    return work;
}
