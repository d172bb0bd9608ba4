#!/usr/bin/python3
"""live_slice.py: show one slice of tomolived live with matplotlib.

Subscribes to slice ID on the daemon's slice socket and shows each new image as it
arrives, with its sequence number, the projections it used and its latency in the
title.  With --row Z it first defines ID as the horizontal slice at detector row Z
(a control request); otherwise ID must already be defined (tomolive ctl set_slice).

Headless (--save FILE.png, or no display): no window; the last image received is written
to FILE.png (one image pixel per PNG pixel, grey scale) when --count slices have come,
or the scan's final slice (--until-final), or at the timeout, and the script exits.

    python3 live_slice.py --row 32 row0                       # a window, live
    python3 live_slice.py --save row0.png --until-final row0  # headless, for tests

Needs the tomolive package on PYTHONPATH (clients/python) and Debian's python3-zmq,
python3-msgpack, python3-numpy and python3-matplotlib.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # the tomolive package next to examples/

import tomolive  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Show a tomolived slice live (matplotlib).")
    ap.add_argument("id", help="slice id (topic slice/<id>/)")
    ap.add_argument("--endpoint", default="tcp://localhost:5602",
                    help="the daemon's slice socket (default %(default)s)")
    ap.add_argument("--control", default="tcp://localhost:5601",
                    help="the daemon's control socket, for --row (default %(default)s)")
    ap.add_argument("--row", type=float, metavar="Z",
                    help="first define ID as the horizontal slice at detector row Z")
    ap.add_argument("--save", metavar="FILE.png",
                    help="no window: write the last image to FILE.png and exit")
    ap.add_argument("--count", type=int, metavar="N", help="stop after N slices")
    ap.add_argument("--until-final", action="store_true",
                    help="stop after the scan's final slice")
    ap.add_argument("--timeout", type=float, default=None, metavar="S",
                    help="give up after S seconds without a slice (exit status 3)")
    ap.add_argument("--cmap", default="gray", help="matplotlib colour map (default gray)")
    return ap.parse_args(argv)


def headless(args: argparse.Namespace) -> bool:
    """No window when saving, or when there is no display to open one on."""
    if args.save:
        return True
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) \
        or os.environ.get("MPLBACKEND", "").lower() == "agg"


def title(s: tomolive.Slice) -> str:
    return "%s  seq %d  %d projections (%d missing)  latency %.1f ms%s" % (
        s.id, s.seq, s.projections_used, s.missing, s.latency * 1e3,
        "  final" if s.final else "")


def main(argv=None) -> int:
    args = parse_args(argv)
    quiet = headless(args)
    if quiet:
        os.environ["MPLBACKEND"] = "Agg"
        if not args.save:
            args.save = args.id + ".png"
    import matplotlib
    if quiet:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sub = tomolive.Subscriber(args.endpoint, [args.id])
    if args.row is not None:
        with tomolive.Control(args.control) as ctl:
            ctl.set_slice(args.id, kind="row", z=args.row)
    last = None
    fig = im = None
    n = 0
    waited_since = time.monotonic()
    try:
        while args.count is None or n < args.count:
            try:
                # short waits when a window is open, so that it stays responsive
                s = sub.recv(args.timeout if quiet else 0.05)
            except TimeoutError:
                if quiet or (args.timeout and time.monotonic() - waited_since > args.timeout):
                    print("live_slice: no slice for %g s" % args.timeout, file=sys.stderr)
                    break
                if fig is not None and not plt.fignum_exists(fig.number):
                    break  # the window was closed
                plt.pause(0.05)
                continue
            waited_since = time.monotonic()
            n += 1
            last = s
            if not quiet:
                if fig is None:
                    fig, ax = plt.subplots()
                    im = ax.imshow(s.image, cmap=args.cmap)
                    fig.colorbar(im, ax=ax)
                else:
                    im.set_data(s.image)
                    im.set_clim(float(s.image.min()), float(s.image.max()))
                im.axes.set_title(title(s), fontsize=9)
                plt.pause(0.001)
                if not plt.fignum_exists(fig.number):
                    break
            else:
                print(title(s), flush=True)
            if args.until_final and s.final:
                break
    except KeyboardInterrupt:
        pass
    finally:
        sub.close()
    if last is None:
        print("live_slice: no slice received", file=sys.stderr)
        return 3
    if args.save:
        # the image itself, one pixel per pixel (a figure would add axes and resampling)
        plt.imsave(args.save, last.image, cmap=args.cmap)
        print("live_slice: wrote %s (%d x %d, seq %d)" % (args.save, last.shape[0],
                                                          last.shape[1], last.seq))
    elif fig is not None and plt.fignum_exists(fig.number):
        plt.show()  # keep the last image on screen until the window is closed
    return 0


if __name__ == "__main__":
    sys.exit(main())
