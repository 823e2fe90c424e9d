use std::io::Cursor;

use image::{ImageFormat, Rgb, RgbImage};
use viga_skills::montage::{View, montage};

fn solid_png(width: u32, height: u32, colour: [u8; 3]) -> Vec<u8> {
    let mut png = Vec::new();
    RgbImage::from_pixel(width, height, Rgb(colour))
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .unwrap();
    png
}

#[test]
fn four_views_make_a_labelled_two_by_two_grid() {
    let views: Vec<View> = ["iso", "front", "right", "top"]
        .iter()
        .enumerate()
        .map(|(i, label)| View {
            label: label.to_string(),
            png: solid_png(40, 30, [50 * i as u8, 80, 120]),
        })
        .collect();
    let image = montage(&views).unwrap();
    assert_eq!(image.media_type, "image/png");
    let decoded = image::load_from_memory(&image.data).unwrap().to_rgb8();
    // Two columns and two rows of 40x(30 + 22) tiles with 4-pixel gaps.
    assert_eq!(
        decoded.dimensions(),
        (2 * 40 + 3 * 4, 2 * (30 + 22) + 3 * 4)
    );
    let label_strip_has_ink =
        (4..44).any(|x| (4..26).any(|y| decoded.get_pixel(x, y).0 == [255, 255, 255]));
    assert!(label_strip_has_ink, "the first tile's label is drawn");
    assert_eq!(
        decoded.get_pixel(4 + 44 + 10, 4 + 22 + 10).0,
        [50, 80, 120],
        "second tile's pixels are copied"
    );
}

#[test]
fn bad_input_is_reported() {
    assert!(montage(&[]).is_err());
    let err = montage(&[View {
        label: "x".into(),
        png: b"not a png".to_vec(),
    }])
    .unwrap_err();
    assert!(err.to_string().contains("not a readable PNG"), "{err}");
}

/// Shaded renders have no runs of equal bytes; the montage must still be compressed (the
/// fast compressor without a PNG filter stored such images uncompressed: 251 KB for these
/// 251 KB of pixels, against 102 KB with the Sub filter).
#[test]
fn shaded_views_are_compressed() {
    let shaded = |seed: u32| {
        let image = RgbImage::from_fn(128, 128, |x, y| {
            let v = (x * 2 + y + seed) as u8;
            Rgb([v, v.wrapping_add(7), v / 2])
        });
        let mut png = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
            .unwrap();
        png
    };
    let views: Vec<View> = (0..4)
        .map(|i| View {
            label: format!("view {i}"),
            png: shaded(i * 40),
        })
        .collect();
    let image = montage(&views).unwrap();
    let decoded = image::load_from_memory(&image.data).unwrap().to_rgb8();
    let raw = decoded.as_raw().len();
    assert!(
        image.data.len() * 2 < raw,
        "montage PNG is {} bytes for {raw} bytes of pixels",
        image.data.len()
    );
}
