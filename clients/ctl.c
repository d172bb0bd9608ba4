/* ctl.c — `tomolive ctl`: sends one control request to the daemon and prints the reply's
 * result as JSON (jsonpack.h does the conversions).
 *
 * A DEALER socket rather than REQ, so a lost reply is a clean timeout instead of a socket
 * stuck in REQ's send/receive lockstep; it sends the empty delimiter part REQ would, so
 * the daemon's ROUTER sees the envelope of an ordinary REQ client. Replies whose id is
 * not ours (left over from an earlier request on a reused connection) are skipped.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "protocol/jsonpack.h"
#include "protocol/protocol.h"
#include "protocol/zcert.h"

#define ME "tomolive ctl"

static const char usage_text[] =
    "usage: tomolive ctl [--endpoint E] [--timeout S] [--key F --server-key F] CMD\n"
    "                    [JSON-object | key=value ...]\n"
    "\n"
    "Sends the control request CMD to tomolived and prints the result as JSON.\n"
    "\n"
    "      --endpoint E  the daemon's control socket (default tcp://localhost:5601)\n"
    "      --timeout S   seconds to wait for the reply (default 5)\n"
    "      --key F       this client's secret CURVE certificate (NAME.key_secret of tomolive\n"
    "                    keygen; default $TOMOLIVE_KEY), for a daemon with [security] curve\n"
    "      --server-key F  the daemon's public certificate (default $TOMOLIVE_SERVER_KEY)\n"
    "\n"
    "Arguments: one JSON object, or key=value pairs where each value is taken as JSON when\n"
    "it is valid JSON (numbers, arrays, objects, true/false/null, \"quoted strings\") and\n"
    "as a string otherwise, e.g.\n"
    "  tomolive ctl set_slice id=row0 z=128 size=[256,256] update='{\"every\":10}'\n"
    "  tomolive ctl set_slice '{\"id\": \"row0\", \"z\": 128}'\n"
    "\n"
    "Exit status: 0 ok, 1 error reply (\"error E_NAME (code): message\" on stderr) or\n"
    "failure, 2 usage error, 3 no reply within the timeout.\n";

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

/* Prints an ok reply's result (nothing when there is none). */
static int print_result(const msgpack_object *result)
{
    if (!result || result->type == MSGPACK_OBJECT_NIL)
        return 0;
    json_t *j = tl_json_from_msgpack(result);
    char *text =
        j ? json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(j);
    if (!text)
        return fail(1, "out of memory printing the result");
    puts(text);
    free(text);
    return fflush(stdout) == 0 ? 0 : fail(1, "cannot write the result: %s", strerror(errno));
}

/* Waits for the reply to request id; returns the exit status. */
static int await_reply(void *sock, uint64_t id, const char *endpoint, double timeout)
{
    tl_proto_decoder *d = tl_proto_decoder_new();
    if (!d)
        return fail(1, "out of memory");
    double deadline = tl_cli_now() + timeout;
    int rc = -1;
    while (rc < 0) {
        double left = deadline - tl_cli_now();
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        int n = left > 0 ? zmq_poll(&it, 1, (long)ceil(left * 1000)) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = fail(1, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        if (n == 0) {
            rc = fail(3, "no reply from %s within %g s", endpoint, timeout);
            break;
        }
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_error err;
        int np = tl_proto_recv(sock, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err);
        if (np == -1)
            continue; /* EAGAIN: spurious wake-up */
        int kept = np == -2 ? TL_PROTO_MAX_PARTS : np;
        /* the header follows the empty delimiter of the envelope */
        int h = 0;
        while (h < kept - 1 && zmq_msg_size(&parts[h]) == 0)
            h++;
        tl_proto_msg m;
        if (np == -2 || h != kept - 1)
            rc = fail(1, "malformed reply from %s: %s parts after the envelope", endpoint,
                      np == -2 ? "too many" : "several");
        else if (tl_proto_decode(d, zmq_msg_data(&parts[h]), zmq_msg_size(&parts[h]), TL_MSG_REP,
                                 &m, &err) != TL_PROTO_OK)
            rc = fail(1, "malformed reply from %s: %s: %s", endpoint, tl_proto_err_name(err.code),
                      err.message);
        else if (m.rep.id != id)
            ; /* an earlier request's reply: keep waiting for ours */
        else if (m.rep.ok)
            rc = print_result(m.rep.result);
        else
            rc = fail(1, "error %s (%d): %.*s", tl_proto_err_name(m.rep.code), (int)m.rep.code,
                      (int)m.rep.message.len, m.rep.message.ptr ? m.rep.message.ptr : "");
        tl_proto_close(parts, kept);
    }
    tl_proto_decoder_free(d);
    return rc;
}

/* Packs the request: header with cmd and the args (none when there are no arguments). */
static int build_request(msgpack_sbuffer *sb, uint64_t id, const char *cmd, int argc, char **argv)
{
    char err[512];
    json_t *args = argc ? tl_json_args(argc, argv, err, sizeof err) : NULL;
    if (argc && !args)
        return fail(2, "%s", err);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    int bad = tl_proto_begin_req(&pk, id, cmd, args != NULL) || (args && tl_json_pack(&pk, args));
    json_decref(args);
    if (bad)
        return fail(1, "out of memory packing the request");
    if (sb->size > TL_PROTO_MAX_HEADER)
        return fail(2, "the request is %zu bytes, over the protocol's limit of %u", sb->size,
                    TL_PROTO_MAX_HEADER);
    return 0;
}

int tl_cmd_ctl(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"timeout", required_argument, NULL, 't'},
        {"key", required_argument, NULL, 'k'},
        {"server-key", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *endpoint = "tcp://localhost:5601";
    const char *key = NULL, *server_key = NULL;
    double timeout = 5;
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    /* '+': stop at CMD, so key=value arguments are never taken for options */
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        switch (c) {
            case 'e': endpoint = optarg; break;
            case 'k': key = optarg; break;
            case 's': server_key = optarg; break;
            case 't':
                timeout = strtod(optarg, &end);
                if (end == optarg || *end || !(timeout > 0) || timeout > 1e6)
                    return fail(2, "bad --timeout '%s': need seconds > 0", optarg);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return fail(2, "%s '%s' (see tomolive ctl --help)",
                            c == ':' ? "option needs a value" : "unknown option",
                            argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return fail(2, "missing the command (see tomolive ctl --help)");
    const char *cmd = argv[optind];
    if (!*cmd || strlen(cmd) > 64)
        return fail(2, "bad command name '%s': need 1 to 64 bytes", cmd);

    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t id = ((uint64_t)getpid() << 32) ^ (uint64_t)t.tv_nsec ^ (uint64_t)t.tv_sec;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = build_request(&sb, id, cmd, argc - optind - 1, argv + optind + 1);
    void *ctx = rc ? NULL : zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    int linger = 0; /* an unanswered request must not keep us from exiting */
    if (!rc && (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) != 0))
        rc = fail(1, "cannot create a socket: %s", zmq_strerror(errno));
    char kerr[600];
    if (!rc && tl_zcert_client_from(sock, key, server_key, kerr, sizeof kerr) != 0)
        rc = fail(2, "%s", kerr);
    if (!rc && zmq_connect(sock, endpoint) != 0)
        rc = fail(2, "bad --endpoint '%s': %s", endpoint, zmq_strerror(errno));
    if (!rc && (zmq_send(sock, "", 0, ZMQ_SNDMORE) < 0 || zmq_send(sock, sb.data, sb.size, 0) < 0))
        rc = fail(1, "cannot send the request: %s", zmq_strerror(errno));
    if (!rc)
        rc = await_reply(sock, id, endpoint, timeout);
    if (sock)
        zmq_close(sock);
    if (ctx)
        zmq_ctx_term(ctx);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}
