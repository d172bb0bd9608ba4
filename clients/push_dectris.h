/* push_dectris.h — `tomolive push --dectris DIR`: recorded DECTRIS Stream V2 messages
 * replayed as the detector sent them.
 *
 * DIR holds one message per file (*.cbor, as DECTRIS publishes its test data and as a
 * recording client writes them), sent in the order of their names, each file's bytes as
 * one ZeroMQ message (PUSH, as the detector's DCU), paced at a given rate. A set without a
 * `start` message (the published sets have none) gets one synthesised from its first image,
 * with the fields of the specification's Start Message that an image tells: series id and
 * unique id, image size, channels, and the number of images in the set; it goes first.
 *
 *   tl_push_dectris_opts o = {.dir = "data/", .endpoint = "tcp://localhost:5600", ...};
 *   return tl_push_dectris(&o);                       exit status: 0, 1 failed, 2 usage
 */
#ifndef TL_PUSH_DECTRIS_H
#define TL_PUSH_DECTRIS_H

#include <stdbool.h>

typedef struct {
    const char *dir;
    const char *endpoint;
    bool bind, quiet;
    double rate; /* messages per second; 0 = as fast as possible */
    int sndhwm;
} tl_push_dectris_opts;

int tl_push_dectris(const tl_push_dectris_opts *o);

#endif
