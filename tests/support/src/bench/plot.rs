//! The soak's RSS curve as a PNG line plot, drawn on an RGB canvas and encoded with the zlib
//! and CRC-32 crates the workspace already has (no plotting or image crate for one chart).

use crate::bench::font::glyph;

const WIDTH: usize = 800;
const HEIGHT: usize = 450;
const LEFT: usize = 80;
const RIGHT: usize = 30;
const TOP: usize = 70;
const BOTTOM: usize = 60;
const WHITE: [u8; 3] = [255, 255, 255];
const INK: [u8; 3] = [40, 40, 40];
const GRID: [u8; 3] = [225, 225, 225];
const LINE: [u8; 3] = [31, 119, 180];

struct Canvas {
    pixels: Vec<u8>,
}

impl Canvas {
    fn new() -> Self {
        Self {
            pixels: WHITE.repeat(WIDTH * HEIGHT),
        }
    }

    fn set(&mut self, x: i64, y: i64, color: [u8; 3]) {
        if (0..WIDTH as i64).contains(&x) && (0..HEIGHT as i64).contains(&y) {
            let at = (y as usize * WIDTH + x as usize) * 3;
            self.pixels[at..at + 3].copy_from_slice(&color);
        }
    }

    /// A line `thickness` pixels wide (Bresenham, stamped as squares).
    fn line(&mut self, from: (i64, i64), to: (i64, i64), thickness: i64, color: [u8; 3]) {
        let (mut x, mut y) = from;
        let (dx, dy) = ((to.0 - x).abs(), -(to.1 - y).abs());
        let (sx, sy) = (if x < to.0 { 1 } else { -1 }, if y < to.1 { 1 } else { -1 });
        let mut error = dx + dy;
        loop {
            for ox in 0..thickness {
                for oy in 0..thickness {
                    self.set(x + ox - thickness / 2, y + oy - thickness / 2, color);
                }
            }
            if (x, y) == to {
                break;
            }
            let e2 = 2 * error;
            if e2 >= dy {
                error += dy;
                x += sx;
            }
            if e2 <= dx {
                error += dx;
                y += sy;
            }
        }
    }

    /// Text at `scale` × the 5×7 font, its top-left corner at (x, y).
    fn text(&mut self, x: i64, y: i64, text: &str, scale: i64) {
        for (i, c) in text.chars().enumerate() {
            let left = x + i as i64 * 6 * scale;
            for (row, bits) in glyph(c).iter().enumerate() {
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        for sx in 0..scale {
                            for sy in 0..scale {
                                self.set(left + col * scale + sx, y + row as i64 * scale + sy, INK);
                            }
                        }
                    }
                }
            }
        }
    }

    fn text_width(text: &str, scale: i64) -> i64 {
        text.chars().count() as i64 * 6 * scale
    }
}

/// A step of 1, 2 or 5 × 10ⁿ giving about five intervals up to `max`.
fn nice_step(max: f64) -> f64 {
    let rough = (max / 5.0).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * magnitude)
}

fn label(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// A PNG of `points` (turns, RSS in MiB) as a line from zero, with axes, grid and `title`.
pub fn rss_plot_png(points: &[(f64, f64)], title: &str) -> std::io::Result<Vec<u8>> {
    let mut canvas = Canvas::new();
    let max_x = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let max_y = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let (step_x, step_y) = (nice_step(max_x), nice_step(max_y));
    let (top_x, top_y) = (
        (max_x / step_x).ceil() * step_x,
        (max_y / step_y).ceil() * step_y,
    );
    let (plot_w, plot_h) = (
        (WIDTH - LEFT - RIGHT) as f64,
        (HEIGHT - TOP - BOTTOM) as f64,
    );
    let at = |x: f64, y: f64| {
        (
            LEFT as i64 + (x / top_x * plot_w).round() as i64,
            (HEIGHT - BOTTOM) as i64 - (y / top_y * plot_h).round() as i64,
        )
    };
    let mut y = 0.0;
    while y <= top_y + step_y / 2.0 {
        let (x0, py) = at(0.0, y);
        canvas.line((x0, py), at(top_x, y), 1, GRID);
        let text = label(y);
        canvas.text(x0 - 10 - Canvas::text_width(&text, 2), py - 7, &text, 2);
        y += step_y;
    }
    let mut x = 0.0;
    while x <= top_x + step_x / 2.0 {
        let (px, y0) = at(x, 0.0);
        canvas.line((px, y0), at(x, top_y), 1, GRID);
        let text = label(x);
        canvas.text(px - Canvas::text_width(&text, 2) / 2, y0 + 10, &text, 2);
        x += step_x;
    }
    canvas.line(at(0.0, 0.0), at(top_x, 0.0), 2, INK);
    canvas.line(at(0.0, 0.0), at(0.0, top_y), 2, INK);
    for pair in points.windows(2) {
        canvas.line(at(pair[0].0, pair[0].1), at(pair[1].0, pair[1].1), 3, LINE);
    }
    for point in points {
        let (px, py) = at(point.0, point.1);
        for ox in -3..=3 {
            for oy in -3..=3 {
                canvas.set(px + ox, py + oy, LINE);
            }
        }
    }
    canvas.text(LEFT as i64, 10, title, 2);
    let axis = "turns";
    let center = LEFT as i64 + plot_w as i64 / 2 - Canvas::text_width(axis, 2) / 2;
    canvas.text(center, HEIGHT as i64 - 25, axis, 2);
    canvas.text(8, TOP as i64 - 32, "RSS MiB", 2);
    encode_png(&canvas.pixels, WIDTH, HEIGHT)
}

/// An 8-bit RGB PNG of `rgb` (rows of `width` pixels).
fn encode_png(rgb: &[u8], width: usize, height: usize) -> std::io::Result<Vec<u8>> {
    let size = |n: usize| u32::try_from(n).map_err(std::io::Error::other);
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, size(width)?, size(height)?);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(std::io::Error::other)?;
    writer
        .write_image_data(rgb)
        .map_err(std::io::Error::other)?;
    writer.finish().map_err(std::io::Error::other)?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_png_has_a_valid_signature_header_and_end() {
        let png =
            rss_plot_png(&[(0.0, 9.5), (1000.0, 12.0), (2000.0, 12.4)], "RSS").expect("encode");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 800);
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
        // The IEND CRC is fixed by the spec.
        assert_eq!(&png[png.len() - 4..], [0xAE, 0x42, 0x60, 0x82]);
        let mut reader = png::Decoder::new(std::io::Cursor::new(&png))
            .read_info()
            .expect("decodable");
        let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
        let frame = reader.next_frame(&mut pixels).expect("frame");
        assert_eq!((frame.width, frame.height), (800, 450));
        assert!(
            pixels.chunks(3).any(|p| p != [255, 255, 255]),
            "something was drawn"
        );
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(10_000.0), 2000.0);
        assert_eq!(nice_step(14.0), 5.0);
        assert_eq!(nice_step(40.0), 10.0);
    }
}
