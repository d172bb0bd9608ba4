/* check_adapters_util.c — see check_adapters_util.h. */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "tests/unit/check_adapters_util.h"

void tlt_afx_open(tl_afx *f, const char *format, const char *const *sets)
{
    memset(f, 0, sizeof *f);
    char err[512] = "";
    tl_settings_defaults(&f->cfg);
    for (int i = 0; sets && sets[i]; i++) {
        char key[128];
        const char *eq = strchr(sets[i], '=');
        ck_assert_ptr_nonnull(eq);
        snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
        ck_assert_msg(tl_settings_set(&f->cfg, key, eq + 1, err, sizeof err) == 0, "%s: %s",
                      sets[i], err);
    }
    f->ops = tl_adapter_find(format);
    ck_assert_msg(f->ops != NULL, "no adapter %s", format);
    f->state = f->ops->create(&f->cfg, err, sizeof err);
    ck_assert_msg(f->state != NULL, "%s: %s", format, err);
    for (int i = 0; i < TLT_AFX_ITEMS; i++)
        zmq_msg_init(&f->items[i].payload);
}

void tlt_afx_close(tl_afx *f)
{
    for (int i = 0; i < TLT_AFX_ITEMS; i++)
        zmq_msg_close(&f->items[i].payload);
    f->ops->destroy(f->state);
}

int tlt_afx_feed(tl_afx *f, const void *const *parts, const size_t *lens, int n)
{
    zmq_msg_t msgs[8];
    ck_assert_int_le(n, 8);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(zmq_msg_init_size(&msgs[i], lens[i]), 0);
        if (lens[i])
            memcpy(zmq_msg_data(&msgs[i]), parts[i], lens[i]);
    }
    for (int i = 0; i < TLT_AFX_ITEMS; i++) { /* the last message's payloads go now */
        zmq_msg_close(&f->items[i].payload);
        zmq_msg_init(&f->items[i].payload);
    }
    memset(&f->err, 0, sizeof f->err);
    f->nitems = 0;
    int rc = f->ops->decode(f->state, msgs, n, &f->items[0], &f->err);
    if (rc == 1) {
        f->nitems = 1;
        while (f->ops->next && f->nitems < TLT_AFX_ITEMS &&
               f->ops->next(f->state, &f->items[f->nitems]) > 0)
            f->nitems++;
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&msgs[i]);
    return rc;
}

int tlt_afx_feed1(tl_afx *f, const void *data, size_t len)
{
    return tlt_afx_feed(f, &data, &len, 1);
}

size_t tlt_afx_payload_size(tl_afx *f, int i)
{
    return zmq_msg_size(&f->items[i].payload);
}

const void *tlt_afx_payload(tl_afx *f, int i)
{
    return zmq_msg_data(&f->items[i].payload);
}

const char *tlt_test_data_dir(void)
{
    static char dir[4096];
    struct stat st;
    const char *env = getenv("TOMOLIVE_TEST_DATA"), *src = getenv("top_srcdir");
    if (env && *env && stat(env, &st) == 0)
        return env;
    if (!src || !*src)
        src = ".";
    snprintf(dir, sizeof dir, "%s/shared/data", src);
    if (stat(dir, &st) == 0)
        return dir;
    snprintf(dir, sizeof dir, "%s/../shared/data", src);
    if (stat(dir, &st) == 0)
        return dir;
    return NULL;
}

void *tlt_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *len = buf ? (size_t)n : 0;
    return buf;
}
