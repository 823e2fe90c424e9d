//! Image comparison. Photometric loss exactly as BlenderGym defines it: resize the target to
//! the render's size if they differ, take 8-bit RGB (alpha dropped), scale to [0, 1], and
//! average the squared differences over height x width x 3.

use image::imageops::FilterType;
use image::{DynamicImage, RgbImage};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    #[error("{which} image cannot be decoded: {message}")]
    Decode {
        which: &'static str,
        message: String,
    },
    #[error("{which} image is empty")]
    Empty { which: &'static str },
}

/// An encoded picture (PNG, JPEG) as 8-bit RGB, alpha dropped; `which` names it in errors.
pub fn decode_rgb(bytes: &[u8], which: &'static str) -> Result<RgbImage, MetricError> {
    let image: DynamicImage =
        image::load_from_memory(bytes).map_err(|err| MetricError::Decode {
            which,
            message: err.to_string(),
        })?;
    let rgb = image.to_rgb8();
    if rgb.width() == 0 || rgb.height() == 0 {
        return Err(MetricError::Empty { which });
    }
    Ok(rgb)
}

/// Width and height of an encoded image, decoded whole: a picture whose header reads but
/// whose data is cut off or corrupt is refused here, not after a run's first model calls.
pub fn decoded_size(bytes: &[u8]) -> Result<(u32, u32), MetricError> {
    decode_rgb(bytes, "target").map(|image| image.dimensions())
}

/// Width and height of an encoded image, read from its header.
pub fn image_size(bytes: &[u8]) -> Result<(u32, u32), MetricError> {
    image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|err| MetricError::Decode {
            which: "target",
            message: err.to_string(),
        })?
        .into_dimensions()
        .map_err(|err| MetricError::Decode {
            which: "target",
            message: err.to_string(),
        })
}

/// PL between an encoded proposal render and an encoded target (goal) image.
pub fn photometric_loss(proposal: &[u8], target: &[u8]) -> Result<f64, MetricError> {
    let proposal = decode_rgb(proposal, "proposal")?;
    let target = decode_rgb(target, "target")?;
    Ok(photometric_loss_rgb(
        &proposal,
        &sized(target, proposal.width(), proposal.height()),
    ))
}

/// `image` at `width` x `height`, resized as PL resizes a target when it differs.
pub fn sized(image: RgbImage, width: u32, height: u32) -> RgbImage {
    if image.dimensions() == (width, height) {
        image
    } else {
        image::imageops::resize(&image, width, height, FilterType::Triangle)
    }
}

/// PL of two decoded RGB images of the same size.
pub fn photometric_loss_rgb(proposal: &RgbImage, target: &RgbImage) -> f64 {
    let total: f64 = proposal
        .as_raw()
        .iter()
        .zip(target.as_raw())
        .map(|(a, b)| {
            let difference = (f64::from(*a) - f64::from(*b)) / 255.0;
            difference * difference
        })
        .sum();
    total / proposal.as_raw().len() as f64
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use image::{ImageFormat, Rgb, Rgba, RgbaImage};

    use super::*;

    fn png(image: &DynamicImage) -> Vec<u8> {
        let mut out = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    }

    #[test]
    fn identical_images_score_zero_and_opposites_score_one() {
        let black = DynamicImage::ImageRgb8(RgbImage::from_pixel(4, 3, Rgb([0, 0, 0])));
        let white = DynamicImage::ImageRgb8(RgbImage::from_pixel(4, 3, Rgb([255, 255, 255])));
        assert_eq!(photometric_loss(&png(&black), &png(&black)).unwrap(), 0.0);
        assert_eq!(photometric_loss(&png(&black), &png(&white)).unwrap(), 1.0);
    }

    #[test]
    fn alpha_is_dropped_and_sizes_are_matched_to_the_proposal() {
        let half = DynamicImage::ImageRgba8(RgbaImage::from_pixel(2, 2, Rgba([255, 0, 0, 10])));
        let red_big = DynamicImage::ImageRgb8(RgbImage::from_pixel(8, 8, Rgb([255, 0, 0])));
        assert_eq!(photometric_loss(&png(&half), &png(&red_big)).unwrap(), 0.0);
        let blue = DynamicImage::ImageRgb8(RgbImage::from_pixel(2, 2, Rgb([0, 0, 255])));
        // Two of three channels differ fully: 2/3.
        let loss = photometric_loss(&png(&blue), &png(&red_big)).unwrap();
        assert!((loss - 2.0 / 3.0).abs() < 1e-12, "{loss}");
        assert!(photometric_loss(b"nope", &png(&blue)).is_err());
    }
}
