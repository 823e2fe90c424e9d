//! N-CLIP: the CLIP preprocessing on fixed synthetic images, and the embedding code on a tiny
//! randomly initialised CLIP vision transformer of the real architecture (no real weights, no
//! network), through the real safetensors loader; and both against Hugging Face transformers
//! on identical weights (fixtures/clip-reference).

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Init, VarBuilder, VarMap};
use candle_transformers::models::clip::text_model::Activation;
use image::{Rgb, RgbImage};
use viga_eval::clip::{
    ClipBackend, ClipError, ClipVisionConfig, MEAN, SIDE, STD, center_crop, expected_tensors,
    n_clip_of_embeddings, preprocess, resize_shortest_side,
};

const PLANE: usize = (SIDE * SIDE) as usize;

fn at(input: &[f32], channel: usize, y: usize, x: usize) -> f32 {
    input[channel * PLANE + y * SIDE as usize + x]
}

fn normalised(value: u8, channel: usize) -> f32 {
    (f32::from(value) / 255.0 - MEAN[channel]) / STD[channel]
}

#[test]
fn the_shortest_side_becomes_224_and_the_long_side_is_truncated() {
    let wide = resize_shortest_side(&RgbImage::new(300, 200)).unwrap();
    assert_eq!(wide.dimensions(), (336, 224));
    let tall = resize_shortest_side(&RgbImage::new(200, 301)).unwrap();
    // int(224 * 301 / 200) = int(337.12) = 337.
    assert_eq!(tall.dimensions(), (224, 337));
    let small = resize_shortest_side(&RgbImage::new(64, 64)).unwrap();
    assert_eq!(small.dimensions(), (224, 224));
    for (width, height) in [(0, 10), (10, 0)] {
        let err = resize_shortest_side(&RgbImage::new(width, height)).unwrap_err();
        assert!(matches!(err, ClipError::ImageShape { .. }), "{err}");
    }
}

#[test]
fn bicubic_resizing_keeps_a_constant_image_constant() {
    for (width, height) in [(300, 200), (64, 64), (500, 900)] {
        let constant = RgbImage::from_pixel(width, height, Rgb([201, 7, 128]));
        let resized = resize_shortest_side(&constant).unwrap();
        assert!(
            resized.pixels().all(|pixel| *pixel == Rgb([201, 7, 128])),
            "{width}x{height}"
        );
    }
}

#[test]
fn the_crop_is_centred_with_the_offset_rounded_down() {
    // Red holds x, green holds y, so a cropped pixel tells where it came from.
    let source = |width: u32, height: u32| {
        RgbImage::from_fn(width, height, |x, y| Rgb([x as u8, y as u8, 0]))
    };
    let cropped = center_crop(&source(300, 224));
    assert_eq!(cropped.dimensions(), (224, 224));
    // (300 - 224) / 2 = 38.
    assert_eq!(cropped.get_pixel(0, 0).0, [38, 0, 0]);
    assert_eq!(cropped.get_pixel(223, 223).0, [(38 + 223) as u8, 223, 0]);
    // (255 - 224) / 2 = 15.5 -> 15.
    let cropped = center_crop(&source(224, 255));
    assert_eq!(cropped.get_pixel(0, 0).0, [0, 15, 0]);
}

#[test]
fn a_300x200_image_is_centre_cropped_after_resizing() {
    // Black bands 50 pixels wide at both ends become 56 wide at scale 224/200 = 1.12: exactly
    // what the centred crop of 336 -> 224 removes, so the input is white in the middle and
    // mirror-symmetric. A crop taken from the left would keep a black band.
    let banded = RgbImage::from_fn(300, 200, |x, _| {
        if (50..250).contains(&x) {
            Rgb([255; 3])
        } else {
            Rgb([0; 3])
        }
    });
    let input = preprocess(&banded).unwrap();
    assert_eq!(input.len(), 3 * PLANE);
    for channel in 0..3 {
        let white = normalised(255, channel);
        for y in [0, 100, 223] {
            assert!((at(&input, channel, y, 112) - white).abs() < 1e-5);
            assert!(
                (at(&input, channel, y, 0) - at(&input, channel, y, 223)).abs() < 1e-5,
                "channel {channel} row {y}: {} vs {}",
                at(&input, channel, y, 0),
                at(&input, channel, y, 223)
            );
        }
        // The band edge blurs into the crop's first columns only.
        assert!((at(&input, channel, 50, 10) - white).abs() < 1e-5);
    }
}

#[test]
fn normalisation_uses_the_clip_mean_and_std_per_channel() {
    let constant = RgbImage::from_pixel(300, 200, Rgb([255, 0, 128]));
    let input = preprocess(&constant).unwrap();
    // Written out, so a swapped channel or a wrong constant shows.
    let expected: [f64; 3] = [
        (1.0 - 0.481_454_66) / 0.268_629_54,
        (0.0 - 0.457_827_5) / 0.261_302_58,
        (128.0 / 255.0 - 0.408_210_73) / 0.275_777_11,
    ];
    for (channel, want) in expected.into_iter().enumerate() {
        for (y, x) in [(0, 0), (0, 223), (111, 57), (223, 223)] {
            let got = at(&input, channel, y, x);
            assert!(
                (f64::from(got) - want).abs() < 1e-5,
                "channel {channel} ({y},{x}): {got} vs {want}"
            );
        }
    }
    assert!((expected[0] - 1.930_336_3).abs() < 1e-6);
}

/// The architecture of CLIP ViT-B/32 at a tiny width and depth: same 224x224 input and
/// 32-pixel patches, so the same names and the same preprocessing.
fn tiny_config() -> ClipVisionConfig {
    ClipVisionConfig {
        embed_dim: 16,
        activation: Activation::QuickGelu,
        intermediate_size: 32,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        projection_dim: 8,
        num_channels: 3,
        image_size: 224,
        patch_size: 32,
    }
}

/// SplitMix64 values in [-0.5, 0.5): candle cannot seed its CPU generator.
fn seeded(seed: u64, count: usize) -> Vec<f32> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// A tiny model with every variable (the class embedding included) in `VarMap`, seeded.
fn tiny_model(seed: u64) -> (VarMap, ClipBackend) {
    let config = tiny_config();
    let mut varmap = VarMap::new();
    let vars = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    // candle draws a fresh class embedding when the source lacks one; put it in the map so
    // that it is saved with the rest.
    varmap
        .get(
            config.embed_dim,
            "vision_model.embeddings.class_embedding",
            Init::Const(0.0),
            DType::F32,
            &Device::Cpu,
        )
        .unwrap();
    ClipBackend::new(vars.clone(), &config).unwrap();
    let mut names: Vec<(String, Vec<usize>)> = varmap
        .data()
        .lock()
        .unwrap()
        .iter()
        .map(|(name, var)| (name.clone(), var.dims().to_vec()))
        .collect();
    names.sort();
    for (index, (name, shape)) in names.into_iter().enumerate() {
        let count = shape.iter().product();
        let values = Tensor::from_vec(
            seeded(seed ^ index as u64, count),
            shape.as_slice(),
            &Device::Cpu,
        )
        .unwrap();
        varmap.set_one(name, values).unwrap();
    }
    let backend = ClipBackend::new(vars, &config).unwrap();
    (varmap, backend)
}

fn gradient() -> RgbImage {
    RgbImage::from_fn(300, 200, |x, y| Rgb([(x % 256) as u8, y as u8, 90]))
}

fn checkerboard() -> RgbImage {
    RgbImage::from_fn(200, 200, |x, y| {
        if (x / 25 + y / 25) % 2 == 0 {
            Rgb([250, 240, 10])
        } else {
            Rgb([5, 20, 200])
        }
    })
}

fn assert_close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}

#[test]
fn the_expected_tensor_list_is_what_the_model_reads() {
    let (varmap, _) = tiny_model(1);
    let mut read: Vec<(String, Vec<usize>)> = varmap
        .data()
        .lock()
        .unwrap()
        .iter()
        .map(|(name, var)| (name.clone(), var.dims().to_vec()))
        .collect();
    read.sort();
    let mut expected = expected_tensors(&tiny_config());
    expected.sort();
    assert_eq!(read, expected);
    // ViT-B/32: 16 tensors per layer, 12 layers, 8 others.
    let base = expected_tensors(&ClipVisionConfig::vit_base_patch32());
    assert_eq!(base.len(), 16 * 12 + 8);
    assert!(base.contains(&(
        "vision_model.embeddings.position_embedding.weight".to_owned(),
        vec![50, 768]
    )));
    assert!(base.contains(&("visual_projection.weight".to_owned(), vec![512, 768])));
}

#[test]
fn embeddings_are_unit_length_and_n_clip_separates_images() {
    let (_, model) = tiny_model(7);
    let a = model.embed(&gradient()).unwrap();
    assert_eq!(a.len(), 8);
    let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");

    let same = model.n_clip(&gradient(), &gradient()).unwrap();
    assert!(same.abs() < 1e-6, "identical images: {same}");
    let different = model.n_clip(&gradient(), &checkerboard()).unwrap();
    assert!(
        different > 1e-3 && different <= 2.0,
        "different images: {different}"
    );
    let reversed = model.n_clip(&checkerboard(), &gradient()).unwrap();
    assert!((different - reversed).abs() < 1e-6);
    // Another seed is another model.
    let (_, other) = tiny_model(8);
    let b = other.embed(&gradient()).unwrap();
    assert!(n_clip_of_embeddings(&a, &b) > 1e-3);
}

#[test]
fn n_clip_of_embeddings_is_one_minus_the_cosine() {
    assert!(n_clip_of_embeddings(&[1.0, 0.0], &[2.0, 0.0]).abs() < 1e-12);
    assert!((n_clip_of_embeddings(&[1.0, 0.0], &[0.0, 3.0]) - 1.0).abs() < 1e-12);
    assert!((n_clip_of_embeddings(&[1.0, 1.0], &[-1.0, -1.0]) - 2.0).abs() < 1e-12);
}

fn saved_tiny_model(dir: &Path) -> (ClipBackend, std::path::PathBuf) {
    let (varmap, model) = tiny_model(3);
    let path = dir.join("tiny.safetensors");
    varmap.save(&path).unwrap();
    (model, path)
}

#[test]
fn weights_saved_as_safetensors_load_through_the_real_loader() {
    let dir = tempfile::tempdir().unwrap();
    let (model, path) = saved_tiny_model(dir.path());
    let loaded = ClipBackend::load_with_config(&path, &tiny_config()).unwrap();
    for image in [gradient(), checkerboard()] {
        assert_close(
            &model.embed(&image).unwrap(),
            &loaded.embed(&image).unwrap(),
        );
    }
    // Extra tensors (the text tower of a full checkpoint) are ignored.
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    tensors.insert(
        "text_model.embeddings.token_embedding.weight".to_owned(),
        Tensor::zeros((4, 16), DType::F32, &Device::Cpu).unwrap(),
    );
    let full = dir.path().join("full.safetensors");
    candle_core::safetensors::save(&tensors, &full).unwrap();
    let loaded = ClipBackend::load_with_config(&full, &tiny_config()).unwrap();
    assert_close(
        &model.embed(&gradient()).unwrap(),
        &loaded.embed(&gradient()).unwrap(),
    );
}

#[test]
fn bad_weights_files_give_errors_that_say_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.safetensors");
    let err = ClipBackend::load(&missing).unwrap_err();
    assert!(matches!(err, ClipError::Read { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("nowhere.safetensors") && message.contains("docs/eval.md"),
        "{message}"
    );

    let garbled = dir.path().join("garbled.safetensors");
    std::fs::write(
        &garbled,
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all",
    )
    .unwrap();
    let err = ClipBackend::load(&garbled).unwrap_err();
    assert!(matches!(err, ClipError::Format { .. }), "{err}");
    assert!(err.to_string().contains("not a readable safetensors file"));

    // The tiny model is ViT-B/32's layout with fewer layers: the missing ones are named.
    let (_, tiny) = saved_tiny_model(dir.path());
    let err = ClipBackend::load(&tiny).unwrap_err();
    let ClipError::MissingTensors {
        missing, expected, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!((missing.len(), *expected), (160, 200));
    assert_eq!(
        missing[0],
        "vision_model.encoder.layers.2.self_attn.k_proj.weight"
    );
    assert!(
        err.to_string()
            .contains("openai/clip-vit-base-patch32 layout"),
        "{err}"
    );

    // Same names, another projection width.
    let mut narrower = tiny_config();
    narrower.projection_dim = 4;
    let err = ClipBackend::load_with_config(&tiny, &narrower).unwrap_err();
    let ClipError::WrongShape {
        name,
        expected,
        found,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(name, "visual_projection.weight");
    assert_eq!(
        (expected.as_slice(), found.as_slice()),
        (&[4, 16][..], &[8, 16][..])
    );
    assert!(err.to_string().contains("another CLIP variant"), "{err}");

    // Without the class embedding candle would silently draw a random one: refused.
    let mut tensors = candle_core::safetensors::load(&tiny, &Device::Cpu).unwrap();
    tensors.remove("vision_model.embeddings.class_embedding");
    let partial = dir.path().join("partial.safetensors");
    candle_core::safetensors::save(&tensors, &partial).unwrap();
    let err = ClipBackend::load_with_config(&partial, &tiny_config()).unwrap_err();
    let ClipError::MissingTensors { missing, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(missing, &["vision_model.embeddings.class_embedding"]);
    assert!(err.to_string().contains("lack 1 of the 40"), "{err}");

    let mut other = tiny_config();
    other.image_size = 336;
    let err = ClipBackend::load_with_config(&tiny, &other).unwrap_err();
    assert!(err.to_string().contains("image_size is 336"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_unusable_weights_fails_before_writing_anything() {
    use std::sync::Arc;

    use viga_blender::{WorkerConfig, WorkerPool, locate};
    use viga_eval::{Baseline, EvalConfig, RenderEngine, RenderSpec};
    use viga_testkit::{BLENDER_TEST_LIMIT, within};

    within(BLENDER_TEST_LIMIT, "the test", async {
        let pool = Arc::new(
            WorkerPool::start(1, WorkerConfig::new(locate().unwrap()))
                .await
                .unwrap(),
        );
        let dir = tempfile::tempdir().unwrap();
        let (_, tiny) = saved_tiny_model(dir.path());
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini");
        let render = RenderSpec {
            engine: RenderEngine::Workbench,
            width: 16,
            height: 16,
            samples: None,
        };
        for (weights, says) in [
            (
                dir.path().join("absent.safetensors"),
                "cannot read the CLIP weights",
            ),
            (tiny, "lack 160 of the 200"),
        ] {
            let out = dir.path().join("out");
            let mut config = EvalConfig::new(&data, &out, render);
            config.clip_weights = Some(weights);
            let err = viga_eval::run(&config, pool.clone(), Arc::new(Baseline::Noop), None)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("N-CLIP: ") && err.contains(says), "{err}");
            assert!(!out.exists(), "nothing is written");
        }
    })
    .await;
}

/// fixtures/clip-reference: weights, images and what Hugging Face transformers (PyTorch)
/// computes from them; `make.py` there writes them.
fn reference_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/clip-reference")
}

fn floats(value: &serde_json::Value) -> Vec<f32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect()
}

fn max_abs_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The tiny model with transformers' weights (`CLIPVisionModelWithProjection`, seeded, every
/// parameter perturbed so layer norms, biases and the class embedding count) and transformers'
/// `CLIPImageProcessor` (PIL backend, openai/clip-vit-base-patch32 settings) on four images:
/// upscaled wide, square, odd-sized tall, and downscaled.
///
/// Preprocessing must match exactly: our resize is PIL's integer algorithm, so the 8-bit
/// 224x224 crop equals the reference's pixel for pixel, and `pixel_values` agree to float32
/// rounding (1e-5). Before this test, image's Catmull-Rom resize differed by up to 19 levels on
/// the odd-sized image. The network is compared twice, on the reference's own input (isolating
/// it from the preprocessing) and end to end: float32 sums in another order, so 1e-4 per
/// feature (measured: about 1e-6, features of magnitude ~1) and `1 - cos` of at most 1e-6.
#[test]
fn matches_transformers_on_identical_weights() {
    let dir = reference_dir();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let model =
        ClipBackend::load_with_config(&dir.join("tiny.safetensors"), &tiny_config()).unwrap();
    let images = expected["images"].as_object().unwrap();
    assert_eq!(images.len(), 4);
    let mut embeddings = Vec::new();
    for (name, record) in images {
        let image = image::open(dir.join(format!("{name}.png")))
            .unwrap()
            .to_rgb8();
        let size = |key: &str| {
            let pair = record[key].as_array().unwrap();
            (
                pair[0].as_u64().unwrap() as u32,
                pair[1].as_u64().unwrap() as u32,
            )
        };
        assert_eq!(image.dimensions(), size("size"), "{name}");

        // Preprocessing.
        let resized = resize_shortest_side(&image).unwrap();
        assert_eq!(resized.dimensions(), size("resized"), "{name}");
        let crop = center_crop(&resized);
        let reference_crop = image::open(dir.join(format!("{name}.crop.png")))
            .unwrap()
            .to_rgb8();
        let differing = crop
            .pixels()
            .zip(reference_crop.pixels())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(differing, 0, "{name}: pixels of the crop differ from PIL's");
        let input = preprocess(&image).unwrap();
        for point in record["pixel_values_at"].as_array().unwrap() {
            let index = |key: &str| point[key].as_u64().unwrap() as usize;
            let (channel, y, x) = (index("c"), index("y"), index("x"));
            let (ours, theirs) = (
                at(&input, channel, y, x),
                point["value"].as_f64().unwrap() as f32,
            );
            assert!(
                (ours - theirs).abs() <= 1e-5,
                "{name} ({channel},{y},{x}): {ours} vs {theirs}"
            );
        }
        let sums = record["pixel_values_channel_sums"].as_array().unwrap();
        for (channel, theirs) in sums.iter().enumerate() {
            let ours: f64 = input[channel * PLANE..(channel + 1) * PLANE]
                .iter()
                .map(|v| f64::from(*v))
                .sum();
            let theirs = theirs.as_f64().unwrap();
            assert!(
                (ours - theirs).abs() <= 1e-6 * theirs.abs().max(1.0),
                "{name} channel {channel} sum: {ours} vs {theirs}"
            );
        }

        // The network on the reference's input, then end to end.
        let mut reference_input = vec![0.0; 3 * PLANE];
        for (x, y, pixel) in reference_crop.enumerate_pixels() {
            for channel in 0..3 {
                reference_input[channel * PLANE + (y * SIDE + x) as usize] =
                    normalised(pixel.0[channel], channel);
            }
        }
        let features = floats(&record["image_embeds"]);
        let unit = floats(&record["image_embeds_normalised"]);
        let ours = model.image_features(reference_input.clone()).unwrap();
        let difference = max_abs_difference(&ours, &features);
        assert!(difference <= 1e-4, "{name}: {ours:?} vs {features:?}");
        for ours in [
            model.embed_pixels(reference_input).unwrap(),
            model.embed(&image).unwrap(),
        ] {
            let difference = max_abs_difference(&ours, &unit);
            let n_clip = n_clip_of_embeddings(&ours, &unit);
            assert!(
                difference <= 1e-4 && n_clip <= 1e-6,
                "{name}: {ours:?} vs {unit:?} (1 - cos = {n_clip})"
            );
        }
        embeddings.push(unit);
    }
    // The comparison has teeth: this model tells the images apart.
    for (i, a) in embeddings.iter().enumerate() {
        for b in &embeddings[i + 1..] {
            assert!(n_clip_of_embeddings(a, b) > 0.02);
        }
    }
}
