/* profile.c — the column profiles the centre estimation reads (backend.h, profiles): the
 * mean over the detector rows of each projection as stored (after −log and the
 * corrections, before the filter), summed per thread while the rows are stored and kept
 * in a ring of tl_center_profiles(window) profiles. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_state.h"

tl_status tl_cpu_profile_create(tl_cpu_state *s)
{
    s->prof_pos = -1;
    if (!s->cfg.center_estimate)
        return TL_OK;
    s->nprof = tl_center_profiles(s->n);
    s->prof = calloc((size_t)s->nprof * s->cols, sizeof *s->prof);
    s->prof_acc = calloc((size_t)s->nthreads, sizeof *s->prof_acc);
    if (!s->prof || !s->prof_acc)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for the centre's profiles");
    for (int t = 0; t < s->nthreads; t++)
        if (!(s->prof_acc[t] = calloc(s->cols, sizeof(double))))
            return tl_fail(s->eb, TL_ENOMEM, "out of memory for the centre's profiles");
    s->mem += (size_t)s->nprof * s->cols * sizeof *s->prof +
              (size_t)s->nthreads * s->cols * sizeof(double);
    return TL_OK;
}

void tl_cpu_profile_destroy(tl_cpu_state *s)
{
    free(s->prof);
    for (int t = 0; s->prof_acc && t < s->nthreads; t++)
        free(s->prof_acc[t]);
    free(s->prof_acc);
}

void tl_cpu_profile_finish(tl_cpu_state *s)
{
    if (s->prof_pos < 0)
        return;
    float *out = s->prof + (size_t)s->prof_pos * s->cols;
    for (uint32_t c = 0; c < s->cols; c++) {
        double sum = 0;
        for (int t = 0; t < s->nthreads; t++) {
            sum += s->prof_acc[t][c];
            s->prof_acc[t][c] = 0;
        }
        out[c] = (float)(sum / s->rows);
    }
    s->prof_pos = -1;
}

tl_status tl_cpu_profile_slot(void *state, int32_t pos)
{
    tl_cpu_state *s = state;
    if (pos >= (int32_t)s->nprof)
        return tl_fail(s->eb, TL_EINTERNAL, "profile %d outside the ring of %u", pos, s->nprof);
    s->prof_pos = s->prof ? pos : -1;
    return TL_OK;
}

tl_status tl_cpu_profiles(void *state, const uint32_t *pos, size_t n, float *out)
{
    tl_cpu_state *s = state;
    for (size_t i = 0; i < n; i++) {
        if (!s->prof || pos[i] >= s->nprof)
            return tl_fail(s->eb, TL_EINTERNAL, "no profile %u", pos[i]);
        memcpy(out + i * s->cols, s->prof + (size_t)pos[i] * s->cols, s->cols * sizeof *out);
    }
    return TL_OK;
}
