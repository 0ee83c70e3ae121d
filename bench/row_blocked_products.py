#!/usr/bin/env python3
"""Products in blocks of 1,024 output rows (runtime/kernels/row_blocked_products.h) against one call:
the time, and the pages OpenBLAS touches in its per-thread packing buffers.

  /usr/bin/python3 bench/row_blocked_products.py [--threads 1,2] [--rows 16384]

Runs in PyTorch (the same system OpenBLAS that gradc's LibTorch calls, through the same mm_out).
Time: out = x[rows, k] @ W[n, k]^T (a linear layer, W transposed as gradc passes it) for
gpt-mini's product shapes, whole and in row blocks,
alternated, 9 runs each, medians. Touched buffers: a fresh process runs the products once,
whole or blocked, and reads the resident size of its anonymous mappings of 64 MiB or more that
are not tensors (OpenBLAS's buffers) from /proc/self/smaps.
"""
import argparse
import re
import statistics
import subprocess
import sys
import time

BLOCK = 1024
SHAPES = [(256, 768), (256, 1024), (1024, 256), (256, 256)]  # (k, n): qkv, fc1, fc2, proj


def product(torch, out, x, w, block):
    if block is None:
        torch.mm(x, w, out=out)
        return
    for s in range(0, x.shape[0], block):
        torch.mm(x[s:s + block], w, out=out[s:s + block])


def child(threads, rows, block):
    """Runs every shape once and prints the touched MiB of the library's buffers."""
    import torch
    torch.set_num_threads(threads)
    for k, n in SHAPES:
        x, w, out = torch.randn(rows, k), torch.randn(n, k).t(), torch.empty(rows, n)
        product(torch, out, x, w, block)
        del x, w, out
    touched, size = 0, 0
    for line in open("/proc/self/smaps"):
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ 0 *$", line)
        if m:
            size = int(m.group(2), 16) - int(m.group(1), 16)
            continue
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            size = 0
        elif line.startswith("Rss:") and size >= 64 << 20:
            touched += int(line.split()[1]) * 1024
    print(touched / (1 << 20))


def touched_mib(threads, rows, block):
    r = subprocess.run([sys.executable, __file__, "--child", str(threads), str(rows), str(block or 0)],
                       capture_output=True, text=True, check=True)
    return float(r.stdout.strip())


def times(threads, rows):
    import torch
    torch.set_num_threads(threads)
    rowsout = []
    for k, n in SHAPES:
        x, w, out = torch.randn(rows, k), torch.randn(n, k).t(), torch.empty(rows, n)
        runs = {"whole": [], "blocked": []}
        for _ in range(2):
            product(torch, out, x, w, None)
            product(torch, out, x, w, BLOCK)
        for _ in range(9):
            for name, block in (("whole", None), ("blocked", BLOCK)):
                t = time.perf_counter()
                product(torch, out, x, w, block)
                runs[name].append(time.perf_counter() - t)
        whole, blocked = statistics.median(runs["whole"]), statistics.median(runs["blocked"])
        rowsout.append((k, n, whole, blocked))
    return rowsout


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) or None)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rows", type=int, default=16384)
    a = ap.parse_args()
    print(f"| threads | x[rows, k] @ W[n, k]^T | whole | blocks of {BLOCK} rows | blocked / whole |")
    print("|---|---|---|---|---|")
    for threads in map(int, a.threads.split(",")):
        for k, n, whole, blocked in times(threads, a.rows):
            print(f"| {threads} | [{a.rows}, {k}] @ [{n}, {k}]^T | {whole * 1e3:.1f} ms | {blocked * 1e3:.1f} ms | "
                  f"{blocked / whole:.2f}x |")
    print()
    print("| threads | rows | library buffers touched, whole | blocked |")
    print("|---|---|---|---|")
    for threads in map(int, a.threads.split(",")):
        for rows in (a.rows // 4, a.rows):
            print(f"| {threads} | {rows} | {touched_mib(threads, rows, None):.1f} MiB | "
                  f"{touched_mib(threads, rows, BLOCK):.1f} MiB |")


if __name__ == "__main__":
    main()
