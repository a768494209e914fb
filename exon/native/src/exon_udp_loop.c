/* exon_udp_loop.c: single-threaded publisher -> sender -> UDP -> receiver -> subscriber loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exon_image.h"
#include "exon_logbuffer.h"
#include "exon_publication.h"
#include "exon_receiver_agent.h"
#include "exon_sender_agent.h"
#include "exon_udp_loop.h"

#define STREAM_ID 1001
#define SESSION_ID 77001
#define MAX_FRAGMENTS 256

typedef struct
{
    exon_udp_channel_t snd_channel, rcv_channel;
    exon_log_t pub_log, img_log;
    bool pub_log_open, img_log_open, snd_open, rcv_open, receiver_ready;
    exon_publication_t pub;
    exon_net_publication_t net_pub;
    exon_sender_agent_t *sender;
    exon_receiver_agent_t receiver;
    exon_net_image_t net_image;
    exon_image_t image;
    bool image_ready;
    int64_t pub_limit, pub_clean, sub_position;
    char pub_path[EXON_LOG_PATH_MAX], img_path[EXON_LOG_PATH_MAX];
}
loop_t;

static void fill(uint8_t *buf, int32_t length, int64_t seq)
{
    memcpy(buf, &seq, sizeof(seq));
    for (int32_t j = 8; j < length; j++)
    {
        buf[j] = (uint8_t)(seq + j);
    }
}

static bool check_message(const uint8_t *buf, int32_t length, int32_t expected_length, int64_t seq)
{
    if (length != expected_length)
    {
        return false;
    }
    int64_t got;
    memcpy(&got, buf, sizeof(got));
    if (got != seq)
    {
        return false;
    }
    for (int32_t j = 8; j < length; j++)
    {
        if (buf[j] != (uint8_t)(seq + j))
        {
            return false;
        }
    }
    return true;
}

static void cleanup(loop_t *lp)
{
    if (lp->image_ready)
    {
        exon_image_close(&lp->image);
    }
    if (lp->img_log_open)
    {
        exon_log_close(&lp->img_log);
        exon_log_unlink(lp->img_path);
    }
    if (lp->pub_log_open)
    {
        exon_log_close(&lp->pub_log);
        exon_log_unlink(lp->pub_path);
    }
    if (lp->receiver_ready)
    {
        exon_receiver_agent_fini(&lp->receiver);
    }
    if (lp->snd_open)
    {
        exon_udp_channel_close(&lp->snd_channel);
    }
    if (lp->rcv_open)
    {
        exon_udp_channel_close(&lp->rcv_channel);
    }
    free(lp->sender);
}

static int create_image(loop_t *lp, const exon_setup_request_t *req, int64_t now_ns)
{
    exon_log_params_t lpar;
    memset(&lpar, 0, sizeof(lpar));
    lpar.term_length = req->setup.term_length;
    lpar.mtu = req->setup.mtu;
    lpar.initial_term_id = req->setup.initial_term_id;
    lpar.session_id = req->setup.session_id;
    lpar.stream_id = req->setup.stream_id;
    lpar.type = EXON_LOG_TYPE_IMAGE;
    int rc = exon_log_create(&lp->img_log, lp->img_path, &lpar);
    if (rc < 0)
    {
        return rc;
    }
    lp->img_log_open = true;
    if ((rc = exon_net_image_init(&lp->net_image, &lp->img_log, &lp->rcv_channel, &req->source, &req->setup,
        0x5eed, NULL, now_ns)) < 0)
    {
        return rc;
    }
    lp->sub_position = lp->net_image.join_position;
    lp->net_image.consumer_position = &lp->sub_position;
    if ((rc = exon_image_init(&lp->image, &lp->img_log, &lp->sub_position, NULL)) < 0)
    {
        return rc;
    }
    lp->image_ready = true;
    return exon_receiver_agent_add_image(&lp->receiver, &lp->net_image);
}

int exon_udp_loop_run(const exon_udp_loop_params_t *params, exon_udp_loop_result_t *result)
{
    memset(result, 0, sizeof(*result));
    if (NULL == params->directory || params->message_length < 8 || params->message_count < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "udp loop: directory and message_length >= 8 required");
    }
    const int32_t term_length = params->term_length ? params->term_length : 64 * 1024;
    const int32_t mtu = params->mtu ? params->mtu : 1408;
    const int64_t timeout_ns = params->timeout_ns ? params->timeout_ns : 60LL * 1000 * 1000 * 1000;
    loop_t *lp = calloc(1, sizeof(*lp));
    uint8_t *message = malloc((size_t)params->message_length);
    uint8_t *copy = malloc(4 << 20);
    exon_fragment_t *fragments = calloc(MAX_FRAGMENTS, sizeof(exon_fragment_t));
    int rc = 0;
    if (NULL == lp || NULL == message || NULL == copy || NULL == fragments)
    {
        rc = exon_set_error(-ENOMEM, "udp loop: out of memory");
        goto done;
    }
    lp->sender = calloc(1, sizeof(exon_sender_agent_t));
    if (NULL == lp->sender)
    {
        rc = exon_set_error(-ENOMEM, "udp loop: out of memory");
        goto done;
    }
    static int32_t run_counter = 0;
    const int32_t run = EXON_FETCH_ADD(&run_counter, 1);
    snprintf(lp->pub_path, sizeof(lp->pub_path), "%s/udp-loop-%d-%d-pub.logbuffer", params->directory,
        (int)getpid(), (int)run);
    snprintf(lp->img_path, sizeof(lp->img_path), "%s/udp-loop-%d-%d-img.logbuffer", params->directory,
        (int)getpid(), (int)run);
    exon_udp_addr_t any;
    if ((rc = exon_udp_addr_resolve(&any, "127.0.0.1", 0)) < 0 ||
        (rc = exon_udp_channel_open(&lp->rcv_channel, &any, 4 << 20, 0)) < 0)
    {
        goto done;
    }
    lp->rcv_open = true;
    if ((rc = exon_udp_channel_open(&lp->snd_channel, &any, 1 << 20, 1 << 20)) < 0)
    {
        goto done;
    }
    lp->snd_open = true;
    if ((rc = exon_receiver_agent_init(&lp->receiver, &lp->rcv_channel, params->receive_loss_rate,
        params->loss_seed)) < 0)
    {
        goto done;
    }
    lp->receiver_ready = true;
    exon_receiver_agent_subscribe(&lp->receiver, STREAM_ID);

    exon_log_params_t lpar;
    memset(&lpar, 0, sizeof(lpar));
    lpar.term_length = term_length;
    lpar.mtu = mtu;
    lpar.initial_term_id = 12345;
    lpar.session_id = SESSION_ID;
    lpar.stream_id = STREAM_ID;
    lpar.type = EXON_LOG_TYPE_EXCLUSIVE_PUBLICATION;
    if ((rc = exon_log_create(&lp->pub_log, lp->pub_path, &lpar)) < 0)
    {
        goto done;
    }
    lp->pub_log_open = true;
    lp->pub_limit = 0;
    if ((rc = exon_publication_init(&lp->pub, &lp->pub_log, &lp->pub_limit, NULL, 1)) < 0)
    {
        goto done;
    }
    exon_udp_addr_t destination;
    if ((rc = exon_udp_addr_resolve(&destination, "127.0.0.1", exon_udp_channel_local_port(&lp->rcv_channel))) < 0)
    {
        goto done;
    }
    exon_net_publication_params_t npar;
    exon_net_publication_default_params(&npar);
    npar.send_loss_rate = params->send_loss_rate;
    npar.send_loss_seed = params->loss_seed + 1;
    npar.max_datagrams_per_cycle = 16;
    int64_t start = exon_nano_clock();
    if ((rc = exon_net_publication_init(&lp->net_pub, &lp->pub_log, &lp->snd_channel, &destination, &npar, start)) < 0)
    {
        goto done;
    }
    exon_sender_agent_init(lp->sender);
    exon_sender_agent_add(lp->sender, &lp->net_pub);

    int64_t sent = 0;
    int64_t first_offer_ns = 0;
    int64_t last_receive_ns = start;
    exon_setup_request_t req;
    while (result->messages_received < params->message_count)
    {
        int64_t now = exon_nano_clock();
        if (now - start > timeout_ns)
        {
            rc = exon_set_error(EXON_E_TIMEOUT, "udp loop: %lld of %lld messages after the timeout",
                (long long)result->messages_received, (long long)params->message_count);
            break;
        }
        for (int burst = 0; burst < 64 && sent < params->message_count; burst++)
        {
            fill(message, params->message_length, sent);
            int64_t offered = exon_publication_offer(&lp->pub, (const char *)message, params->message_length, 0);
            if (offered == EXON_PUBLICATION_ADMIN_ACTION)
            {
                continue;
            }
            if (offered < 0)
            {
                break;
            }
            if (sent == 0)
            {
                first_offer_ns = exon_nano_clock();
            }
            sent++;
        }
        if ((rc = exon_sender_agent_do_work(lp->sender, now)) < 0)
        {
            break;
        }
        int64_t snd = lp->net_pub.sender_position;
        exon_log_clean_to(&lp->pub_log, &lp->pub_clean, snd - term_length);
        EXON_STORE_REL(&lp->pub_limit, snd + term_length / 2);
        if ((rc = exon_receiver_agent_do_work(&lp->receiver, now)) < 0)
        {
            break;
        }
        rc = 0;
        if (!lp->image_ready && exon_receiver_agent_take_setup(&lp->receiver, &req) == 1)
        {
            if ((rc = create_image(lp, &req, now)) < 0)
            {
                break;
            }
        }
        if (lp->image_ready)
        {
            int32_t used = 0;
            int n = exon_image_poll(&lp->image, fragments, MAX_FRAGMENTS, MAX_FRAGMENTS, copy, 4 << 20, &used);
            for (int i = 0; i < n; i++)
            {
                if (params->verify && !check_message(copy + fragments[i].offset, fragments[i].length,
                    params->message_length, result->messages_received))
                {
                    result->errors++;
                }
                result->messages_received++;
                result->bytes_received += fragments[i].length;
            }
            if (n > 0)
            {
                last_receive_ns = exon_nano_clock();
            }
        }
    }
    result->elapsed_ns = last_receive_ns - (first_offer_ns ? first_offer_ns : start);
    result->naks_received = lp->net_pub.stats.naks_received;
    result->retransmits = lp->net_pub.stats.retransmits;
    result->send_loss_drops = lp->net_pub.stats.send_loss_drops;
    result->data_datagrams = lp->net_pub.stats.data_datagrams;
    result->heartbeats_sent = lp->net_pub.stats.heartbeats_sent;
    result->setups_sent = lp->net_pub.stats.setups_sent;
    result->receive_loss_drops = lp->receiver.receive_loss_drops;
    if (lp->image_ready)
    {
        result->naks_sent = lp->net_image.stats.naks_sent;
        result->sms_sent = lp->net_image.stats.sms_sent;
    }
done:
    if (NULL != lp)
    {
        cleanup(lp);
    }
    free(lp);
    free(message);
    free(copy);
    free(fragments);
    return rc;
}
