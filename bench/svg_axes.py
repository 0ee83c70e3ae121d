"""The frame and axis ticks of the bench tools' SVG plots (compare.py, remat_ilp_plot.py)."""
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


def frame(W, H, L, R, T, B, title, title_y=18):
    """An SVG's opening: white background, the title, and the x and y axes of a plot area with
    margins L, R, T, B (left, right, top, bottom) in a W x H picture."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
            f'<rect width="{W}" height="{H}" fill="white"/>',
            f'<text x="{L}" y="{title_y}" font-size="14">{title}</text>',
            f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
            f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>']
