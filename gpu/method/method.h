/* method.h — a reconstruction method: what the engine does with the filtered window to
 * make a slice. FBP now (fbp.c): each projection is filtered once on arrival and slices
 * are weighted back projections of the window. FDK (cone beam) and iterative methods come
 * as files of their own; the engine asks the method of its configuration (tl_method_find)
 * instead of switching on it.
 *
 *   const tl_method_ops *m = tl_method_find(cfg);
 *   m->filter(f, padded, response, &h);  backend->set_filter(state, h);
 *   m->weigh(cfg, proj, order, n);       before each back projection
 */
#ifndef TL_METHOD_H
#define TL_METHOD_H

#include "gpu/base/backend.h"
#include "gpu/method/weights.h"

typedef struct tl_method_ops {
    const char *name;
    /* Whether every slice is linear in each projection, with weights that do not change
     * with the set of projections held: then tracked slices are updated projection by
     * projection (engine.h, tl_engine_track) instead of recomputed. */
    bool (*linear)(const tl_engine_config *c);
    /* The filter response the backend applies for filter f (padded/2 + 1 values written to
     * response): *out is response, or NULL for no filtering. */
    tl_status (*filter)(tl_filter f, size_t padded, double *response, const double **out);
    /* Sets the weights of the n projections of a back projection (order: their angles,
     * scratch of n entries, see weights.h). */
    void (*weigh)(const tl_engine_config *c, tl_bp_proj *proj, tl_angle_key *order, size_t n);
} tl_method_ops;

extern const tl_method_ops tl_method_fbp; /* fbp.c */

/* The method that serves configuration c. */
const tl_method_ops *tl_method_find(const tl_engine_config *c);

#endif
