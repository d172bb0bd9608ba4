/* check_adapters_util.h — feeding the ingest formats (daemon/ingest/adapter.h) messages
 * without a daemon: what tests/unit/check_adapters*.c share.
 *
 * A tl_afx holds one adapter instance made as the ingest thread makes it (settings
 * defaults, then "key=value" overrides), and feeds it messages as the ingest socket
 * receives them: each part copied into a zmq_msg_t of its own, closed after decode (the
 * adapter may move a part into the item's payload, as it does on the socket). The items a
 * message produced (decode's, then next's until it answers 0) are kept in order, their
 * payloads open until the next message, so a test reads types, fields and pixels:
 *
 *   tl_afx f;
 *   tlt_afx_open(&f, "dectris-v1", (const char *[]){"ingest.darks=2", NULL});
 *   ck_assert_int_eq(tlt_afx_feed(&f, parts, lens, 4), 1);
 *   ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
 *   ...
 *   ck_assert_int_eq(tlt_afx_feed1(&f, "{not json", 9), -1);
 *   ck_assert_int_eq(f.err.code, TL_PROTO_E_MALFORMED);
 *   tlt_afx_close(&f);
 */
#ifndef TL_CHECK_ADAPTERS_UTIL_H
#define TL_CHECK_ADAPTERS_UTIL_H

#include <stddef.h>

#include "daemon/base/settings.h"
#include "daemon/ingest/adapter.h"

#define TLT_AFX_ITEMS 4 /* items one message may produce (a synthesised scan, its frame) */

typedef struct {
    tl_settings cfg;
    const tl_adapter_ops *ops;
    void *state;
    tl_item items[TLT_AFX_ITEMS];
    int nitems;         /* produced by the last message */
    tl_proto_error err; /* set when the last message was rejected */
} tl_afx;

/* An adapter of the named format with the settings' defaults and the NULL-terminated
 * "key=value" overrides (may be NULL). Fails the test when it cannot be made. */
void tlt_afx_open(tl_afx *f, const char *format, const char *const *sets);
void tlt_afx_close(tl_afx *f);
/* Feeds one message of n parts. Returns decode's answer: 1 (items produced: f->nitems),
 * 0 (nothing for the engine) or -1 (rejected: f->err). */
int tlt_afx_feed(tl_afx *f, const void *const *parts, const size_t *lens, int n);
int tlt_afx_feed1(tl_afx *f, const void *data, size_t len);
/* The bytes of an item's payload. */
size_t tlt_afx_payload_size(tl_afx *f, int i);
const void *tlt_afx_payload(tl_afx *f, int i);

/* The directory of recorded detector data (shared/data: dectris-stream2-32bit/, ...):
 * $TOMOLIVE_TEST_DATA, else $top_srcdir/shared/data or $top_srcdir/../shared/data;
 * NULL when none exists (tests that need it then say so and pass). */
const char *tlt_test_data_dir(void);
/* A whole file in a malloc'd buffer (*len bytes), or NULL. */
void *tlt_read_file(const char *path, size_t *len);

#endif
