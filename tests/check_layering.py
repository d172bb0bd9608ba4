#!/usr/bin/env python3
"""check_layering.py — the tree's dependency rules, checked on what the code really does.

The threat: an arrow against the layering (gpu/ including a daemon header, a backend calling
back into the engine) or a circle between modules creeps in one convenient include or call at
a time, and nobody notices until a module cannot be built, tested or replaced alone. So the
rules are written down once, in tests/layering.conf (a module is a folder; each line says
which other folders it may use), and checked here from two sources:

  - includes: every `#include "…"` in the C, CUDA and header files of the listed folders,
    resolved against the tree (system headers are not ours and are ignored);
  - calls: the symbols each object file of the build needs (nm: U) and the object files that
    define them (nm: T, D, B, R, …), so a call through a declaration the checker cannot see
    in the includes still counts. Objects are mapped to their folder by path.

Between top-level folders the used side counts as its top-level folder (daemon/ calling a
function of gpu/ipc.h that gpu/cuda/ defines uses gpu); inside one, subfolders are modules.

It fails on: an edge between two folders that the table does not allow; a folder the table
does not list; a table that itself has a circle (then the allowed edges could form one); a
circle of #include between files. Tests (tests/) may use anything and are not checked.

Run by `make check` (objects must be built; it skips, 77, where none are found) or by hand:
    tests/check_layering.py [--src DIR] [--build DIR] [--explain]
"""
import argparse
import os
import re
import subprocess
import sys

SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_table(path):
    """{folder: set of folders it may use}, in file order."""
    table = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line:
                sys.exit(f"{path}:{number}: expected 'FOLDER: FOLDERS…', got {line!r}")
            folder, uses = line.split(":", 1)
            table[folder.strip()] = set(uses.split())
    return table


def edge(a, b):
    """The folders an edge joins, as the table sees it: between top-level folders (daemon/
    using gpu/) the used side is its top-level folder, whichever subfolder implements the
    symbol (gpu/ipc.h is gpu's door even where gpu/cuda/ipc.cu defines it)."""
    if a.split("/")[0] != b.split("/")[0]:
        b = b.split("/")[0]
    return a, b


def folder_of(path, table):
    """The deepest listed folder that holds path (a path relative to the tree), or None."""
    parts = os.path.dirname(path).split("/")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n])
        if candidate in table:
            return candidate
    return None


def top_folders(table):
    return sorted({f.split("/")[0] for f in table})


def source_files(src, table):
    for top in top_folders(table):
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if name.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(root, name), src)


def include_edges(src, table):
    """(file, included file) for every quoted include that resolves to a file of the tree."""
    edges = []
    for path in source_files(src, table):
        with open(os.path.join(src, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            for candidate in (target, os.path.join(os.path.dirname(path), target)):
                candidate = os.path.normpath(candidate)
                if os.path.isfile(os.path.join(src, candidate)):
                    edges.append((path, candidate))
                    break
    return edges


def object_files(src, build, table):
    """Object files of the build whose source is still in the tree (automake names them
    TARGET-NAME.o, nvcc NAME.o): an in-tree build keeps objects of files moved away."""
    for top in top_folders(table):
        for root, dirs, files in os.walk(os.path.join(build, top)):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if not name.endswith(".o"):
                    continue
                obj = os.path.relpath(os.path.join(root, name), build)
                stem = name[:-2].rsplit("-", 1)[-1]
                folder = os.path.join(src, os.path.dirname(obj))
                if any(os.path.isfile(os.path.join(folder, stem + ext)) for ext in (".c", ".cu")):
                    yield obj


def symbols(build, obj):
    """(defined, needed) global symbol names of one object file."""
    out = subprocess.run(["nm", "-g", os.path.join(build, obj)], capture_output=True,
                         text=True, check=False).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            needed.add(fields[1])
        elif len(fields) == 3 and fields[1] not in ("U", "w", "v"):
            defined.add(fields[2])
    return defined, needed


def call_edges(src, build, table):
    """(object, object) for every symbol one object of the build needs and another defines."""
    objects = list(object_files(src, build, table))
    defined_in, needs = {}, {}
    for obj in objects:
        defined, needed = symbols(build, obj)
        needs[obj] = needed
        for name in defined:
            defined_in.setdefault(name, set()).add(obj)
    edges = []
    for obj in objects:
        for name in needs[obj]:
            for other in defined_in.get(name, ()):
                if other != obj:
                    edges.append((obj, other, name))
    return objects, edges


def find_cycle(graph):
    """A list of nodes forming a circle in {node: successors}, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", default=os.environ.get("top_srcdir") or os.path.dirname(here))
    parser.add_argument("--build", default=os.environ.get("top_builddir") or os.path.dirname(here))
    parser.add_argument("--explain", action="store_true", help="list every edge between folders")
    args = parser.parse_args()
    table = read_table(os.path.join(args.src, "tests", "layering.conf"))
    problems = []

    for folder, uses in table.items():
        for used in uses:
            if used not in table:
                problems.append(f"layering.conf: {folder} may use {used}, which is not listed")
    cycle = find_cycle(table)
    if cycle:
        problems.append("layering.conf allows a circle: " + " -> ".join(cycle))

    # why: folder edge -> one example of what made it
    why = {}
    files_graph = {}
    for path, target in include_edges(args.src, table):
        files_graph.setdefault(path, set()).add(target)
        a, b = folder_of(path, table), folder_of(target, table)
        if a is None:
            problems.append(f"{path}: in no folder of layering.conf")
        elif b is not None and a != b:
            why.setdefault(edge(a, b), f"{path} includes {target}")
    objects, edges = call_edges(args.src, args.build, table)
    if not objects:
        print("no object files under", args.build, "(build first): skipped")
        return 77
    for obj, other, name in edges:
        a, b = folder_of(obj, table), folder_of(other, table)
        if a is None:
            problems.append(f"{obj}: in no folder of layering.conf")
        elif b is not None and a != b:
            why.setdefault(edge(a, b), f"{obj} uses {name} from {other}")

    for (a, b), example in sorted(why.items()):
        allowed = b in table.get(a, ())
        if args.explain:
            print(f"{'  ' if allowed else '!!'} {a} -> {b}: {example}")
        if not allowed:
            problems.append(f"{a} -> {b} is against tests/layering.conf: {example}")
    cycle = find_cycle(files_graph)
    if cycle:
        problems.append("#include circle: " + " -> ".join(cycle))

    for p in problems:
        print("FAIL:", p)
    print(f"{len(table)} folders, {len(why)} edges between them, {len(objects)} object files: "
          f"{'ok' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
