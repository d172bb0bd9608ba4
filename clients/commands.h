/* commands.h — the subcommands of the `tomolive` program (clients/tomolive.c dispatches).
 *
 * Each is a main() of its own: argv[0] is the subcommand's name, options follow. Each
 * prints its errors as "tomolive <name>: <message>" on stderr and returns the exit status
 * (0 done, 1 failed, 2 usage error; 3 timeout for the commands that wait on the daemon).
 */
#ifndef TL_COMMANDS_H
#define TL_COMMANDS_H

int tl_cmd_push(int argc, char **argv);
int tl_cmd_sub(int argc, char **argv);
int tl_cmd_ctl(int argc, char **argv);
int tl_cmd_recon(int argc, char **argv);
int tl_cmd_bench(int argc, char **argv);
int tl_cmd_stream_bench(int argc, char **argv); /* tomolive bench --stream */
int tl_cmd_volume_bench(int argc, char **argv); /* tomolive bench --volume */
int tl_cmd_cone_bench(int argc, char **argv);   /* tomolive bench --cone */
int tl_cmd_iterative_bench(int argc, char **argv); /* tomolive bench --iterative */
int tl_cmd_tomosynthesis_bench(int argc, char **argv); /* tomolive bench --tomosynthesis */
int tl_cmd_volume_write_bench(int argc, char **argv); /* tomolive bench --volume-write */
int tl_cmd_tune(int argc, char **argv);

/* tomolive bench --volume end to end (bench_volume_e2e.c): the out-of-core pipeline timed,
 * after a baseline run with the whole device. */
#include <stdint.h>
#include "clients/cone_opts.h"
typedef struct {
    uint32_t size, proj, slab_rows;
    int device;
    const char *backend, *gpu_memory, *host_memory, *output, *kernel;
    tl_cone_opts cone; /* --geometry cone: FDK over a turn, bands out of core */
} tl_bench_volume_e2e;
int tl_bench_volume_e2e_run(const tl_bench_volume_e2e *o);
int tl_cmd_phantom(int argc, char **argv);
int tl_cmd_phantom_scan(int argc, char **argv); /* tomolive phantom --scan */
int tl_cmd_keygen(int argc, char **argv);

#endif
