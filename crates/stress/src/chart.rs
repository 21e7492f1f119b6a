//! Charts: the one plotting path of the project. A [`Chart`] is a title and a
//! stack of panels sharing one x axis, each panel a set of named line series;
//! it is drawn as SVG (or an HTML page holding that SVG) with `plotters`.
//!
//! `shoal stress --plot`, `shoal stress merge --plot` and `bench/compare`
//! (through `shoal stress plot SPEC.json OUT.svg`, whose spec is a `Chart` in
//! JSON) all draw through here, so every plot of the project looks the same.
//!
//! Why SVG: the text is the viewer's (no font file, no rasterizer in the
//! project), the files are small, diffable, and GitHub and every browser show
//! them.
//!
//! Invariants: drawing never panics on data (non-finite points are dropped, a
//! log axis clamps values at or below zero to its floor, empty panels get a
//! unit range); a log axis spans whole decades around the data, so a spike
//! does not flatten the rest of a line.

use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

/// A stack of panels over a shared x axis.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Chart {
    pub title: String,
    /// The shared x axis' name, printed under the last panel.
    #[serde(default)]
    pub x_label: String,
    #[serde(default)]
    pub log_x: bool,
    pub panels: Vec<Panel>,
    #[serde(default = "default_width")]
    pub width: u32,
    #[serde(default = "default_panel_height")]
    pub panel_height: u32,
}

/// One plot area: its series share the y axis.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Panel {
    pub title: String,
    #[serde(default)]
    pub y_label: String,
    /// A log y axis (latency panels: one spike must not flatten the others).
    #[serde(default)]
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Dashed horizontal reference lines (a bound, a target).
    #[serde(default)]
    pub hlines: Vec<HLine>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub name: String,
    /// `#rrggbb`; a palette color by the series' index when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HLine {
    pub y: f64,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

fn default_width() -> u32 {
    1200
}

fn default_panel_height() -> u32 {
    340
}

/// The palette (matplotlib's tab10 order: blue, orange, green, red, purple, ...).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

const TITLE_HEIGHT: u32 = 40;

/// `#rrggbb` as a color; `None` for anything else.
pub fn parse_color(text: &str) -> Option<RGBColor> {
    let hex = text.strip_prefix('#')?;
    if hex.len() != 6 || !hex.is_ascii() {
        return None;
    }
    let byte = |at: usize| hex.get(at..at + 2).and_then(|h| u8::from_str_radix(h, 16).ok());
    Some(RGBColor(byte(0)?, byte(2)?, byte(4)?))
}

fn color_of(given: Option<&str>, index: usize) -> RGBColor {
    given.and_then(parse_color).unwrap_or(PALETTE[index % PALETTE.len()])
}

impl Chart {
    /// Checks what drawing cannot repair: colors that are not `#rrggbb`, a
    /// chart without panels, sizes too small to draw in.
    pub fn validate(&self) -> Result<(), String> {
        if self.panels.is_empty() {
            return Err("a chart needs at least one panel".to_string());
        }
        if self.width < 200 || self.panel_height < 120 {
            return Err(format!(
                "chart size {}x{} per panel is too small (at least 200x120)",
                self.width, self.panel_height
            ));
        }
        let colors = self.panels.iter().flat_map(|p| {
            p.series.iter().filter_map(|s| s.color.as_deref()).chain(p.hlines.iter().filter_map(|h| h.color.as_deref()))
        });
        for color in colors {
            if parse_color(color).is_none() {
                return Err(format!("color `{color}` is not of the form #rrggbb"));
            }
        }
        Ok(())
    }

    /// The chart as an SVG document.
    pub fn svg(&self) -> Result<String, String> {
        self.validate()?;
        let height = TITLE_HEIGHT + self.panel_height * self.panels.len() as u32;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (self.width, height)).into_drawing_area();
            self.draw(&root).map_err(|e| format!("cannot draw the chart: {e}"))?;
            root.present().map_err(|e| format!("cannot draw the chart: {e}"))?;
        }
        Ok(out)
    }

    /// A self-contained HTML page holding the SVG.
    pub fn html(&self) -> Result<String, String> {
        let svg = self.svg()?;
        Ok(format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title></head>\n\
             <body style=\"margin:0;background:#fff\">\n{svg}\n</body></html>\n",
            escape(&self.title)
        ))
    }

    /// Writes the chart to `path`: `.svg` or `.html`, by its extension (see [`plottable`]).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if !plottable(path) {
            return Err(format!("cannot plot to {}: the file name must end in .svg or .html", path.display()));
        }
        let svg = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"));
        let text = if svg { self.svg()? } else { self.html()? };
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (title_area, body) = root.split_vertically(TITLE_HEIGHT);
        title_area
            .draw_text(&self.title, &("sans-serif", 22).into_font().color(&BLACK), (16, 12))
            .map_err(|e| e.to_string())?;
        let xs = self.panels.iter().flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
        let x_axis = Axis::new(xs, self.log_x);
        let areas = body.split_evenly((self.panels.len(), 1));
        let last = self.panels.len().saturating_sub(1);
        for (i, (panel, area)) in self.panels.iter().zip(areas.iter()).enumerate() {
            let x_label = if i == last { self.x_label.as_str() } else { "" };
            let ys =
                panel.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).chain(panel.hlines.iter().map(|h| h.y));
            draw_panel(area, panel, x_label, &x_axis, &Axis::new(ys, panel.log_y))?;
        }
        Ok(())
    }
}

/// Whether `path` names a file a chart can be written to (`.svg`, `.html`).
pub fn plottable(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(),
        Some("svg" | "html" | "htm")
    )
}

/// An axis as drawn: values are placed linearly, or by their log10 on a log
/// axis; `lo..hi` and the ticks are in that drawn space.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
    /// Labelled ticks (bold grid lines).
    ticks: Vec<f64>,
    /// Unlabelled light grid lines.
    light: Vec<f64>,
    /// A linear axis' tick step (labels carry as many decimals as it needs).
    step: f64,
}

impl Axis {
    /// The axis `values` need: a linear axis starts at 0 (or the data's
    /// minimum when negative) with 5% headroom; a log axis spans whole
    /// decades of the positive values (at least one).
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if log {
            let (lo, hi) = if lo.is_finite() { (lo.log10().floor(), hi.log10().ceil()) } else { (-1.0, 0.0) };
            return Axis::log_decades(lo, hi.max(lo + 1.0));
        }
        let (lo, hi) = if lo.is_finite() { (lo.min(0.0), hi) } else { (0.0, 1.0) };
        let hi = if hi > lo { hi + (hi - lo) * 0.05 } else { lo + 1.0 };
        let step = nice_step((hi - lo) / 6.0);
        let first = (lo / step).ceil() as i64;
        let count = ((hi - lo) / step).floor() as i64 + 1;
        let ticks: Vec<f64> = (first..first + count).map(|k| k as f64 * step).filter(|t| *t <= hi).collect();
        let light = ticks.iter().map(|t| t + step / 2.0).filter(|t| *t < hi).collect();
        Axis { log: false, lo, hi, ticks, light, step }
    }

    /// A log axis from 10^lo to 10^hi: a tick per decade, and at 2x and 5x
    /// too when it spans at most three decades.
    fn log_decades(lo: f64, hi: f64) -> Axis {
        let (first, last) = (lo as i32, hi as i32);
        let few = last - first <= 3;
        let (mut ticks, mut light) = (Vec::new(), Vec::new());
        for decade in first..=last {
            for m in 1..10 {
                let at = (f64::from(m) * 10f64.powi(decade)).log10();
                if at > hi + 1e-9 {
                    break;
                }
                if m == 1 || (few && (m == 2 || m == 5)) {
                    ticks.push(at);
                } else {
                    light.push(at);
                }
            }
        }
        Axis { log: true, lo, hi, ticks, light, step: 1.0 }
    }

    /// Where `value` is drawn; `None` when it cannot be (non-finite). A value
    /// at or below zero on a log axis sits on the axis' floor.
    fn place(&self, value: f64) -> Option<f64> {
        if !value.is_finite() {
            return None;
        }
        if !self.log {
            return Some(value);
        }
        Some(if value > 0.0 { value.log10().max(self.lo) } else { self.lo })
    }

    /// The label of a tick at drawn position `at`.
    fn label(&self, at: f64) -> String {
        if !self.log {
            return tick(at, self.step);
        }
        let value = 10f64.powf(at);
        // 2x, 5x or 1x a power of ten: as many decimals as that power needs.
        let exponent = at.floor() as i32;
        tick(value, 10f64.powi(exponent))
    }
}

/// Plotters' view of an axis: the mapping to pixels, and our ticks as its
/// key points (bold: labelled ticks; light: the light grid).
impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        // hi > lo: every constructor leaves a non-empty span.
        let fraction = (value - self.lo) / (self.hi - self.lo);
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A "nice" step (1, 2, 2.5 or 5 times a power of ten) at least `rough`.
fn nice_step(rough: f64) -> f64 {
    let rough = rough.max(1e-12);
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

/// A tick label with the decimals a step of `step` needs: `40K`, `1.5M`,
/// `2.5`, `0.005`.
pub fn tick(value: f64, step: f64) -> String {
    let (scaled, scaled_step, suffix) = match value.abs() {
        a if a >= 1e6 => (value / 1e6, step / 1e6, "M"),
        a if a >= 1e4 => (value / 1e3, step / 1e3, "K"),
        _ => (value, step, ""),
    };
    // The fewest decimals that write every multiple of the step exactly (2.5 needs one).
    let decimals = (0..9usize)
        .find(|&d| {
            let shifted = scaled_step.abs() * 10f64.powi(d as i32);
            (shifted - shifted.round()).abs() < 1e-6 * shifted.max(1.0)
        })
        .unwrap_or(9);
    let text = format!("{scaled:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    let text = if text == "-0" { "0" } else { text };
    format!("{text}{suffix}")
}

/// Width of `text` in pixels at a font size, as the SVG viewer will roughly draw it.
fn text_width(text: &str, size: f64) -> i32 {
    (text.chars().count() as f64 * size * 0.56).round() as i32
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_label: &str,
    x_axis: &Axis,
    y_axis: &Axis,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    const Y_LABELS: u32 = 78;
    const LEFT: u32 = 12;
    let mut chart = ChartBuilder::on(area)
        .margin_top(34)
        .margin_left(LEFT)
        .margin_right(24)
        .margin_bottom(6)
        .x_label_area_size(if x_label.is_empty() { 28 } else { 46 })
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(x_axis.clone(), y_axis.clone())
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(242, 242, 242))
        .bold_line_style(RGBColor(218, 218, 218))
        .x_desc(x_label)
        .y_desc(&panel.y_label)
        .x_label_formatter(&|v| x_axis.label(*v))
        .y_label_formatter(&|v| y_axis.label(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;

    // The panel's title on the left of its top row, the legend on the right, both outside the
    // plot so neither hides data.
    let title_x = (LEFT + Y_LABELS) as i32;
    area.draw_text(&panel.title, &("sans-serif", 18).into_font().color(&BLACK), (title_x, 8)).map_err(err)?;
    let (right, _) = area.dim_in_pixel();
    let mut legend_x = right as i32 - 24;
    for (i, series) in panel.series.iter().enumerate().rev() {
        let color = color_of(series.color.as_deref(), i);
        legend_x -= text_width(&series.name, 15.0) + 26;
        area.draw(&Rectangle::new([(legend_x, 10), (legend_x + 14, 24)], color.filled())).map_err(err)?;
        area.draw_text(&series.name, &("sans-serif", 15).into_font().color(&BLACK), (legend_x + 20, 9)).map_err(err)?;
    }

    let place = |(x, y): (f64, f64)| Some((x_axis.place(x)?, y_axis.place(y)?));
    for (i, series) in panel.series.iter().enumerate() {
        let color = color_of(series.color.as_deref(), i);
        let points: Vec<(f64, f64)> = series.points.iter().filter_map(|&p| place(p)).collect();
        let style = ShapeStyle::from(&color).stroke_width(2);
        if let [only] = points.as_slice() {
            chart.draw_series(std::iter::once(Circle::new(*only, 4, style.filled()))).map_err(err)?;
        } else {
            chart.draw_series(LineSeries::new(points, style)).map_err(err)?;
        }
    }
    for (i, line) in panel.hlines.iter().enumerate() {
        let color = color_of(line.color.as_deref(), panel.series.len() + i);
        let Some(y) = y_axis.place(line.y) else {
            continue;
        };
        let (from, to) = (x_axis.lo, x_axis.hi);
        let dashes = 60;
        let step = (to - from) / f64::from(dashes);
        let segments = (0..dashes).step_by(2).map(move |k| {
            let a = from + step * f64::from(k);
            PathElement::new(vec![(a, y), ((a + step).min(to), y)], color.stroke_width(2))
        });
        chart.draw_series(segments).map_err(err)?;
        let font = ("sans-serif", 14).into_font().color(&color).pos(Pos::new(HPos::Left, VPos::Bottom));
        chart
            .draw_series(std::iter::once(Text::new(line.label.clone(), (from + (to - from) * 0.01, y), font)))
            .map_err(err)?;
    }
    Ok(())
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Entry point of `shoal stress plot SPEC.json OUT.svg|OUT.html`.
pub fn main(args: &[String]) -> std::process::ExitCode {
    use std::process::ExitCode;
    const USAGE: &str = "usage: shoal stress plot SPEC.json OUT.svg|OUT.html
       (SPEC: {\"title\", \"x_label\", \"log_x\", \"panels\": [{\"title\", \"y_label\", \"log_y\",
        \"series\": [{\"name\", \"color\": \"#rrggbb\", \"points\": [[x, y], ...]}],
        \"hlines\": [{\"y\", \"label\", \"color\"}]}]})";
    if args.iter().any(|a| a == "-h" || a == "--help" || a == "help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let [spec, out] = args else {
        eprintln!("shoal stress plot: needs a spec and an output file\n\n{USAGE}");
        return ExitCode::from(crate::EXIT_USAGE);
    };
    let chart = std::fs::read_to_string(spec)
        .map_err(|e| format!("cannot read {spec}: {e}"))
        .and_then(|text| serde_json::from_str::<Chart>(&text).map_err(|e| format!("{spec} is not a chart spec: {e}")));
    match chart.and_then(|c| c.write(Path::new(out))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal stress plot: {e}");
            ExitCode::from(crate::EXIT_FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(log_y: bool, points: Vec<(f64, f64)>) -> Chart {
        Chart {
            title: "a <title> & more".into(),
            x_label: "elapsed seconds".into(),
            log_x: false,
            panels: vec![Panel {
                title: "latency".into(),
                y_label: "ms".into(),
                log_y,
                series: vec![Series { name: "p99".into(), color: None, points }],
                hlines: vec![HLine { y: 5.0, label: "target".into(), color: Some("#5a5a5a".into()) }],
            }],
            width: default_width(),
            panel_height: default_panel_height(),
        }
    }

    /// The text elements' contents.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("</text>")
            .filter_map(|chunk| chunk.rsplit_once("<text").and_then(|(_, t)| t.split_once('>')))
            .map(|(_, content)| content.trim().to_string())
            .collect()
    }

    #[test]
    fn log_axes_span_whole_decades_around_positive_data() {
        let a = Axis::new([0.0, 0.23, 4.0, 180.0, f64::NAN].into_iter(), true);
        assert_eq!((a.lo, a.hi), (-1.0, 3.0));
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert_eq!(labels, ["0.1", "1", "10", "100", "1000"], "four decades: decades only");
        let a = Axis::new([0.3, 0.9].into_iter(), true);
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert_eq!(labels, ["0.1", "0.2", "0.5", "1"], "one decade: 1, 2, 5");
        assert_eq!(a.light.len(), 6, "0.3, 0.4, 0.6 .. 0.9");
        assert_eq!(Axis::new(std::iter::empty(), true).ticks.len(), 4);
        let big = Axis::new([20_000.0, 900_000.0].into_iter(), true);
        assert_eq!(
            big.ticks.iter().map(|t| big.label(*t)).collect::<Vec<_>>(),
            ["10K", "20K", "50K", "100K", "200K", "500K", "1M"]
        );
    }

    #[test]
    fn linear_axes_start_at_zero_with_headroom_and_distinct_labels() {
        let a = Axis::new([10.0, 100.0].into_iter(), false);
        assert_eq!((a.lo, a.hi), (0.0, 105.0));
        assert_eq!(a.ticks.iter().map(|t| a.label(*t)).collect::<Vec<_>>(), ["0", "20", "40", "60", "80", "100"]);
        let a = Axis::new([0.0].into_iter(), false);
        assert_eq!((a.lo, a.hi), (0.0, 1.0));
        assert_eq!(Axis::new([-2.0, 2.0].into_iter(), false).lo, -2.0);
        // A run of 0.042 s: labels must differ (the old plot printed 0.01, 0.01, 0.02 ...).
        let a = Axis::new([0.0, 0.042].into_iter(), false);
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        let unique: std::collections::BTreeSet<&String> = labels.iter().collect();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
        assert_eq!(labels, ["0", "0.01", "0.02", "0.03", "0.04"]);
        let a = Axis::new([0.0, 0.02].into_iter(), false);
        assert_eq!(a.label(a.ticks[1]), "0.005");
    }

    #[test]
    fn points_that_cannot_be_drawn_are_dropped_or_clamped() {
        let log = Axis::new([0.1, 10.0].into_iter(), true);
        assert_eq!(log.place(f64::INFINITY), None);
        assert_eq!(log.place(0.0), Some(-1.0), "zero sits on the floor");
        assert_eq!(log.place(100.0), Some(2.0));
        let lin = Axis::new([1.0].into_iter(), false);
        assert_eq!(lin.place(f64::NAN), None);
        assert_eq!(lin.place(0.5), Some(0.5));
    }

    #[test]
    fn svg_has_the_series_the_title_and_a_log_axis() {
        let svg = chart(true, vec![(0.0, 0.0), (1.0, 0.5), (2.0, 250.0), (3.0, f64::NAN)]).svg().expect("svg");
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("p99") && svg.contains("target") && svg.contains("latency"));
        assert!(svg.contains("<polyline"), "a line for the series");
        // Decade ticks of the log axis 0.1 .. 1000.
        let texts = texts(&svg);
        for label in ["0.1", "1", "10", "100", "1000"] {
            assert!(texts.iter().any(|t| t == label), "tick {label} missing from {texts:?}");
        }
        assert!(!svg.contains("<title>"), "the title's markup is escaped");
    }

    #[test]
    fn single_points_empty_panels_and_html_draw() {
        let svg = chart(false, vec![(3.0, 7.0)]).svg().expect("one point");
        assert!(svg.contains("<circle"));
        let mut empty = chart(true, vec![]);
        empty.panels[0].hlines.clear();
        empty.svg().expect("an empty panel draws");
        let html = chart(false, vec![(0.0, 1.0), (1.0, 2.0)]).html().expect("html");
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg") && html.contains("a &lt;title&gt;"));
    }

    #[test]
    fn bad_specs_are_refused_with_a_reason() {
        let mut c = chart(false, vec![]);
        c.panels[0].series[0].color = Some("blue".into());
        assert!(c.svg().unwrap_err().contains("#rrggbb"));
        c.panels.clear();
        assert!(c.validate().unwrap_err().contains("at least one panel"));
        let c = chart(false, vec![]);
        let e = c.write(Path::new("/nonexistent-dir/x.png")).unwrap_err();
        assert!(e.contains(".svg or .html"), "{e}");
    }

    #[test]
    fn the_spec_reads_from_json_with_defaults() {
        let c: Chart = serde_json::from_str(
            r##"{"title": "t", "panels": [{"title": "p", "series": [{"name": "s", "points": [[0, 1], [1, 2]]}]}]}"##,
        )
        .expect("spec");
        assert_eq!((c.width, c.panel_height, c.log_x, c.panels[0].log_y), (1200, 340, false, false));
        assert_eq!(c.panels[0].series[0].points, vec![(0.0, 1.0), (1.0, 2.0)]);
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(40_000.0, 10_000.0), "40K");
        assert_eq!(tick(1_500_000.0, 500_000.0), "1.5M");
        assert_eq!(tick(2.5, 0.5), "2.5");
        assert_eq!(tick(0.001, 0.001), "0.001");
        assert_eq!(tick(1000.0, 200.0), "1000");
        assert_eq!(tick(12_500.0, 2_500.0), "12.5K");
        assert_eq!(parse_color("#1f77b4"), Some(RGBColor(31, 119, 180)));
        assert_eq!(parse_color("#1f77b"), None);
    }
}
