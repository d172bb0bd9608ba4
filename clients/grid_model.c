/* grid_model.c — seed 004's model of a `recon --grid` run (grid_model.h). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/grid_model.h"

static double stage(double work, double rate)
{
    return work > 0 && rate > 0 ? work / rate : 0;
}

void tl_grid_model(const tl_grid_work *w, const tl_grid_rates *r, tl_grid_stages *out)
{
    memset(out, 0, sizeof *out);
    out->load = stage(w->load, r->load);
    out->filter = stage(w->filter, r->filter);
    out->bp = stage(w->bp, r->bp);
    out->reduce = stage(w->reduce, r->reduce);
    out->store = stage(w->store, r->store) + (w->store > 0 ? w->syncs * r->sync : 0);
    double threads[3] = {out->load, out->filter + out->bp, out->reduce + out->store};
    double slowest = fmax(threads[0], fmax(threads[1], threads[2]));
    double rest = threads[0] + threads[1] + threads[2] - slowest;
    out->total = slowest + rest / (w->slabs ? w->slabs : 1);
}

void tl_grid_stages_max(tl_grid *g, const tl_grid_stages *mine, tl_grid_stages *out)
{
    out->load = tl_grid_max(g, mine->load);
    out->filter = tl_grid_max(g, mine->filter);
    out->allgather = tl_grid_max(g, mine->allgather);
    out->bp = tl_grid_max(g, mine->bp);
    out->reduce = tl_grid_max(g, mine->reduce);
    out->wait = tl_grid_max(g, mine->wait);
    out->store = tl_grid_max(g, mine->store);
    out->total = tl_grid_max(g, mine->total);
}

void tl_grid_stages_measured(const tl_volume_times *t, const tl_grid *g, tl_grid_stages *out)
{
    memset(out, 0, sizeof *out);
    out->load = t->read;
    out->filter = t->submit;
    out->bp = t->backproject;
    out->reduce = g->reduce_s;
    out->wait = g->wait_s;
    out->store = t->write;
    out->total = t->wall;
}

static void row(FILE *f, const char *name, const char *rate, double model, const double *measured)
{
    fprintf(f, "%-22s | %-22s | %8.3f", name, rate, model);
    if (measured)
        fprintf(f, " | %8.3f | %s", *measured, model > 0 ? "" : "-");
    if (measured && model > 0)
        fprintf(f, "%.2f", *measured / model);
    fputc('\n', f);
}

void tl_grid_model_print(FILE *f, const tl_grid_rates *r, const tl_grid_stages *m,
                         const tl_grid_stages *x)
{
    char rate[6][32];
    snprintf(rate[0], sizeof rate[0], "%.3f GB/s", r->load * 1e-9);
    snprintf(rate[1], sizeof rate[1], "%.3f GB/s", r->filter * 1e-9);
    snprintf(rate[2], sizeof rate[2], "not needed");
    snprintf(rate[3], sizeof rate[3], "%.3f G updates/s", r->bp * 1e-9);
    snprintf(rate[4], sizeof rate[4], r->reduce > 0 ? "%.3f GB/s" : "one column",
             r->reduce * 1e-9);
    snprintf(rate[5], sizeof rate[5], "%.3f GB/s", r->store * 1e-9);
    fprintf(f, "model (seed 004 4.2; rates of rank 0, stages of the slowest rank)\n");
    fprintf(f, "%-22s | %-22s | %8s%s\n", "stage", "rate", "model s",
            x ? " | measured | measured/model" : "");
    row(f, "load (read)", rate[0], m->load, x ? &x->load : NULL);
    row(f, "filter (upload+ramp)", rate[1], m->filter, x ? &x->filter : NULL);
    row(f, "allgather", rate[2], m->allgather, x ? &x->allgather : NULL);
    row(f, "back projection", rate[3], m->bp, x ? &x->bp : NULL);
    row(f, "reduce (MPI)", rate[4], m->reduce, x ? &x->reduce : NULL);
    if (x)
        row(f, "  waiting for the row", "not modelled", 0, &x->wait);
    row(f, "store (write)", rate[5], m->store, x ? &x->store : NULL);
    row(f, "run (pipelined)", "max thread + fill", m->total, x ? &x->total : NULL);
    if (x)
        fprintf(f, "(measured: busy seconds of the slowest rank per stage)\n");
}
