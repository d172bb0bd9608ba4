/* names.c — the names of the engine's enumerations, as they appear in configuration
 * files, on the wire and in logs (ARCHITECTURE.md §3.5 spells the filter names). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/base/types.h"

const char *tl_status_name(tl_status s)
{
    static const char *const names[] = {
        "TL_OK",        "TL_EINVAL",       "TL_ENOMEM",  "TL_ESTALE", "TL_EDUPLICATE", "TL_ESHAPE",
        "TL_ENOTFOUND", "TL_EUNSUPPORTED", "TL_EDEVICE", "TL_EIO",    "TL_EINTERNAL",
    };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "TL_E?";
}

size_t tl_dtype_size(tl_dtype t)
{
    switch (t) {
        case TL_DTYPE_U8: return 1;
        case TL_DTYPE_U16: return 2;
        case TL_DTYPE_U32:
        case TL_DTYPE_F32: return 4;
    }
    return 0;
}

static const char *const filter_names[TL_FILTER_COUNT] = {
    "ram-lak", "shepp-logan", "cosine", "hamming", "hann", "parzen", "none",
};

const char *tl_filter_name(tl_filter f)
{
    return (unsigned)f < TL_FILTER_COUNT ? filter_names[f] : "?";
}

bool tl_filter_parse(const char *name, tl_filter *out)
{
    if (!name)
        return false;
    if (strcmp(name, "ramp") == 0) {
        *out = TL_FILTER_RAMLAK;
        return true;
    }
    for (int i = 0; i < TL_FILTER_COUNT; i++)
        if (strcmp(name, filter_names[i]) == 0) {
            *out = (tl_filter)i;
            return true;
        }
    return false;
}

static const char *const backend_names[] = {"auto", "cpu", "cuda"};

const char *tl_backend_name(tl_backend_kind b)
{
    return (unsigned)b < 3 ? backend_names[b] : "?";
}

bool tl_backend_parse(const char *name, tl_backend_kind *out)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, backend_names[i]) == 0) {
            *out = (tl_backend_kind)i;
            return true;
        }
    return false;
}

static const char *const quality_names[] = {"exact", "fast", "preview"};

const char *tl_quality_name(tl_quality q)
{
    return (unsigned)q < 3 ? quality_names[q] : "?";
}

bool tl_quality_parse(const char *name, tl_quality *out)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, quality_names[i]) == 0) {
            *out = (tl_quality)i;
            return true;
        }
    return false;
}

static const char *const iter_names[] = {"sirt", "sart", "os-sart", "osem"};

const char *tl_iter_method_name(tl_iter_method m)
{
    return (unsigned)m < 4 ? iter_names[m] : "?";
}

bool tl_iter_method_parse(const char *name, tl_iter_method *out)
{
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, iter_names[i]) == 0) {
            *out = (tl_iter_method)i;
            return true;
        }
    return false;
}

static const char *const projector_names[] = {"matched", "joseph"};

const char *tl_projector_name(tl_projector p)
{
    return (unsigned)p < 2 ? projector_names[p] : "?";
}

bool tl_projector_parse(const char *name, tl_projector *out)
{
    for (int i = 0; name && i < 2; i++)
        if (strcmp(name, projector_names[i]) == 0) {
            *out = (tl_projector)i;
            return true;
        }
    return false;
}

const char *tl_stage_name(tl_stage s)
{
    static const char *const names[TL_STAGE_COUNT] = {"dezinger", "paganin", "rings"};
    return (unsigned)s < TL_STAGE_COUNT ? names[s] : "?";
}

const char *tl_rings_name(tl_rings r)
{
    static const char *const names[] = {"none", "vo", "fw"};
    return (unsigned)r <= TL_RINGS_FW ? names[r] : "?";
}

bool tl_rings_parse(const char *s, tl_corrections *k)
{
    tl_rings r;
    size_t len;
    if (strncmp(s, "none", 4) == 0 && !s[4]) {
        k->rings = TL_RINGS_NONE;
        return true;
    }
    if (strncmp(s, "vo", 2) == 0)
        r = TL_RINGS_VO;
    else if (strncmp(s, "fw", 2) == 0)
        r = TL_RINGS_FW;
    else
        return false;
    len = 2;
    unsigned long param = 0;
    double tol = 0;
    if (s[len] == ':') {
        char *end;
        const char *p = s + len + 1;
        if (*p < '0' || *p > '9')
            return false;
        param = strtoul(p, &end, 10);
        if (param > 1000000)
            return false;
        if (*end == ',') {
            const char *q = end + 1;
            tol = strtod(q, &end);
            if (end == q || !(tol >= 0))
                return false;
        }
        if (*end)
            return false;
    } else if (s[len]) {
        return false;
    }
    k->rings = r;
    k->ring_size = r == TL_RINGS_VO ? (uint32_t)param : 0;
    k->ring_level = r == TL_RINGS_FW ? (uint32_t)param : 0;
    k->ring_tolerance = tol;
    return true;
}
