//! The picture reference of an image-to-3D request: a region of a target picture, cut out,
//! scaled down to a bounded size and encoded as PNG.

use crate::assets::{ReferencePicture, Region};

/// The smallest crop, in pixels of the target picture, on either side.
const MIN_CROP_SIDE: u32 = 8;

/// The PNG of `region` of the target picture labelled `view` (the first when `None`), at most
/// `max_side` pixels on its longer side; `Err` says what is wrong with the request.
pub(super) fn crop_target(
    pictures: &[ReferencePicture],
    view: Option<&str>,
    region: Region,
    max_side: u32,
) -> Result<Vec<u8>, String> {
    let picture = match view {
        None => pictures.first().ok_or(
            "this run has no target picture to crop; describe the object in words instead",
        )?,
        Some(view) => pictures
            .iter()
            .find(|picture| picture.label == view)
            .ok_or_else(|| {
                let labels: Vec<&str> = pictures.iter().map(|p| p.label.as_str()).collect();
                format!(
                    "there is no target picture {view:?}; the targets are: {}",
                    if labels.is_empty() {
                        "none".to_owned()
                    } else {
                        labels.join(", ")
                    }
                )
            })?,
    };
    let fractions = [region.left, region.top, region.right, region.bottom];
    if fractions
        .iter()
        .any(|f| !f.is_finite() || !(0.0..=1.0).contains(f))
        || region.left >= region.right
        || region.top >= region.bottom
    {
        return Err(format!(
            "the region [{}, {}, {}, {}] is not one: give [left, top, right, bottom] as fractions of the picture from 0 to 1, left < right and top < bottom",
            region.left, region.top, region.right, region.bottom
        ));
    }
    let image = image::load_from_memory(&picture.image.data)
        .map_err(|err| format!("the target picture {} cannot be read: {err}", picture.label))?;
    let (width, height) = (image.width(), image.height());
    let pixel = |fraction: f64, side: u32| ((fraction * f64::from(side)).round() as u32).min(side);
    let (left, top) = (pixel(region.left, width), pixel(region.top, height));
    let (right, bottom) = (pixel(region.right, width), pixel(region.bottom, height));
    if right.saturating_sub(left) < MIN_CROP_SIDE || bottom.saturating_sub(top) < MIN_CROP_SIDE {
        return Err(format!(
            "the region is {}x{} pixels of the {width}x{height} target picture; take at least {MIN_CROP_SIDE}x{MIN_CROP_SIDE} around the object",
            right.saturating_sub(left),
            bottom.saturating_sub(top)
        ));
    }
    let mut crop = image.crop_imm(left, top, right - left, bottom - top);
    if crop.width().max(crop.height()) > max_side {
        crop = crop.resize(max_side, max_side, image::imageops::FilterType::Triangle);
    }
    let mut png = Vec::new();
    crop.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|err| format!("the crop cannot be encoded as PNG: {err}"))?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;
    use viga_protocol::message::ImageData;

    fn picture(label: &str, width: u32, height: u32) -> ReferencePicture {
        ReferencePicture {
            label: label.to_owned(),
            image: ImageData {
                media_type: "image/png".to_owned(),
                data: viga_testkit::picture::halves_png(width, height),
            },
        }
    }

    fn region(left: f64, top: f64, right: f64, bottom: f64) -> Region {
        Region {
            left,
            top,
            right,
            bottom,
        }
    }

    #[test]
    fn a_region_of_the_named_target_is_cut_out_and_bounded() {
        let pictures = [picture("Camera1", 64, 32), picture("Camera2", 400, 200)];
        let left_half = crop_target(&pictures, None, region(0.0, 0.0, 0.5, 1.0), 1024).unwrap();
        let crop = image::load_from_memory(&left_half).unwrap().to_rgb8();
        assert_eq!(crop.dimensions(), (32, 32));
        assert!(
            crop.pixels().all(|p| p.0 == [255, 0, 0]),
            "only the red half"
        );
        let big = crop_target(&pictures, Some("Camera2"), region(0.0, 0.0, 1.0, 1.0), 100).unwrap();
        assert_eq!(image::load_from_memory(&big).unwrap().width(), 100);
        let missing = crop_target(&pictures, Some("Camera9"), region(0.0, 0.0, 1.0, 1.0), 100);
        assert!(
            missing
                .unwrap_err()
                .contains("the targets are: Camera1, Camera2")
        );
        for bad in [
            region(0.5, 0.0, 0.5, 1.0),
            region(-0.1, 0.0, 0.5, 1.0),
            region(0.0, 0.0, f64::NAN, 1.0),
        ] {
            assert!(
                crop_target(&pictures, None, bad, 100)
                    .unwrap_err()
                    .contains("is not one")
            );
        }
        let tiny = crop_target(&pictures, None, region(0.0, 0.0, 0.05, 0.05), 100);
        assert!(tiny.unwrap_err().contains("take at least 8x8"));
        assert!(crop_target(&[], None, region(0.0, 0.0, 1.0, 1.0), 100).is_err());
    }
}
