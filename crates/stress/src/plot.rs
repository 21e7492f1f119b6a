//! `--plot FILE.png`: throughput and latency percentiles over time, drawn on
//! a small RGB canvas with the built-in bitmap font (`font.rs`) and encoded
//! as PNG with zlib (flate2) and our own CRC-32.
//!
//! Why not a plotting library: plotters' bitmap backend needs a TrueType font
//! stack (font-kit or ab_glyph plus a font file) to draw any text and the
//! `image` crate to encode; two charts with axes need neither.
//!
//! Invariants: drawing clips to the canvas (no coordinate panics); the PNG is
//! 8-bit RGB, one IDAT, filter type 0 on every row.

use std::io::Write;
use std::path::Path;

use crate::font;
use crate::report::IntervalRow;
use crate::settings::{Rate, RunLength, Settings};

type Rgb = [u8; 3];

const WHITE: Rgb = [255, 255, 255];
const BLACK: Rgb = [0, 0, 0];
const GRID: Rgb = [225, 225, 225];
const AXIS: Rgb = [90, 90, 90];
const BLUE: Rgb = [31, 119, 180];
const GREEN: Rgb = [44, 160, 44];
const ORANGE: Rgb = [255, 127, 14];
const RED: Rgb = [214, 39, 40];
const PURPLE: Rgb = [148, 103, 189];

/// An RGB raster.
pub struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    pub fn new(width: usize, height: usize) -> Canvas {
        Canvas { width, height, pixels: WHITE.repeat(width * height) }
    }

    fn set(&mut self, x: i64, y: i64, color: Rgb) {
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.height as i64 {
            return;
        }
        let at = (y as usize * self.width + x as usize) * 3;
        self.pixels[at..at + 3].copy_from_slice(&color);
    }

    pub fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, color: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, color);
            }
        }
    }

    /// A line `thickness` pixels wide (Bresenham with a square pen).
    pub fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), thickness: i64, color: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        let half = thickness / 2;
        // Bounded: at most dx + |dy| + 1 steps.
        for _ in 0..=(dx - dy) {
            self.fill_rect(x - half, y - half, thickness, thickness, color);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text with its top-left corner at (x, y), each font cell `scale` pixels.
    pub fn text(&mut self, x: i64, y: i64, scale: i64, color: Rgb, text: &str) {
        let mut cx = x;
        for c in text.chars() {
            for (row, cells) in font::glyph(c).iter().enumerate() {
                for (col, cell) in cells.chars().enumerate() {
                    if cell == '#' {
                        self.fill_rect(cx + col as i64 * scale, y + row as i64 * scale, scale, scale, color);
                    }
                }
            }
            cx += (font::WIDTH as i64 + 1) * scale;
        }
    }

    pub fn text_width(text: &str, scale: i64) -> i64 {
        text.chars().count() as i64 * (font::WIDTH as i64 + 1) * scale - scale
    }

    /// The canvas as a PNG file's bytes.
    pub fn png(&self) -> Result<Vec<u8>, String> {
        let mut raw = Vec::with_capacity((self.width * 3 + 1) * self.height);
        for row in self.pixels.chunks(self.width * 3) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw).map_err(|e| e.to_string())?;
        let idat = z.finish().map_err(|e| e.to_string())?;
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&(self.width as u32).to_be_bytes());
        ihdr.extend_from_slice(&(self.height as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit, RGB, deflate, no filter set, no interlace
        chunk(&mut png, b"IHDR", &ihdr);
        chunk(&mut png, b"IDAT", &idat);
        chunk(&mut png, b"IEND", &[]);
        Ok(png)
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// CRC-32 (IEEE 802.3, reflected, as PNG requires).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// The smallest 1/2/5 × 10^k step that splits `max` into at most `count` parts.
fn nice_step(max: f64, count: f64) -> f64 {
    if !(max > 0.0 && max.is_finite()) {
        return 1.0;
    }
    let rough = max / count;
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= rough).unwrap_or(10.0 * magnitude)
}

fn label(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{}K", trim(value / 1000.0))
    } else {
        trim(value)
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One chart: series over the same x (elapsed seconds).
struct Panel<'a> {
    title: &'a str,
    top: i64,
    height: i64,
    series: Vec<(&'a str, Rgb, Vec<f64>)>,
}

const LEFT: i64 = 90;
const RIGHT_MARGIN: i64 = 30;

fn draw_panel(canvas: &mut Canvas, panel: &Panel<'_>, xs: &[f64], x_max: f64) {
    let width = canvas.width as i64 - LEFT - RIGHT_MARGIN;
    let (top, height) = (panel.top + 30, panel.height - 70);
    let y_max_data = panel.series.iter().flat_map(|(_, _, v)| v.iter().copied()).fold(0.0, f64::max);
    let y_step = nice_step(y_max_data * 1.05, 5.0);
    let y_max = (y_max_data * 1.05 / y_step).ceil().max(1.0) * y_step;
    let x_step = nice_step(x_max, 8.0);
    let px = |x: f64| LEFT + (x / x_max * width as f64).round() as i64;
    let py = |y: f64| top + height - (y / y_max * height as f64).round() as i64;

    canvas.text(LEFT, panel.top + 6, 2, BLACK, panel.title);
    // Grid and tick labels.
    let mut y = 0.0;
    while y <= y_max + y_step / 2.0 {
        canvas.line((LEFT, py(y)), (LEFT + width, py(y)), 1, GRID);
        let text = label(y);
        canvas.text(LEFT - 8 - Canvas::text_width(&text, 2), py(y) - 7, 2, AXIS, &text);
        y += y_step;
    }
    let mut x = 0.0;
    while x <= x_max + x_step / 2.0 {
        canvas.line((px(x), top), (px(x), top + height), 1, GRID);
        let text = trim(x);
        canvas.text(px(x) - Canvas::text_width(&text, 2) / 2, top + height + 8, 2, AXIS, &text);
        x += x_step;
    }
    canvas.line((LEFT, top), (LEFT, top + height), 2, AXIS);
    canvas.line((LEFT, top + height), (LEFT + width, top + height), 2, AXIS);
    // Series and legend.
    let mut legend_x = LEFT + width;
    for (name, color, values) in panel.series.iter().rev() {
        legend_x -= Canvas::text_width(name, 2) + 30;
        canvas.fill_rect(legend_x, panel.top + 8, 14, 14, *color);
        canvas.text(legend_x + 20, panel.top + 8, 2, BLACK, name);
        let points: Vec<(i64, i64)> = xs.iter().zip(values).map(|(&x, &v)| (px(x), py(v))).collect();
        if let [only] = points.as_slice() {
            canvas.fill_rect(only.0 - 3, only.1 - 3, 6, 6, *color);
        }
        for pair in points.windows(2) {
            canvas.line(pair[0], pair[1], 2, *color);
        }
    }
}

/// Draws throughput and latency percentiles of `intervals` into `path`, under
/// `title` (upper case: the font has no lower case); `from_intended`: the latency
/// counts from intended starts (fixed-rate runs).
pub fn write_png(path: &Path, title: &str, from_intended: bool, intervals: &[IntervalRow]) -> Result<(), String> {
    let png = render(title, from_intended, intervals).png()?;
    std::fs::write(path, png).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The chart title of a run of `settings`.
pub fn title(settings: &Settings) -> String {
    let length = match settings.length {
        RunLength::Ops(n) => format!("N={}", crate::legacy::group_thousands(n)),
        RunLength::Time(d) => format!("DURATION={}S", d.as_secs()),
    };
    let rate = match settings.rate {
        Rate::Closed => format!("THREADS={}", settings.threads),
        Rate::Fixed(r) => format!("FIXED={r}/S"),
        Rate::Throttle(r) => format!("THROTTLE={r}/S THREADS={}", settings.threads),
    };
    format!(
        "SHOAL STRESS {} {length} {rate} CL={} COLUMNS={}X{}",
        settings.command.name(),
        settings.consistency.name(),
        settings.columns,
        settings.column_size
    )
}

pub fn render(title: &str, from_intended: bool, intervals: &[IntervalRow]) -> Canvas {
    let (width, height) = (1200usize, 800usize);
    let mut canvas = Canvas::new(width, height);
    let xs: Vec<f64> = intervals.iter().map(|r| r.elapsed_s).collect();
    let x_max = xs.iter().copied().fold(1.0, f64::max);
    canvas.text(LEFT, 14, 2, BLACK, &title.to_uppercase());
    let half = (height as i64 - 40) / 2;
    let throughput = Panel {
        title: "THROUGHPUT (OP/S)",
        top: 40,
        height: half,
        series: vec![("OP/S", BLUE, intervals.iter().map(|r| r.op_rate).collect())],
    };
    draw_panel(&mut canvas, &throughput, &xs, x_max);
    let latency_title = if from_intended {
        "LATENCY (MS, FROM INTENDED START)   X: ELAPSED SECONDS"
    } else {
        "LATENCY (MS)   X: ELAPSED SECONDS"
    };
    let latency = Panel {
        title: latency_title,
        top: 40 + half,
        height: half,
        series: vec![
            ("P50", GREEN, intervals.iter().map(|r| r.latency.p50_ms).collect()),
            ("P95", ORANGE, intervals.iter().map(|r| r.latency.p95_ms).collect()),
            ("P99", RED, intervals.iter().map(|r| r.latency.p99_ms).collect()),
            ("P99.9", PURPLE, intervals.iter().map(|r| r.latency.p999_ms).collect()),
        ],
    };
    draw_panel(&mut canvas, &latency, &xs, x_max);
    canvas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(42_000.0, 5.0), 10_000.0);
        assert_eq!(nice_step(0.9, 5.0), 0.2);
        assert_eq!(label(40_000.0), "40K");
        assert_eq!(label(2.5), "2.5");
    }

    #[test]
    fn png_has_signature_and_chunks() {
        let mut canvas = Canvas::new(10, 5);
        canvas.line((-5, -5), (20, 20), 3, RED);
        canvas.text(0, 0, 1, BLACK, "Hi!");
        let png = canvas.png().expect("png");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert_eq!(&png[12..16], b"IHDR");
        assert!(png.ends_with(&[0xAE, 0x42, 0x60, 0x82]));
    }
}
