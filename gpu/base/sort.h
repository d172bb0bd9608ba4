/* sort.h — doubles sorted ascending, for everything in gpu/ that takes a median or looks a
 * value up in a sorted list (benchmark timings, the centre's scores, angular weights).
 *
 *   tl_sort_doubles(t, n);  double median = t[n / 2];
 */
#ifndef TL_SORT_H
#define TL_SORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void tl_sort_doubles(double *v, size_t n);

#ifdef __cplusplus
}
#endif

#endif
