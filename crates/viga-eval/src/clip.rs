//! N-CLIP: `1 - cos(CLIP(a), CLIP(b))` with the projected image features of CLIP ViT-B/32
//! (`openai/clip-vit-base-patch32`), as BlenderGym defines it.
//!
//! The weights cannot be fetched here (no model hub, no package ships them), so they come from
//! a local safetensors file in the Hugging Face checkpoint's layout; without one the runner
//! reports N-CLIP as unavailable. The network is candle's pure-Rust CLIP vision transformer,
//! on the CPU unless viga-eval is built with its `cuda` feature and a GPU is present.
//!
//! Preprocessing is Hugging Face's `CLIPImageProcessor`: shortest side to 224 (PIL's bicubic,
//! reproduced bit for bit; the long side truncated as `int(224 * long / short)`), a 224x224
//! centre crop whose offset is rounded down, RGB / 255, then the CLIP mean and std per channel.
//! Both it and the network are checked against transformers on PyTorch with identical weights
//! (fixtures/clip-reference; docs/eval.md, N-CLIP).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::VarBuilder;
pub use candle_transformers::models::clip::vision_model::ClipVisionConfig;
use candle_transformers::models::clip::vision_model::ClipVisionTransformer;
use image::imageops;
use image::{Rgb, RgbImage};

/// The side of the square CLIP input.
pub const SIDE: u32 = 224;
/// CLIP's per-channel normalisation (RGB).
pub const MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
// CLIP's published constants as written there; f32 rounds the last digit.
#[allow(clippy::excessive_precision)]
pub const STD: [f32; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

#[derive(Debug, thiserror::Error)]
pub enum ClipError {
    #[error("cannot read the CLIP weights {}: {message}; pass the safetensors file of openai/clip-vit-base-patch32 (docs/eval.md, N-CLIP, says how to get it)", path.display())]
    Read { path: PathBuf, message: String },
    #[error("the CLIP weights {} are not a readable safetensors file ({message}); convert the checkpoint to safetensors as docs/eval.md shows", path.display())]
    Format { path: PathBuf, message: String },
    #[error("the CLIP weights {} lack {} of the {expected} vision tensors of the Hugging Face openai/clip-vit-base-patch32 layout, e.g. {}; expected names like vision_model.embeddings.patch_embedding.weight and visual_projection.weight", path.display(), missing.len(), missing.iter().take(3).cloned().collect::<Vec<_>>().join(", "))]
    MissingTensors {
        path: PathBuf,
        missing: Vec<String>,
        expected: usize,
    },
    #[error("the CLIP weights {} hold {name} with shape {found:?}, but the model needs {expected:?}; is this another CLIP variant? (ViT-B/32 has width 768, 12 layers, 32-pixel patches and a 512-d projection)", path.display())]
    WrongShape {
        path: PathBuf,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("CLIP model configuration: {0}")]
    Config(String),
    #[error(
        "cannot embed a {width}x{height} image: it is empty, or too elongated to scale its short side to 224 pixels"
    )]
    ImageShape { width: u32, height: u32 },
    #[error("CLIP forward pass failed: {0}")]
    Model(#[from] candle_core::Error),
}

/// The image scaled so that its shortest side is [`SIDE`], with PIL's BICUBIC resampling
/// reproduced exactly (see `resize_bicubic`).
pub fn resize_shortest_side(image: &RgbImage) -> Result<RgbImage, ClipError> {
    let (width, height) = image.dimensions();
    let refused = ClipError::ImageShape { width, height };
    if width == 0 || height == 0 {
        return Err(refused);
    }
    // Integer arithmetic is Python's `int(224 * long / short)` without float rounding; a
    // 1-pixel-high, very wide image would overflow u32.
    let scale =
        |long: u32, short: u32| u32::try_from(u64::from(SIDE) * u64::from(long) / u64::from(short));
    let (new_width, new_height) = if width <= height {
        (Ok(SIDE), scale(height, width))
    } else {
        (scale(width, height), Ok(SIDE))
    };
    let (Ok(new_width), Ok(new_height)) = (new_width, new_height) else {
        return Err(refused);
    };
    Ok(resize_bicubic(image, new_width, new_height))
}

/// Fraction bits of the fixed-point weights of PIL's 8-bit resampling.
const PRECISION_BITS: u32 = 22;

/// PIL's bicubic kernel, the `a = -0.5` cubic (Catmull-Rom), support 2.
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// For each of `output` samples along an axis of `input` samples: the first input sample it
/// reads and the fixed-point weights of it and the following ones, as PIL computes them (the
/// kernel widened by the scale when downscaling, clipped at the edges and renormalised).
fn bicubic_taps(input: u32, output: u32) -> Vec<(u32, Vec<i64>)> {
    let scale = f64::from(input) / f64::from(output);
    let filter_scale = scale.max(1.0);
    let support = 2.0 * filter_scale;
    let step = 1.0 / filter_scale;
    let one = f64::from(1u32 << PRECISION_BITS);
    (0..output)
        .map(|index| {
            let centre = (f64::from(index) + 0.5) * scale;
            // `as` truncates toward zero like C's `(int)`; the bounds fit (input is a u32).
            let first = ((centre - support + 0.5) as i64).max(0);
            let end = ((centre + support + 0.5) as i64).min(i64::from(input));
            let weights: Vec<f64> = (first..end)
                .map(|at| bicubic((at as f64 - centre + 0.5) * step))
                .collect();
            let total: f64 = weights.iter().sum();
            let fixed = weights
                .into_iter()
                .map(|weight| {
                    let weight = if total == 0.0 { weight } else { weight / total };
                    // Rounded half away from zero, then truncated, as PIL does.
                    (weight * one + 0.5f64.copysign(weight)) as i64
                })
                .collect();
            (u32::try_from(first).unwrap_or(0), fixed)
        })
        .collect()
}

/// One pass of PIL's 8-bit resampling along rows (`horizontal`) or columns: fixed-point sums,
/// rounded and clamped to 0..=255.
fn resample_axis(image: &RgbImage, size: u32, horizontal: bool) -> RgbImage {
    let (width, height) = image.dimensions();
    let taps = bicubic_taps(if horizontal { width } else { height }, size);
    let (new_width, new_height) = if horizontal {
        (size, height)
    } else {
        (width, size)
    };
    RgbImage::from_fn(new_width, new_height, |x, y| {
        let (first, weights) = &taps[if horizontal { x } else { y } as usize];
        let mut sums = [1i64 << (PRECISION_BITS - 1); 3];
        for (offset, weight) in (0u32..).zip(weights) {
            let source = if horizontal {
                image.get_pixel(first + offset, y)
            } else {
                image.get_pixel(x, first + offset)
            };
            for (sum, value) in sums.iter_mut().zip(source.0) {
                *sum += i64::from(value) * weight;
            }
        }
        Rgb(sums.map(|sum| (sum >> PRECISION_BITS).clamp(0, 255) as u8))
    })
}

/// `image` resized to `width` x `height` exactly as PIL's `Image.resize(..., BICUBIC)` does it
/// for 8-bit RGB (what Hugging Face's `CLIPImageProcessor` calls): the horizontal pass first,
/// into an 8-bit image (rounded and clamped), then the vertical pass; an axis whose size does
/// not change is not resampled. image's own `resize` (vertical first, kept in floating point
/// between the passes) differs by up to about 20 levels where the cubic overshoots.
fn resize_bicubic(image: &RgbImage, width: u32, height: u32) -> RgbImage {
    let rows = (width != image.width()).then(|| resample_axis(image, width, true));
    let source = rows.as_ref().unwrap_or(image);
    if height == source.height() {
        source.clone()
    } else {
        resample_axis(source, height, false)
    }
}

/// The centred [`SIDE`]x[`SIDE`] crop; the offset rounds down like Hugging Face's
/// `center_crop`. The image must be at least [`SIDE`] on both sides.
pub fn center_crop(image: &RgbImage) -> RgbImage {
    let left = image.width().saturating_sub(SIDE) / 2;
    let top = image.height().saturating_sub(SIDE) / 2;
    imageops::crop_imm(image, left, top, SIDE, SIDE).to_image()
}

/// The CLIP input of an image: `[3, 224, 224]` in channel, row, column order (index
/// `c * 224 * 224 + y * 224 + x`), each value `(v / 255 - MEAN[c]) / STD[c]`.
pub fn preprocess(image: &RgbImage) -> Result<Vec<f32>, ClipError> {
    let cropped = center_crop(&resize_shortest_side(image)?);
    let plane = (SIDE * SIDE) as usize;
    let mut out = vec![0.0f32; 3 * plane];
    for (x, y, pixel) in cropped.enumerate_pixels() {
        let at = (y * SIDE + x) as usize;
        for channel in 0..3 {
            let value = f32::from(pixel.0[channel]) / 255.0;
            out[channel * plane + at] = (value - MEAN[channel]) / STD[channel];
        }
    }
    Ok(out)
}

/// Every tensor the vision side of CLIP reads for `config`, with its shape, named as in the
/// Hugging Face checkpoint. Checked before building the model because candle silently
/// draws a random class embedding when that tensor is absent.
pub fn expected_tensors(config: &ClipVisionConfig) -> Vec<(String, Vec<usize>)> {
    let width = config.embed_dim;
    let inner = config.intermediate_size;
    let positions = (config.image_size / config.patch_size).pow(2) + 1;
    let mut out = vec![
        ("embeddings.class_embedding".to_owned(), vec![width]),
        (
            "embeddings.patch_embedding.weight".to_owned(),
            vec![
                width,
                config.num_channels,
                config.patch_size,
                config.patch_size,
            ],
        ),
        (
            "embeddings.position_embedding.weight".to_owned(),
            vec![positions, width],
        ),
    ];
    let norm = |out: &mut Vec<(String, Vec<usize>)>, name: &str| {
        out.push((format!("{name}.weight"), vec![width]));
        out.push((format!("{name}.bias"), vec![width]));
    };
    // Sic: the checkpoint spells it "pre_layrnorm".
    norm(&mut out, "pre_layrnorm");
    for layer in 0..config.num_hidden_layers {
        let prefix = format!("encoder.layers.{layer}");
        for projection in ["k_proj", "v_proj", "q_proj", "out_proj"] {
            out.push((
                format!("{prefix}.self_attn.{projection}.weight"),
                vec![width, width],
            ));
            out.push((format!("{prefix}.self_attn.{projection}.bias"), vec![width]));
        }
        norm(&mut out, &format!("{prefix}.layer_norm1"));
        out.push((format!("{prefix}.mlp.fc1.weight"), vec![inner, width]));
        out.push((format!("{prefix}.mlp.fc1.bias"), vec![inner]));
        out.push((format!("{prefix}.mlp.fc2.weight"), vec![width, inner]));
        out.push((format!("{prefix}.mlp.fc2.bias"), vec![width]));
        norm(&mut out, &format!("{prefix}.layer_norm2"));
    }
    norm(&mut out, "post_layernorm");
    let mut out: Vec<(String, Vec<usize>)> = out
        .into_iter()
        .map(|(name, shape)| (format!("vision_model.{name}"), shape))
        .collect();
    out.push((
        "visual_projection.weight".to_owned(),
        vec![config.projection_dim, width],
    ));
    out
}

/// Refuses what the preprocessing or candle's model cannot run (it would panic or fail late).
fn check_config(config: &ClipVisionConfig) -> Result<(), ClipError> {
    if config.image_size != SIDE as usize {
        return Err(ClipError::Config(format!(
            "image_size is {}, but the preprocessing makes {SIDE}x{SIDE} inputs",
            config.image_size
        )));
    }
    if config.patch_size == 0
        || config.num_attention_heads == 0
        || !config.embed_dim.is_multiple_of(config.num_attention_heads)
        || config.num_channels != 3
    {
        return Err(ClipError::Config(format!(
            "needs 3 channels, a patch size > 0 and a width divisible by the heads; got {config:?}"
        )));
    }
    Ok(())
}

/// CLIP's image tower and projection, ready to embed images.
#[derive(Debug, Clone)]
pub struct ClipBackend {
    vision: ClipVisionTransformer,
    projection: candle_nn::Linear,
    device: Device,
}

impl ClipBackend {
    /// CLIP ViT-B/32 from a safetensors file in the layout of the Hugging Face
    /// `openai/clip-vit-base-patch32` checkpoint (the full model or only its vision tensors).
    pub fn load(path: &Path) -> Result<Self, ClipError> {
        Self::load_with_config(path, &ClipVisionConfig::vit_base_patch32())
    }

    /// As [`ClipBackend::load`], for another vision configuration of the same architecture
    /// (the tests use a tiny one).
    pub fn load_with_config(path: &Path, config: &ClipVisionConfig) -> Result<Self, ClipError> {
        check_config(config)?;
        let device = Device::cuda_if_available(0)?;
        let bytes = std::fs::read(path).map_err(|err| ClipError::Read {
            path: path.to_path_buf(),
            message: err.to_string(),
        })?;
        let mut tensors =
            candle_core::safetensors::load_buffer(&bytes, &device).map_err(|err| {
                ClipError::Format {
                    path: path.to_path_buf(),
                    message: err.to_string(),
                }
            })?;
        let expected = expected_tensors(config);
        let count = expected.len();
        let mut vision: HashMap<String, Tensor> = HashMap::new();
        let mut missing = Vec::new();
        let mut wrong_shape = None;
        for (name, shape) in expected {
            match tensors.remove(&name) {
                None => missing.push(name),
                Some(tensor) if tensor.dims() != shape.as_slice() => {
                    wrong_shape.get_or_insert(ClipError::WrongShape {
                        path: path.to_path_buf(),
                        name,
                        expected: shape,
                        found: tensor.dims().to_vec(),
                    });
                }
                Some(tensor) => {
                    vision.insert(name, tensor);
                }
            }
        }
        // Missing names first: a file of another layout fails on names, not on shapes.
        if !missing.is_empty() {
            return Err(ClipError::MissingTensors {
                path: path.to_path_buf(),
                missing,
                expected: count,
            });
        }
        if let Some(err) = wrong_shape {
            return Err(err);
        }
        // The text tower's tensors (if any) are dropped here rather than kept in memory.
        drop(tensors);
        Self::new(
            VarBuilder::from_tensors(vision, DType::F32, &device),
            config,
        )
    }

    /// The model from any variable source in the checkpoint's layout (e.g. a `VarMap`).
    pub fn new(vars: VarBuilder, config: &ClipVisionConfig) -> Result<Self, ClipError> {
        check_config(config)?;
        let vision = ClipVisionTransformer::new(vars.pp("vision_model"), config)?;
        let projection = candle_nn::linear_no_bias(
            config.embed_dim,
            config.projection_dim,
            vars.pp("visual_projection"),
        )?;
        Ok(Self {
            vision,
            projection,
            device: vars.device().clone(),
        })
    }

    /// The unit-length projected image embedding (512 values for ViT-B/32).
    pub fn embed(&self, image: &RgbImage) -> Result<Vec<f32>, ClipError> {
        self.embed_pixels(preprocess(image)?)
    }

    /// [`ClipBackend::embed`] of an input already preprocessed: `pixels` as [`preprocess`]
    /// returns them (`3 * 224 * 224` values, channel-major). Lets the network be checked
    /// apart from the preprocessing.
    pub fn embed_pixels(&self, pixels: Vec<f32>) -> Result<Vec<f32>, ClipError> {
        let features = self.projected(pixels)?;
        let features = candle_transformers::models::clip::div_l2_norm(&features)?;
        Ok(features.to_vec1::<f32>()?)
    }

    /// The projected features of a preprocessed input before normalisation: Hugging Face's
    /// `image_embeds` of `CLIPVisionModelWithProjection` (`get_image_features` of
    /// `CLIPModel`).
    pub fn image_features(&self, pixels: Vec<f32>) -> Result<Vec<f32>, ClipError> {
        Ok(self.projected(pixels)?.to_vec1::<f32>()?)
    }

    fn projected(&self, pixels: Vec<f32>) -> Result<Tensor, ClipError> {
        let input = Tensor::from_vec(pixels, (1, 3, SIDE as usize, SIDE as usize), &self.device)?;
        Ok(self
            .projection
            .forward(&self.vision.forward(&input)?)?
            .squeeze(0)?)
    }

    /// N-CLIP of two images: `1 - cos` of their embeddings, in [0, 2]; lower is closer.
    pub fn n_clip(&self, a: &RgbImage, b: &RgbImage) -> Result<f64, ClipError> {
        Ok(n_clip_of_embeddings(&self.embed(a)?, &self.embed(b)?))
    }
}

/// `1 - cos(a, b)`. Normalised again here, so it holds for any non-zero vectors.
pub fn n_clip_of_embeddings(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    1.0 - dot / (norm(a) * norm(b))
}
