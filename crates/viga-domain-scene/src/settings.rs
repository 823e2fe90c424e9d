//! The scene domain's settings: the base scene, how the verifier renders, where assets come
//! from (and whether they may be generated), which objects the base scene was initialised
//! with. Recorded in `args.json` under `domain`, so `viga resume` builds the same domain.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use viga_protocol::bridge::{RenderEngine, RenderSpec, SceneReset};
use viga_skills::RenderSettings;
use viga_skills::context::overview_view_size;

/// Cycles samples of the scoring render and the verifier's renders when the run names none:
/// with denoising (the bridge turns it on for every Cycles render), enough for lights and
/// materials to read clearly at a fraction of a second per small view.
pub const VERIFIER_CYCLES_SAMPLES: u32 = 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneSettings {
    /// Base scene every program runs on; an empty factory scene when absent.
    #[serde(default)]
    pub base_blend: Option<PathBuf>,
    /// The size of the verifier's renders (a scoring render takes its target's size), and
    /// the engine and samples of a run without a target that names no `verifier_engine`.
    pub render: RenderSpec,
    /// The engine of the scoring render and the verifier's renders. Unset: Cycles when the
    /// run has a target picture (Workbench shows neither the scene's lights nor its
    /// materials), else `render.engine`. See [`SceneSettings::verifier_render`].
    #[serde(default)]
    pub verifier_engine: Option<RenderEngine>,
    /// Their samples (Cycles, EEVEE). Unset: `render.samples` when the engine is
    /// `render.engine`, else [`VERIFIER_CYCLES_SAMPLES`] for Cycles and the engine's own
    /// default for EEVEE.
    #[serde(default)]
    pub verifier_samples: Option<u32>,
    /// Width and height of each canonical view the verifier is shown (`initialize_viewpoint`:
    /// iso, front, right and top, as one 2x2 montage). Unset: half of `render`'s width and
    /// height ([`overview_view_size`]), so the montage is about one render's size and the
    /// four views take about as long as one render. See [`SceneSettings::overview_size`].
    #[serde(default)]
    pub overview_size: Option<(u32, u32)>,
    /// The longest side of the scoring render, the current scene from a target's view: the
    /// target's own shape, scaled down to fit (photometric loss compares the target resized to
    /// the render, as BlenderGym defines it). Unset: the longer side of
    /// [`SceneSettings::overview_size`], so it costs about one canonical view. See
    /// [`SceneSettings::scoring_size`].
    #[serde(default)]
    pub score_size: Option<u32>,
    /// A folder of assets (`.blend`, `.glb`, `.gltf`, ... with `.txt` descriptions) that
    /// `get_better_assets` searches.
    #[serde(default)]
    pub assets: Option<PathBuf>,
    /// Whether `get_better_assets` also searches Poly Haven's models (downloaded into a
    /// cache folder on first use).
    #[serde(default)]
    pub polyhaven: bool,
    /// The service `get_better_assets` may generate assets with (`--assets-generate`); its
    /// key comes from the environment only.
    #[serde(default)]
    pub assets_generate: Option<AssetGenerator>,
    /// The objects the base scene was initialised with from the target pictures (`--init`:
    /// `base_blend` is then the run's `init/init.blend`). The model is told to edit them rather
    /// than replace them, and a result that has none of them left is flagged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub initialised: Vec<InitialisedObject>,
}

/// A service that generates assets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssetGenerator {
    /// Meshy's text- and image-to-3D, rigging and animation (`MESHY_API_KEY`).
    Meshy,
}

/// An object the base scene was initialised with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitialisedObject {
    /// Its name in the base scene.
    pub name: String,
    /// The reconstruction service's confidence in it, 0 to 1.
    pub confidence: f64,
}

impl Default for SceneSettings {
    fn default() -> Self {
        Self {
            base_blend: None,
            // Workbench at 512x512: about a second per view on a CPU. With a target the
            // verifier renders with Cycles instead (`verifier_render`).
            render: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 512,
                height: 512,
                samples: None,
            },
            verifier_engine: None,
            verifier_samples: None,
            overview_size: None,
            score_size: None,
            assets: None,
            polyhaven: false,
            assets_generate: None,
            initialised: Vec::new(),
        }
    }
}

impl SceneSettings {
    /// The scene every program starts from.
    pub fn base_scene(&self) -> SceneReset {
        match &self.base_blend {
            Some(path) => SceneReset::Blend {
                path: path.to_string_lossy().into_owned(),
            },
            None => SceneReset::Factory,
        }
    }

    /// How the scoring render and the verifier's renders are made: `render`'s size with
    /// `verifier_engine` and `verifier_samples`, or what they default to. With a target
    /// picture (`has_target`) the default is Cycles at [`VERIFIER_CYCLES_SAMPLES`] samples,
    /// denoised: Workbench shades with a studio light and object colours, so a light made
    /// brighter or a material made rougher renders the same there, and the verifier (and
    /// the score) could not tell. EEVEE is used only when asked for: without a GPU it falls
    /// back to software rendering, which takes about a minute per view.
    pub fn verifier_render(&self, has_target: bool) -> RenderSpec {
        let engine = self.verifier_engine.unwrap_or(if has_target {
            RenderEngine::Cycles
        } else {
            self.render.engine
        });
        let samples = self
            .verifier_samples
            .or(self.render.samples.filter(|_| engine == self.render.engine))
            .or((engine == RenderEngine::Cycles).then_some(VERIFIER_CYCLES_SAMPLES));
        RenderSpec {
            engine,
            samples,
            ..self.render
        }
    }

    /// What Blender opens for this run: its base scene, its asset folder and, with Poly
    /// Haven, the download cache (made here when missing: downloads land in it after
    /// Blender has started). A contained worker may read these and nothing else of yours.
    pub fn prepare_blender_reads(&self) -> Result<Vec<PathBuf>, viga_core::CoreError> {
        let mut reads: Vec<PathBuf> = self
            .base_blend
            .iter()
            .chain(&self.assets)
            .cloned()
            .collect();
        if self.polyhaven
            && let Some(cache) = viga_skills::polyhaven::default_cache_dir()
        {
            std::fs::create_dir_all(&cache).map_err(|err| viga_core::CoreError::io(&cache, err))?;
            reads.push(cache);
        }
        Ok(reads)
    }

    /// The width and height of each canonical view: `overview_size`, else half of `render`'s.
    pub fn overview_size(&self) -> (u32, u32) {
        self.overview_size
            .unwrap_or_else(|| overview_view_size(self.render.width, self.render.height))
    }

    /// The size of the scoring render of a target `width` x `height`: its shape, fitted
    /// within `score_size` (or the overview's longer side) on its longer side; never larger
    /// than the target.
    pub fn scoring_size(&self, width: u32, height: u32) -> (u32, u32) {
        let (overview_width, overview_height) = self.overview_size();
        let limit = self
            .score_size
            .unwrap_or(overview_width.max(overview_height));
        fit_within(width, height, limit)
    }

    /// The render settings of the domain's tools: [`Self::verifier_render`], with the
    /// canonical views at [`Self::overview_size`].
    pub fn tool_render(&self, has_target: bool) -> RenderSettings {
        let (width, height) = self.overview_size();
        RenderSettings::new(self.verifier_render(has_target)).with_overview_size(width, height)
    }

    /// What is wrong with the settings, in words a user can act on; `generator_tools` says
    /// whether the run's generator has its tools (assets are found only through them).
    pub fn problems(&self, generator_tools: bool) -> Vec<String> {
        let mut problems = Vec::new();
        if self.render.width == 0
            || self.render.height == 0
            || self.render.width > 8192
            || self.render.height > 8192
        {
            problems.push("render width and height must be between 1 and 8192".to_owned());
        }
        if let Some(side) = self.score_size
            && !(1..=8192).contains(&side)
        {
            problems.push(format!(
                "--score-resolution {side}: the scoring render's longer side must be between 1 and 8192"
            ));
        }
        if let Some((width, height)) = self.overview_size
            && !((1..=8192).contains(&width) && (1..=8192).contains(&height))
        {
            problems.push(format!(
                "--overview-resolution {width}x{height}: the width and height of a canonical view must be between 1 and 8192"
            ));
        }
        if (self.assets.is_some() || self.polyhaven || self.assets_generate.is_some())
            && !generator_tools
        {
            problems.push(
                "assets (--assets, --polyhaven, --assets-generate) are found or made by the generator's get_better_assets tool, which runs without tools (--generator-tools off, or a provider without tool calling) never offer: use --generator-tools on with a provider that calls tools, or drop the assets"
                    .to_owned(),
            );
        }
        if self.verifier_samples == Some(0) {
            problems.push("--verifier-samples must be at least 1".to_owned());
        }
        if let Some(folder) = &self.assets
            && !folder.is_dir()
        {
            problems.push(format!(
                "asset folder {} does not exist; pass a folder of .blend, .glb, .gltf, .fbx or .obj files (--assets)",
                folder.display()
            ));
        }
        if let Some(blend) = &self.base_blend
            && !blend.is_file()
        {
            problems.push(format!("base scene {} does not exist", blend.display()));
        }
        problems
    }
}

/// `width` x `height` in its shape, its longer side at most `limit` (rounded to the nearest
/// pixel, at least 1); never larger than it was.
pub(crate) fn fit_within(width: u32, height: u32, limit: u32) -> (u32, u32) {
    let limit = limit.max(1);
    let longest = width.max(height).max(1);
    if longest <= limit {
        return (width.max(1), height.max(1));
    }
    let scale = |side: u32| {
        ((u64::from(side) * u64::from(limit) + u64::from(longest) / 2) / u64::from(longest))
            .clamp(1, u64::from(limit)) as u32
    };
    (scale(width), scale(height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scoring_render_keeps_the_targets_shape_within_its_size() {
        let mut settings = SceneSettings::default();
        assert_eq!(
            settings.scoring_size(512, 512),
            (256, 256),
            "half the render by default"
        );
        assert_eq!(settings.scoring_size(1920, 1080), (256, 144));
        assert_eq!(
            settings.scoring_size(100, 50),
            (100, 50),
            "never larger than the target"
        );
        settings.score_size = Some(1000);
        assert_eq!(settings.scoring_size(1920, 1080), (1000, 563));
        settings.score_size = Some(0);
        assert!(
            settings
                .problems(true)
                .join(" ")
                .contains("--score-resolution")
        );
    }

    #[test]
    fn the_canonical_views_are_half_the_render_size_unless_told_otherwise() {
        let mut settings = SceneSettings::default();
        settings.render.width = 512;
        settings.render.height = 301;
        assert_eq!(settings.overview_size(), (256, 151), "rounded up");
        let tools = settings.tool_render(true);
        assert_eq!(tools.spec, settings.verifier_render(true));
        assert_eq!(
            (tools.overview_spec().width, tools.overview_spec().height),
            (256, 151)
        );
        assert_eq!(tools.overview_spec().engine, RenderEngine::Cycles);
        settings.overview_size = Some((512, 512));
        assert_eq!(settings.tool_render(true).overview_size, (512, 512));
        assert!(settings.problems(true).is_empty());
        settings.overview_size = Some((0, 512));
        let problems = settings.problems(true).join("\n");
        assert!(
            problems.contains("--overview-resolution 0x512"),
            "{problems}"
        );
        // Run folders written before the setting existed resume with the default.
        let mut recorded = serde_json::to_value(SceneSettings::default()).unwrap();
        recorded.as_object_mut().unwrap().remove("overview_size");
        let read: SceneSettings = serde_json::from_value(recorded).unwrap();
        assert_eq!(read.overview_size(), (256, 256));
    }

    #[test]
    fn with_a_target_the_verifier_renders_with_cycles_unless_told_otherwise() {
        let mut settings = SceneSettings::default();
        assert_eq!(
            settings.verifier_render(false),
            settings.render,
            "no target: the run's render settings"
        );
        let default = settings.verifier_render(true);
        assert_eq!(
            (
                default.engine,
                default.samples,
                default.width,
                default.height
            ),
            (
                RenderEngine::Cycles,
                Some(VERIFIER_CYCLES_SAMPLES),
                512,
                512
            )
        );
        settings.verifier_samples = Some(64);
        assert_eq!(settings.verifier_render(true).samples, Some(64));
        settings.verifier_engine = Some(RenderEngine::Workbench);
        settings.verifier_samples = None;
        assert_eq!(
            (
                settings.verifier_render(true).engine,
                settings.verifier_render(true).samples
            ),
            (RenderEngine::Workbench, None)
        );
        // The run's own samples go with the run's own engine only.
        settings.render.samples = Some(8);
        settings.verifier_engine = Some(RenderEngine::Eevee);
        assert_eq!(settings.verifier_render(true).samples, None);
        settings.verifier_engine = None;
        settings.render.engine = RenderEngine::Cycles;
        assert_eq!(settings.verifier_render(true).samples, Some(8));
        settings.verifier_samples = Some(0);
        settings.assets = Some(PathBuf::from("/nonexistent-assets"));
        let problems = settings.problems(true).join("\n");
        for flag in ["--verifier-samples", "--assets"] {
            assert!(problems.contains(flag), "{flag}: {problems}");
        }
        settings.assets = None;
        settings.polyhaven = true;
        assert!(
            settings
                .problems(false)
                .join("\n")
                .contains("--generator-tools on")
        );
        settings.polyhaven = false;
        settings.assets_generate = Some(AssetGenerator::Meshy);
        assert!(
            settings
                .problems(false)
                .join("\n")
                .contains("--assets-generate")
        );
    }
}
