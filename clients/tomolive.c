/* tomolive.c — the `tomolive` program: one binary, git-style subcommands.
 *
 * The table below is the whole dispatcher: a subcommand is one row (name, entry point,
 * one line of help), so adding one never touches the logic. Each entry point is a main()
 * of its own (commands.h) and returns the exit status.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "clients/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"push", tl_cmd_push, "send a scan to the daemon: the simulated camera, or TIFF stacks"},
    {"sub", tl_cmd_sub, "receive, print and save the slices the daemon publishes"},
    {"ctl", tl_cmd_ctl, "send a control request to the daemon, print the reply as JSON"},
    {"recon", tl_cmd_recon, "reconstruct slices from TIFF stacks of projections (offline FBP)"},
    {"bench", tl_cmd_bench, "time the back-projection kernels and the per-frame pipeline"},
    {"tune", tl_cmd_tune, "time the kernels for a shape, choose per quality mode, cache it"},
    {"phantom", tl_cmd_phantom,
     "the true slice of the simulated sample, and a slice's error against it"},
    {"keygen", tl_cmd_keygen, "make a CURVE key pair (NAME.key, NAME.key_secret) for [security]"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tomolive <command> [options]   (tomolive <command> --help)\n"
               "       tomolive --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
        printf("tomolive %s\n", PACKAGE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tomolive: unknown command '%s' (see tomolive --help)\n", name);
    return 2;
}
