/* fuzz_adapters.h — the fuzz harness over the ingest formats (daemon/ingest/adapter.h):
 * what the libFuzzer target (fuzz_adapters.c) and its replay driver (check_adapters_corpus.c)
 * share.
 *
 * An input is a short stream for one adapter, so that a series opened by one message
 * (a DECTRIS start, a tomopackets geometry, a native scan) is there for the next:
 *
 *   byte 0      selector: bits 0-2 the format (tlt_fz_format; 7 is dectris-v2 again, the
 *               format with the most to parse), bit 3 the settings variant (fuzz_adapters.c)
 *   then up to TLT_FZ_MAX_MSGS messages, each
 *     1 byte    its parts - 1 (low 2 bits: 1..4 parts; the ingest socket keeps at most
 *               TL_PROTO_MAX_PARTS and refuses more before any adapter sees them)
 *     per part  a uint32 little-endian length, then that many bytes (clamped to the bytes
 *               that are left, so any byte string is an input)
 *
 * Every input gets an adapter of its own, made and fed as the ingest thread makes and
 * feeds it, and destroyed after it: a finding reproduces from its input alone. Every
 * message must be accepted (decode 1 with well-formed items, or 0) or refused (-1 with a
 * protocol error code and message); a property that fails aborts with its line.
 */
#ifndef TL_FUZZ_ADAPTERS_H
#define TL_FUZZ_ADAPTERS_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/protocol.h"

#define TLT_FZ_MAX_MSGS 16
#define TLT_FZ_VARIANT 0x08 /* selector bit: the second settings variant */

enum {
    TLT_FZ_NATIVE = 0,
    TLT_FZ_DECTRIS2,
    TLT_FZ_DECTRIS1,
    TLT_FZ_STD_DAQ,
    TLT_FZ_CONCERT,
    TLT_FZ_ARRAY10,
    TLT_FZ_TOMOPACKETS
};

/* What each message of an input came to. */
typedef struct {
    int nmsgs;
    int rc[TLT_FZ_MAX_MSGS];             /* decode's answer: 1, 0 or -1 */
    int nitems[TLT_FZ_MAX_MSGS];         /* items it produced (decode's and next's) */
    tl_proto_error err[TLT_FZ_MAX_MSGS]; /* the refusal, when rc is -1 */
} tlt_fz_result;

/* The ingest.format name of a selector. */
const char *tlt_fz_format(uint8_t selector);
/* Runs one input (res may be NULL); aborts when a property fails. */
void tlt_fz_run(const uint8_t *data, size_t size, tlt_fz_result *res);

#endif
