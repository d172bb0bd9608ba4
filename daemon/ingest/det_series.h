/* det_series.h — the DECTRIS series state machine (start, images, end), shared by the
 * Stream V2 (CBOR) and V1 (JSON) adapters.
 *
 * It decides the kind of each series (from user data, else ingest.series_kinds cycled),
 * which frames are darks/flats/projections, the projection index and angle of each image,
 * and which tomolive scan a series joins: a calibration series joins the open scan of its
 * shape; a projection series joins a scan that has no projections yet, else opens a new
 * one. Images of a series without a start, or after its end, are refused (counted), never
 * put into another scan; so are images that do not fit the scan their series joined.
 */
#ifndef TL_DET_SERIES_H
#define TL_DET_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "daemon/ingest/adapter_stream.h"

typedef struct {
    bool active; /* start seen, end not yet */
    uint64_t id;
    tl_proto_kind kind;    /* DARK, FLAT, or PROJ (after a darks + flats prefix) */
    uint32_t darks, flats; /* the prefix of a PROJ series */
    uint64_t window;       /* projections; 0 = unknown */
    bool has_gonio;
    double g_start, g_step;  /* degrees */
    uint32_t size_x, size_y; /* declared image size, 0 = unknown */
    bool joined;             /* its first frame has found its scan */
    uint64_t scan_series;    /* that scan */
    uint64_t started;        /* start messages so far (cycles ingest.series_kinds) */
} tl_det_series;

/* What a start message (or its user data) may say; unset fields are -1 / NAN / NULL. */
typedef struct {
    uint64_t id;
    const char *kind;
    size_t kind_len;              /* user data "kind" */
    int64_t darks, flats, window; /* user data; window also number_of_images - prefix */
    int64_t nimages;              /* number_of_images */
    double g_start, g_step;       /* goniometer axis, degrees (NAN = absent) */
    int64_t size_x, size_y;
} tl_det_start;

void tl_det_start_init(tl_det_start *st);
/* A series starts (a start message, or a V1 header). 0, or -1 with err (unknown kind). */
int tl_det_series_start(tl_det_series *ds, const tl_settings *c, const tl_det_start *st,
                        tl_proto_error *err);

/* What an image says beyond its pixels; unset: kind NULL, angle NAN, index -1. */
typedef struct {
    uint64_t series, image_id;
    const char *kind;
    size_t kind_len;
    double angle_deg;
    int64_t index;
    uint32_t rows, cols;
    tl_proto_dtype dtype;
    bool has_t_acq;
    uint64_t t_acq;
} tl_det_image;

void tl_det_image_init(tl_det_image *im);
/* Places an image of series ds (its pixels in *payload, moved on success) into out. 1, or
 * -1 with err (no series, another series, unknown kind, no window, another shape or dtype
 * than its scan's). */
int tl_det_series_image(tl_det_series *ds, tl_adapter_stream *s, const tl_det_image *im,
                        zmq_msg_t *payload, tl_item *out, tl_proto_error *err);
/* The series ended: out gets the end of its scan when it was a projection series (1), or
 * nothing (0); -1 with err for an end of a series that is not running. */
int tl_det_series_end(tl_det_series *ds, tl_adapter_stream *s, uint64_t id, tl_item *out,
                      tl_proto_error *err);

#endif
