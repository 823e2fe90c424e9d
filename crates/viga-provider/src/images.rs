//! Images are downscaled before they are sent: providers bill images by their pixel size, so a
//! bounded side keeps image tokens bounded whatever the renderer produced. The caller's
//! images are never modified; each adapter works on what [`for_wire`] returns.

use std::borrow::Cow;
use std::io::Cursor;

use base64::Engine as _;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, RgbImage};
use serde::{Deserialize, Serialize};
use viga_protocol::message::ImageData;

/// How sent images are encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageEncoding {
    /// Lossless: thin edges and small text in renders stay readable.
    #[default]
    Png,
    /// Smaller requests; transparency is flattened onto white.
    Jpeg,
}

impl ImageEncoding {
    fn format(self) -> ImageFormat {
        match self {
            Self::Png => ImageFormat::Png,
            Self::Jpeg => ImageFormat::Jpeg,
        }
    }
}

/// Bounds on every image sent to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImageLimits {
    /// The longest side, in pixels; larger images are scaled down keeping their aspect ratio.
    pub max_side: u32,
    pub format: ImageEncoding,
    /// 1 to 100, for `format = "jpeg"`.
    pub jpeg_quality: u8,
}

impl Default for ImageLimits {
    fn default() -> Self {
        Self {
            max_side: 1024,
            format: ImageEncoding::Png,
            jpeg_quality: 85,
        }
    }
}

impl ImageLimits {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_side < 8 {
            return Err(format!(
                "images.max_side is {}; use at least 8 pixels (1024 is the default)",
                self.max_side
            ));
        }
        if !(1..=100).contains(&self.jpeg_quality) {
            return Err(format!(
                "images.jpeg_quality is {}; use 1 to 100",
                self.jpeg_quality
            ));
        }
        Ok(())
    }
}

/// An image as the wire carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WireImage {
    pub(crate) media_type: String,
    pub(crate) base64: String,
}

impl WireImage {
    pub(crate) fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.base64)
    }
}

/// The image within `limits`, base64-encoded. The error says why it cannot be sent.
pub(crate) fn for_wire(image: &ImageData, limits: &ImageLimits) -> Result<WireImage, String> {
    let prepared = prepare(image, limits)?;
    Ok(WireImage {
        media_type: prepared.media_type.clone(),
        base64: base64::engine::general_purpose::STANDARD.encode(&prepared.data),
    })
}

/// The image itself when it already fits and is in the target format (re-encoding would
/// only cost time, and quality for JPEG); otherwise a scaled, re-encoded copy.
fn prepare<'a>(image: &'a ImageData, limits: &ImageLimits) -> Result<Cow<'a, ImageData>, String> {
    let reader = ImageReader::new(Cursor::new(&image.data))
        .with_guessed_format()
        .map_err(|err| format!("cannot read the image: {err}"))?;
    // Only the PNG and JPEG codecs are built in (see the workspace Cargo.toml).
    let format = reader
        .format()
        .filter(|format| matches!(format, ImageFormat::Png | ImageFormat::Jpeg))
        .ok_or_else(|| {
            format!(
                "the image ({}, {} bytes) is neither PNG nor JPEG",
                image.media_type,
                image.data.len()
            )
        })?;
    let (width, height) = reader
        .into_dimensions()
        .map_err(|err| format!("cannot read the {format:?} image's size: {err}"))?;
    let target = limits.format.format();
    let fits = width.max(height) <= limits.max_side;
    if fits && format == target && image.media_type == target.to_mime_type() {
        return Ok(Cow::Borrowed(image));
    }
    let decoded = image::load_from_memory_with_format(&image.data, format)
        .map_err(|err| format!("cannot decode the {format:?} image: {err}"))?;
    let scaled = if fits {
        decoded
    } else {
        // Triangle (bilinear, widened when shrinking) is several times faster than Lanczos
        // and loses nothing a model can see at these sizes.
        decoded.resize(limits.max_side, limits.max_side, FilterType::Triangle)
    };
    encode(&scaled, limits).map(Cow::Owned)
}

fn encode(image: &DynamicImage, limits: &ImageLimits) -> Result<ImageData, String> {
    let mut data = Vec::new();
    let result = match limits.format {
        ImageEncoding::Png => image.write_with_encoder(PngEncoder::new(&mut data)),
        ImageEncoding::Jpeg => {
            DynamicImage::ImageRgb8(flatten_onto_white(image)).write_with_encoder(
                JpegEncoder::new_with_quality(&mut data, limits.jpeg_quality),
            )
        }
    };
    result.map_err(|err| format!("cannot encode the image as {:?}: {err}", limits.format))?;
    Ok(ImageData {
        media_type: limits.format.format().to_mime_type().to_owned(),
        data,
    })
}

/// JPEG has no alpha; dropping it would turn a transparent render background black, so
/// transparent pixels are blended onto white instead.
fn flatten_onto_white(image: &DynamicImage) -> RgbImage {
    if !image.has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let alpha = u16::from(a);
        let blend = |c: u8| {
            let mixed = (u16::from(c) * alpha + 255 * (255 - alpha) + 127) / 255;
            u8::try_from(mixed).unwrap_or(u8::MAX)
        };
        image::Rgb([blend(r), blend(g), blend(b)])
    })
}

#[cfg(test)]
mod tests {
    use image::{GenericImageView, Rgba, RgbaImage};

    use super::*;

    fn png(width: u32, height: u32) -> ImageData {
        let image = RgbaImage::from_pixel(width, height, Rgba([10, 200, 30, 255]));
        let mut data = Vec::new();
        DynamicImage::ImageRgba8(image)
            .write_with_encoder(PngEncoder::new(&mut data))
            .unwrap();
        ImageData::png(data)
    }

    fn decode(wire: &WireImage) -> DynamicImage {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&wire.base64)
            .unwrap();
        image::load_from_memory(&bytes).unwrap()
    }

    #[test]
    fn large_images_shrink_to_the_max_side_keeping_the_aspect_ratio() {
        let original = png(1280, 960);
        let before = original.clone();
        let wire = for_wire(&original, &ImageLimits::default()).unwrap();
        assert_eq!(wire.media_type, "image/png");
        assert_eq!(decode(&wire).dimensions(), (1024, 768));
        assert_eq!(original, before, "the caller's image is untouched");
        let tall = for_wire(
            &png(300, 900),
            &ImageLimits {
                max_side: 90,
                ..ImageLimits::default()
            },
        )
        .unwrap();
        assert_eq!(decode(&tall).dimensions(), (30, 90));
    }

    #[test]
    fn small_images_in_the_target_format_go_as_they_are() {
        let original = png(64, 32);
        let wire = for_wire(&original, &ImageLimits::default()).unwrap();
        assert_eq!(
            wire.base64,
            base64::engine::general_purpose::STANDARD.encode(&original.data)
        );
    }

    #[test]
    fn jpeg_output_flattens_transparency_onto_white() {
        let clear = RgbaImage::from_pixel(40, 20, Rgba([0, 0, 0, 0]));
        let mut data = Vec::new();
        DynamicImage::ImageRgba8(clear)
            .write_with_encoder(PngEncoder::new(&mut data))
            .unwrap();
        let limits = ImageLimits {
            format: ImageEncoding::Jpeg,
            ..ImageLimits::default()
        };
        let wire = for_wire(&ImageData::png(data), &limits).unwrap();
        assert_eq!(wire.media_type, "image/jpeg");
        assert!(wire.data_url().starts_with("data:image/jpeg;base64,/9j/"));
        let pixel = decode(&wire).to_rgb8().get_pixel(5, 5).0;
        assert!(pixel.iter().all(|&c| c > 240), "{pixel:?}");
    }

    #[test]
    fn what_is_not_an_image_is_refused_with_its_type() {
        let err = for_wire(
            &ImageData {
                media_type: "image/webp".to_owned(),
                data: b"RIFF....not really".to_vec(),
            },
            &ImageLimits::default(),
        )
        .unwrap_err();
        assert!(
            err.contains("image/webp") && err.contains("neither PNG nor JPEG"),
            "{err}"
        );
    }

    #[test]
    fn limits_are_validated() {
        let tiny = ImageLimits {
            max_side: 2,
            ..ImageLimits::default()
        };
        assert!(tiny.validate().unwrap_err().contains("max_side"));
        let zero_quality = ImageLimits {
            jpeg_quality: 0,
            ..ImageLimits::default()
        };
        assert!(
            zero_quality
                .validate()
                .unwrap_err()
                .contains("jpeg_quality")
        );
        ImageLimits::default().validate().unwrap();
    }
}
