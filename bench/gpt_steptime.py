#!/usr/bin/env python3
"""gpt-mini at batch 16, step time and peak, gradc vs PyTorch: compare.py's step-time section alone
(5 steps, 2 warm-up, 3 alternated repeats), at the given intra-op thread count.

  /usr/bin/python3 bench/gpt_steptime.py THREADS

Prints compare.py's step-time line: per system the median step time, peak RSS and (gradc) the
tracked peak.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as c  # noqa: E402

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
with tempfile.TemporaryDirectory() as tmp:
    r = c.Runner(os.path.join(c.ROOT, "build", "gradc"), threads, tmp, print)
    c.section_steptime(r, {"repeats": 3, "steptime": {"gpt-mini": ([16], 5, 2)}}, print)
