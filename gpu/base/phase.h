/* phase.h — the shape of single-distance phase retrieval (Paganin et al. 2002), shared by
 * the engine, which designs the filter (gpu/method/paganin.h), and the backends, which
 * apply it to each flat-field-corrected frame before −log.
 *
 * A frame of rows x cols is padded to prow x pcol by replicating its edge pixels, as
 * tomopy's retrieve_phase and tomocupy do: each dimension grows by at least
 * ceil(pi lambda z / pixel^2) pixels (the Fresnel blur's reach) and is rounded up to a
 * power of two; the frame sits at (top, left), the rest split evenly (one more after
 * when odd, where tomopy drops that pixel: its transform length would not be a power of
 * two). The backend computes irfft2(rfft2(padded) . H) / (prow pcol) and keeps the frame.
 */
#ifndef TL_PHASE_H
#define TL_PHASE_H

#include "gpu/base/fail.h"
#include "gpu/base/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wavelength from photon energy: lambda = h c / E, with h c = 1.239841984e-6 eV m. */
#define TL_PHASE_HC_EV_M 1.239841984e-6
/* Padded transforms larger than this in either dimension are refused. */
#define TL_PHASE_MAX_PAD 65536u

typedef struct {
    uint32_t rows, cols;    /* the frame */
    uint32_t prow, pcol;    /* the padded transform */
    uint32_t top, left;     /* where the frame sits in it */
    const double *response; /* prow x (pcol/2 + 1): H, 1 at zero frequency; the backend
                               divides by prow pcol (unnormalised FFTs) */
} tl_phase_filter;

/* Whether c asks for phase retrieval. */
bool tl_phase_on(const tl_corrections *c);
/* Checks the parameters (each > 0 and finite) and computes the padded shape; a bad
 * parameter is TL_EINVAL with a message naming it. f->response is left NULL. */
tl_status tl_phase_shape(const tl_corrections *c, uint32_t rows, uint32_t cols, tl_phase_filter *f,
                         tl_errbuf *eb);

#ifdef __cplusplus
}
#endif
#endif
