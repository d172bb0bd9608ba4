/* paganin.h — the single-distance phase-retrieval filter of Paganin et al. 2002
 * (J. Microsc. 206:33, Eq. 10), designed once per engine and handed to the backend
 * (gpu/base/phase.h says how it is applied).
 *
 * For a homogeneous object the transmission I/I0 after propagation over z is the
 * contact image convolved with the kernel whose Fourier transform is
 *   H(f) = 1 / (1 + pi lambda z (delta/beta) |f|^2),    f in cycles per metre
 * (Eq. 10 with k = 2 pi f and mu = 4 pi beta / lambda); −log of the filtered
 * transmission is then mu T, the absorption line integral the reconstruction expects.
 * f is the DFT's own grid, f = k / (P pixel) with k wrapped to [−P/2, P/2); tomopy's
 * grid (_reciprocal_coord) is slightly stretched, (P − 1) instead of P, and its
 * factor differs by 4 pi^2 (it uses lambda z |f|^2 / 4 pi), so its alpha = 1/(delta/beta)
 * is not ours: ours follows the paper.
 */
#ifndef TL_PAGANIN_H
#define TL_PAGANIN_H

#include "gpu/base/fail.h"
#include "gpu/base/phase.h"

/* The response of f's shape (set by tl_phase_shape): prow x (pcol/2 + 1) values into
 * out, which the caller owns. */
void tl_paganin_response(const tl_corrections *c, const tl_phase_filter *f, double *out);

#endif
