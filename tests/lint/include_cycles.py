#!/usr/bin/env python3
"""Fails when the compiler's modules include each other in a cycle.

A module is a header and its source (passes/remat.h + passes/remat.cpp). An edge A -> B is an
`#include "B.h"` in A's header or source. Any strongly connected component of more than one
module under the folders named (default: passes) is reported with its members and the includes
that close it, and the exit code is 1. Usage: include_cycles.py REPO_ROOT [FOLDER...]
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)


def modules(root, folders):
    edges = {}
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                module = os.path.relpath(path, root).rsplit(".", 1)[0]
                with open(path, encoding="utf-8") as f:
                    for target in INCLUDE.findall(f.read()):
                        if target != module and any(target.startswith(d + "/") for d in folders):
                            edges.setdefault(module, set()).add(target)
                edges.setdefault(module, set())
    return edges


def cycles(edges):
    """Tarjan's strongly connected components, iteratively; only those of 2+ modules."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    folders = sys.argv[2:] or ["passes"]
    edges = modules(root, folders)
    found = cycles(edges)
    for component in found:
        members = set(component)
        print("include cycle: " + ", ".join(component))
        for m in component:
            for t in sorted(edges[m] & members):
                print(f"  {m} includes {t}.h")
    if not found:
        print(f"no include cycles among {len(edges)} modules under {', '.join(folders)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
