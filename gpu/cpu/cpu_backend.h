/* cpu_backend.h — the portable C backend, as the engine sees it: one operation table
 * (gpu/base/backend.h). Everything else of the backend is internal to gpu/cpu/.
 */
#ifndef TL_CPU_BACKEND_H
#define TL_CPU_BACKEND_H

#include "gpu/base/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const tl_backend_ops tl_cpu_backend;

/* FFTW's planner is not thread-safe: whoever else in the engine plans a transform (the
 * centre estimation, gpu/center.c) takes the lock the backend plans under. */
void tl_cpu_fftw_plan_lock(void);
void tl_cpu_fftw_plan_unlock(void);

#ifdef __cplusplus
}
#endif
#endif
