"""Axis ticks for the bench tools' SVG plots (compare.py, remat_ilp_plot.py)."""
import math


def ticks(lo, hi, n=6):
    """Round values (1, 2 or 5 times a power of ten apart) from lo to hi, about n of them."""
    step = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(step))
    for m in (1, 2, 5, 10):
        if step <= m * mag:
            step = m * mag
            break
    v = math.ceil(lo / step) * step
    while v <= hi + 1e-9 * step:
        yield v
        v += step
