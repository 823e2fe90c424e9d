//! Small pictures for tests that crop, send or compare target pictures.

use std::path::{Path, PathBuf};

/// A `width` x `height` PNG whose left half is pure red and right half pure blue, so a test
/// can tell which part of it a crop took.
pub fn halves_png(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_fn(width, height, |x, _| {
        if x < width / 2 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    });
    let mut png = Vec::new();
    // Encoding an in-memory RGB image as PNG cannot fail; an empty result would fail the
    // test that reads it.
    let _ = image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png);
    png
}

/// Every file below `folder`, however deep (links are not followed).
pub fn files_under(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => files.extend(files_under(&path)),
            Ok(kind) if kind.is_file() => files.push(path),
            _ => {}
        }
    }
    files
}
