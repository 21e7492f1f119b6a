"""Charts: each is a JSON spec (a title, an x axis, panels of named series and dashed horizontal
lines) drawn to SVG by the stress tool's own plotter, `shoal stress plot SPEC.json OUT.svg`.

The spec, as the Rust side deserializes it:

    {"title": str, "x_label": str, "log_x": bool,
     "panels": [{"title": str, "y_label": str, "log_y": bool,
                 "series": [{"name": str, "color": "#rrggbb", "points": [[x, y], ...]}],
                 "hlines": [{"y": float, "label": str, "color": "#rrggbb"}]}]}

Latency panels (y in ms) are log-scaled, so one system's spike does not flatten the other's line.
The spec is kept: in the raw output directory as NAME.json when the results go elsewhere (the full
mode's bench/ with bench/out/STAMP/), otherwise beside the SVG as NAME.chart.json. The comparison
(`compare.results_plots`), steadiness and durability build their specs with the helpers here."""

import json
import math
import os

from .util import SHOAL_BIN, Fail, log, sh, shown

COLORS = {"cassandra": "#d62728", "cassandra-latest": "#ff7f0e", "shoal": "#1f77b4",
          "batch": "#d62728", "group": "#1f77b4", "periodic": "#2ca02c", "fsync": "#5a5a5a"}


def series(name, points, key=None):
    """A named line; `key` picks its color from COLORS (else the plotter's palette by index). Points
    with a value that is not a finite number are left out (JSON has no NaN)."""
    s = {"name": name}
    if key is not None:
        s["color"] = COLORS[key]
    s["points"] = [[float(x), float(y)] for x, y in points
                   if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
    return s


def hline(y, label, key):
    """A dashed horizontal line (a bound) across one panel."""
    return {"y": float(y), "label": label, "color": COLORS[key]}


def panel(title, y_label, lines, hlines=(), log_y=None):
    """One panel; log_y defaults to true for latency (y in ms) and false for the rest."""
    return {"title": title, "y_label": y_label, "log_y": (y_label == "ms") if log_y is None else bool(log_y),
            "series": list(lines), "hlines": list(hlines)}


def chart(title, x_label, panels, log_x=False):
    return {"title": title, "x_label": x_label, "log_x": bool(log_x), "panels": list(panels)}


def spec_path(svg_path, raw_dir=None):
    """Where the spec of `svg_path` is written: RAW_DIR/NAME.json when the raw output has its own
    directory, otherwise beside the SVG as NAME.chart.json."""
    stem = os.path.splitext(os.path.basename(svg_path))[0]
    svg_dir = os.path.dirname(os.path.abspath(svg_path))
    if raw_dir and os.path.abspath(raw_dir) != svg_dir:
        return os.path.join(raw_dir, stem + ".json")
    return os.path.join(svg_dir, stem + ".chart.json")


def draw(spec, svg_path, raw_dir=None):
    """Writes the spec and draws it with `shoal stress plot`. A plotter failure is logged, not raised
    (the measurements are worth more than their chart): returns whether the SVG was drawn."""
    path = spec_path(svg_path, raw_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(spec, f, indent=1, allow_nan=False)
        f.write("\n")
    try:
        sh([SHOAL_BIN, "stress", "plot", path, svg_path], timeout=60)
    except (Fail, OSError) as e:  # OSError: no binary to run
        log(f"warning: {shown(svg_path)} not drawn (the spec is {shown(path)}): {e}")
        return False
    return True


def md_image(svg, drawn, results_dir, md_path, raw_dir=None):
    """The Markdown line for a chart in the report at `md_path`: the image, or, when the plotter did
    not draw it, how to draw it from its kept spec."""
    svg_path = os.path.join(results_dir, svg)
    if drawn:
        return f"![{svg}]({os.path.relpath(svg_path, os.path.dirname(md_path))})"
    return (f"({svg} was not drawn: `shoal stress plot {shown(spec_path(svg_path, raw_dir))} {shown(svg_path)}` "
            "draws it from its kept spec.)")
