/* keygen.c — `tomolive keygen`: makes a CURVE key pair for a client or for the daemon
 * (protocol/zcert.h): NAME.key (public, with the role in its metadata: copy it into the
 * daemon's security.clients directory) and NAME.key_secret (keep it; mode 0600).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "protocol/zcert.h"

#define ME "tomolive keygen"

static const char usage_text[] =
    "usage: tomolive keygen NAME [--role R] [--dir D] [--force]\n"
    "\n"
    "Writes a ZeroMQ CURVE certificate pair in czmq's zcert format: D/NAME.key (public) and\n"
    "D/NAME.key_secret (public and secret, mode 0600).\n"
    "\n"
    "      --role R  the client's role, written in the certificate's metadata: ingest (sends\n"
    "                frames), viewer (subscribes, reads status), operator (changes slices and\n"
    "                parameters) or admin (reset, tune). None for the daemon's own key.\n"
    "      --dir D   where to write them (default: the current directory)\n"
    "      --force   overwrite existing files\n"
    "\n"
    "The daemon's key:  tomolive keygen server            -> [security] server_key\n"
    "A client's key:    tomolive keygen alice --role operator; copy alice.key into the\n"
    "                   daemon's [security] clients directory; the client uses\n"
    "                   --key alice.key_secret --server-key server.key\n";

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

int tl_cmd_keygen(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"role", required_argument, NULL, 'r'},
        {"dir", required_argument, NULL, 'd'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *role = NULL, *dir = ".";
    bool force = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
            case 'r': role = optarg; break;
            case 'd': dir = optarg; break;
            case 'f': force = true; break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return fail(2, "%s '%s' (see tomolive keygen --help)",
                            c == ':' ? "option needs a value" : "unknown option",
                            argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return fail(2, "give one NAME (see tomolive keygen --help)");
    const char *name = argv[optind];
    size_t n = strlen(name);
    bool ok = n > 0 && n < 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
             (name[i] >= '0' && name[i] <= '9') || strchr("_.-", name[i]);
    if (!ok || name[0] == '.')
        return fail(2, "bad NAME '%s': 1 to 63 of A-Z a-z 0-9 _ . - (not starting with '.')",
                    name);
    if (role && strcmp(role, "ingest") != 0 && strcmp(role, "viewer") != 0 &&
        strcmp(role, "operator") != 0 && strcmp(role, "admin") != 0)
        return fail(2, "bad --role '%s': ingest, viewer, operator or admin", role);
    char base[4096], err[600];
    if ((size_t)snprintf(base, sizeof base, "%s/%s", dir, name) >= sizeof base)
        return fail(2, "--dir too long");
    tl_zcert cert;
    if (tl_zcert_new(&cert, role, err, sizeof err) != 0 ||
        tl_zcert_save(&cert, base, force, err, sizeof err) != 0)
        return fail(1, "%s", err);
    printf("%s.key\n%s.key_secret\n", base, base);
    memset(&cert, 0, sizeof cert);
    return 0;
}
