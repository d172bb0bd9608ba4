/* volume_progress.c — see volume_progress.h. */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/volume_progress.h"

tl_progress_mode tl_progress_auto(void)
{
    return isatty(STDERR_FILENO) == 1 ? TL_PROGRESS_BAR : TL_PROGRESS_LINES;
}

void tl_progress_start(tl_progress *p, tl_progress_mode mode, uint32_t slabs, uint32_t rows)
{
    p->mode = mode;
    p->slabs = slabs;
    p->rows = rows;
    p->t0 = tl_cli_now();
}

void tl_progress_slab(tl_progress *p, uint32_t done, uint32_t rows_done, uint64_t bytes_in,
                      uint64_t bytes_out)
{
    double t = tl_cli_now() - p->t0, s = t > 1e-9 ? t : 1e-9;
    double eta = done ? t * (p->slabs - done) / done : 0;
    double in = bytes_in / s * 1e-9, out = bytes_out / s * 1e-9;
    if (p->mode == TL_PROGRESS_LINES) {
        printf("progress slab=%u/%u rows=%u/%u in_GBps=%.3f out_GBps=%.3f elapsed_s=%.1f "
               "eta_s=%.1f\n",
               done, p->slabs, rows_done, p->rows, in, out, t, eta);
        fflush(stdout);
    } else if (p->mode == TL_PROGRESS_BAR) {
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int full = p->slabs ? (int)((uint64_t)WIDTH * done / p->slabs) : WIDTH;
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < full ? '#' : '.';
        bar[WIDTH] = 0;
        fprintf(stderr, "\r[%s] slabs %u/%u  in %.2f GB/s  out %.2f GB/s  ETA %.0f s   ", bar,
                done, p->slabs, in, out, eta);
    }
}

void tl_progress_end(tl_progress *p)
{
    if (p->mode == TL_PROGRESS_BAR)
        fputc('\n', stderr);
}
