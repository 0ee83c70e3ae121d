#!/usr/bin/env python3
"""Fails when a folder includes what its layer may not.

Rules (docs/development.md, "Layers"):
  - ir/ includes only the C++ standard library and ir/ itself, and its CMakeLists.txt links no
    library: what a backend's kernels need (oneDNN's scratchpads, CUDA's fused attention) is in
    that backend's description (runtime/<backend>/*_target.cpp, ir/kernel_target.h).
  - frontend/ and passes/ include no LibTorch, LLVM, CUDA or oneDNN header and nothing of
    runtime/ or codegen/ (frontend/ may include yaml-cpp).
  - runtime/'s folders are layers: their includes form no cycle (so no folder includes one
    above it), except the pairs listed in KNOWN_TWO_WAY_PAIRS, a list that may only shrink (a
    pair that no longer includes both ways must leave it).

Prints the runtime folders' layers, lowest first, and the pairs that include each other.
Usage: layering.py REPO_ROOT
"""
import os
import re
import sys

QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ANGLED = re.compile(r'^\s*#\s*include\s+<([^>]+)>', re.M)
SOURCES = (".h", ".cpp", ".cu", ".cuh", ".def")

# Two-way runtime folder pairs that remain; each is a shared vocabulary filed upstairs.
KNOWN_TWO_WAY_PAIRS = set()


def sources(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for name in sorted(files):
            if name.endswith(SOURCES):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, root), f.read()


def standard_header(name):
    # <vector>, <cstdint>: no folder, no extension.
    return "/" not in name and "." not in name


def check_ir(root, problems):
    for path, text in sources(root, "ir"):
        for name in QUOTED.findall(text):
            if not name.startswith("ir/"):
                problems.append(f'{path}: includes "{name}" (ir/ includes only ir/ and the standard library)')
        for name in ANGLED.findall(text):
            if not standard_header(name):
                problems.append(f"{path}: includes <{name}> (ir/ includes only ir/ and the standard library)")
    with open(os.path.join(root, "ir", "CMakeLists.txt"), encoding="utf-8") as f:
        if re.search(r"^\s*target_link_libraries\s*\(", f.read(), re.M):
            problems.append("ir/CMakeLists.txt: links a library (ir/ links none)")


def check_compiler(root, problems):
    allowed = {"frontend": ("ir/", "frontend/"), "passes": ("ir/", "passes/")}
    for folder, prefixes in allowed.items():
        for path, text in sources(root, folder):
            for name in QUOTED.findall(text):
                if not name.startswith(prefixes):
                    problems.append(f'{path}: includes "{name}" ({folder}/ includes only {", ".join(prefixes)})')
            for name in ANGLED.findall(text):
                if not standard_header(name) and not (folder == "frontend" and name.startswith("yaml-cpp/")):
                    problems.append(f"{path}: includes <{name}> ({folder}/ includes no library but the standard one)")


def description_files(root, folder):
    """A backend folder's description (ir/kernel_target.h): the sources its backend.cmake adds to
    GRADC_KERNEL_TARGET_SOURCES and the folder's headers they include. They are built without
    LibTorch into gradc_kernel_targets, below the runtime's kernels, which read them; the rest of
    the folder (its device, kernels and row) sits on top."""
    listing = os.path.join(root, "runtime", folder, "backend.cmake")
    if not os.path.exists(listing):
        return set()
    with open(listing, encoding="utf-8") as f:
        text = f.read()
    names = set()
    for block in re.findall(r"GRADC_KERNEL_TARGET_SOURCES([^)]*)\)", text):
        names |= set(re.findall(r"/([\w.]+\.cpp)", block))
    for name in list(names):
        with open(os.path.join(root, "runtime", folder, name), encoding="utf-8") as f:
            for inc in QUOTED.findall(f.read()):
                if inc.startswith(f"runtime/{folder}/"):
                    names.add(inc.split("/")[-1])
    return names


def runtime_edges(root):
    """Folder -> the folders it includes; a backend folder's description is a node of its own,
    "<folder>/description"."""
    edges = {}
    base = os.path.join(root, "runtime")
    owner = {}
    for folder in sorted(os.listdir(base)):
        if os.path.isdir(os.path.join(base, folder)):
            for name in description_files(root, folder):
                owner[f"runtime/{folder}/{name}"] = f"{folder}/description"
    for folder in sorted(os.listdir(base)):
        if not os.path.isdir(os.path.join(base, folder)):
            continue
        for path, text in sources(root, os.path.join("runtime", folder)):
            node = owner.get(path, folder)
            edges.setdefault(node, set())
            for name in QUOTED.findall(text):
                parts = name.split("/")
                if len(parts) > 2 and parts[0] == "runtime":
                    target = owner.get(name, parts[1])
                    if target != node:
                        edges[node].add(target)
    return edges


def layers(edges):
    """Folders by layer, lowest first (a folder's layer is one above the highest it includes);
    the folders left over are on a cycle."""
    placed, order, remaining = {}, [], set(edges)
    while remaining:
        ready = sorted(f for f in remaining if all(t in placed for t in edges[f] if t in edges))
        if not ready:
            break
        for f in ready:
            placed[f] = 1 + max([placed[t] for t in edges[f] if t in edges] or [-1])
        remaining -= set(ready)
    for f in sorted(placed, key=lambda f: (placed[f], f)):
        order.append((placed[f], f))
    return order, sorted(remaining)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    check_ir(root, problems)
    check_compiler(root, problems)
    edges = runtime_edges(root)
    pairs = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, set())})
    order, cyclic = layers(edges)
    print("runtime/ layers, lowest first: "
          + ", ".join(f"{f} ({n})" for n, f in order) + (f"; on a cycle: {', '.join(cyclic)}" if cyclic else ""))
    print(f"runtime/ folder pairs that include each other: {len(pairs)}"
          + "".join(f"\n  {a} <-> {b}" for a, b in pairs))
    if cyclic and not pairs:
        problems.append("runtime/ folders include each other in a cycle: " + ", ".join(cyclic))
    for pair in pairs:
        if pair not in KNOWN_TWO_WAY_PAIRS:
            problems.append(f"runtime/{pair[0]} and runtime/{pair[1]} include each other (a new two-way pair)")
    for pair in sorted(KNOWN_TWO_WAY_PAIRS - set(pairs)):
        problems.append(f"runtime/{pair[0]} and runtime/{pair[1]} no longer include each other: remove the pair "
                        "from KNOWN_TWO_WAY_PAIRS")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
