/* sort.c — see sort.h. */
#include "config.h"

#include <stdlib.h>

#include "gpu/base/sort.h"

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tl_sort_doubles(double *v, size_t n)
{
    qsort(v, n, sizeof *v, ascending);
}
