//! One image from several labelled views, so the verifier model sees every canonical view in
//! a single image (fewer image tokens than separate images, and the views stay side by side).

use std::io::Cursor;

use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::{ImageFormat, Rgb, RgbImage};
use viga_protocol::message::ImageData;

use crate::registry::ToolError;

const LABEL_SCALE: u32 = 2;
const GLYPH_WIDTH: u32 = 5;
const GLYPH_HEIGHT: u32 = 7;
const LABEL_HEIGHT: u32 = (GLYPH_HEIGHT + 4) * LABEL_SCALE;
const GAP: u32 = 4;
const BACKGROUND: Rgb<u8> = Rgb([24, 24, 24]);
const INK: Rgb<u8> = Rgb([255, 255, 255]);

/// A decoded view and its label.
#[derive(Debug, Clone)]
pub struct View {
    pub label: String,
    pub png: Vec<u8>,
}

/// Lays the views out in a near-square grid, each under a label strip, and encodes a PNG.
pub fn montage(views: &[View]) -> Result<ImageData, ToolError> {
    let decoded = views
        .iter()
        .map(|view| decode_view(&view.label, &view.png).map(|image| (view.label.clone(), image)))
        .collect::<Result<Vec<_>, _>>()?;
    compose(&decoded)
}

/// Decodes one view's PNG (callers may do this as each render arrives, off the critical path).
pub fn decode_view(label: &str, png: &[u8]) -> Result<RgbImage, ToolError> {
    image::load_from_memory_with_format(png, ImageFormat::Png)
        .map(|image| image.to_rgb8())
        .map_err(|err| ToolError::Fatal(format!("render {label:?} is not a readable PNG: {err}")))
}

/// Lays decoded, labelled views out in a near-square grid and encodes a PNG.
pub fn compose(views: &[(String, RgbImage)]) -> Result<ImageData, ToolError> {
    if views.is_empty() {
        return Err(ToolError::Fatal(
            "a montage needs at least one view".to_owned(),
        ));
    }
    let tile_width = views
        .iter()
        .map(|(_, image)| image.width())
        .max()
        .unwrap_or(1);
    let tile_height = views
        .iter()
        .map(|(_, image)| image.height())
        .max()
        .unwrap_or(1)
        + LABEL_HEIGHT;
    let columns = (views.len() as f64).sqrt().ceil() as u32;
    let rows = (views.len() as u32).div_ceil(columns);
    let width = columns * tile_width + (columns + 1) * GAP;
    let height = rows * tile_height + (rows + 1) * GAP;
    let mut canvas = RgbImage::from_pixel(width, height, BACKGROUND);
    for (index, (label, image)) in views.iter().enumerate() {
        let index = index as u32;
        let left = GAP + (index % columns) * (tile_width + GAP);
        let top = GAP + (index / columns) * (tile_height + GAP);
        draw_text(
            &mut canvas,
            left + 2 * LABEL_SCALE,
            top + 2 * LABEL_SCALE,
            label,
        );
        paste(&mut canvas, image, left, top + LABEL_HEIGHT);
    }
    // Fast compression: the montage is read once by a model, never archived, and the default
    // level costs several milliseconds per iteration for a few percent of size. The Sub
    // filter matters: shaded renders have no long runs of equal bytes, so without a filter
    // the fast compressor stores them as they are (measured on 256x256 Workbench views:
    // 894 KB unfiltered against 213 KB with Sub, and Sub encodes faster, 1.4 ms against
    // 1.9 ms). The buffer is reserved up front so the encoder never copies its output to
    // grow it.
    let mut png = Vec::with_capacity(canvas.as_raw().len() / 2);
    let encoder =
        PngEncoder::new_with_quality(Cursor::new(&mut png), CompressionType::Fast, PngFilter::Sub);
    canvas
        .write_with_encoder(encoder)
        .map_err(|err| ToolError::Fatal(format!("could not encode the montage: {err}")))?;
    Ok(ImageData::png(png))
}

/// Copies an opaque tile into the canvas row by row (no blending: renders are RGB, and a
/// per-pixel blend costs milliseconds per montage).
fn paste(canvas: &mut RgbImage, tile: &RgbImage, left: u32, top: u32) {
    let canvas_width = canvas.width() as usize;
    let canvas_height = canvas.height() as usize;
    let (left, top) = (left as usize, top as usize);
    let copy_width = (tile.width() as usize).min(canvas_width.saturating_sub(left));
    let rows = (tile.height() as usize).min(canvas_height.saturating_sub(top));
    let tile_stride = tile.width() as usize * 3;
    let canvas_stride = canvas_width * 3;
    let source = tile.as_raw();
    let target: &mut [u8] = canvas;
    for row in 0..rows {
        let from = row * tile_stride;
        let to = (top + row) * canvas_stride + left * 3;
        target[to..to + copy_width * 3].copy_from_slice(&source[from..from + copy_width * 3]);
    }
}

fn draw_text(canvas: &mut RgbImage, left: u32, top: u32, text: &str) {
    let mut x = left;
    for ch in text.chars() {
        let rows = glyph(ch.to_ascii_uppercase());
        for (row, bits) in rows.iter().enumerate() {
            for column in 0..GLYPH_WIDTH {
                if bits & (1 << (GLYPH_WIDTH - 1 - column)) != 0 {
                    fill(
                        canvas,
                        x + column * LABEL_SCALE,
                        top + row as u32 * LABEL_SCALE,
                        LABEL_SCALE,
                    );
                }
            }
        }
        x += (GLYPH_WIDTH + 1) * LABEL_SCALE;
        if x + GLYPH_WIDTH * LABEL_SCALE >= canvas.width() {
            return;
        }
    }
}

fn fill(canvas: &mut RgbImage, x: u32, y: u32, size: u32) {
    for dy in 0..size {
        for dx in 0..size {
            if x + dx < canvas.width() && y + dy < canvas.height() {
                canvas.put_pixel(x + dx, y + dy, INK);
            }
        }
    }
}

/// A 5x7 bitmap font for labels: one byte per row, the high five bits left to right.
fn glyph(ch: char) -> [u8; 7] {
    match ch {
        'A' => [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'B' => [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
        'C' => [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
        'D' => [0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E],
        'E' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        'F' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
        'G' => [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F],
        'H' => [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'I' => [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        'J' => [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
        'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        'L' => [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        'M' => [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
        'N' => [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
        'O' => [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'P' => [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        'Q' => [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D],
        'R' => [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
        'S' => [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
        'T' => [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        'U' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'V' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
        'W' => [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A],
        'X' => [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
        'Y' => [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04],
        'Z' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
        '0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        '1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        '2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        '3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        '4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        '5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        '6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        '7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        '8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        '9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        '-' => [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
        '_' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F],
        ':' => [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00],
        '.' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
        '/' => [0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00],
        '(' => [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
        ')' => [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08],
        ' ' => [0; 7],
        // Anything else shows as a small box, so a missing glyph is visible, not silent.
        _ => [0x00, 0x1F, 0x11, 0x11, 0x11, 0x1F, 0x00],
    }
}
