//! N-CLIP in a build without the `clip` feature: the backend type has no values, so no path
//! can score with it, and asking for it (`--clip-weights`) is refused with the way to get it.

use std::path::Path;

use image::RgbImage;

use crate::EvalError;

#[derive(Debug)]
pub enum ClipBackend {}

impl ClipBackend {
    pub fn load(_path: &Path) -> Result<Self, EvalError> {
        Err(EvalError::ClipNotBuilt)
    }

    pub fn n_clip(&self, _a: &RgbImage, _b: &RgbImage) -> Result<f64, EvalError> {
        match *self {}
    }
}
