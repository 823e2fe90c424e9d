//! Presets: a run's applied steps saved as versioned JSON with metadata, and a folder that
//! stores them. A preset is applied without a model by a preset run
//! ([`crate::GnRun::from_preset`]), which keeps a run folder like a model run.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use viga_io::files::unix_ms;
use viga_protocol::gn::GnStep;
use viga_protocol::{PROTOCOL_VERSION, ProtocolType, Violation, parse_json};

use crate::GnError;
use crate::recorder::write_whole;

/// A saved run. Loaded through [`viga_protocol::parse_json`], so a preset from another
/// viga version or a hand-edited one is checked before it can run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// Must equal [`PROTOCOL_VERSION`].
    pub version: u32,
    pub metadata: PresetMetadata,
    /// The steps to apply, in order.
    pub steps: Vec<GnStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PresetMetadata {
    /// Also the file name in a [`PresetStore`]: letters, digits, `-` and `_`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The request that produced the steps.
    #[serde(default)]
    pub request: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    pub created_unix_ms: u64,
    /// The viga that saved it.
    pub viga_version: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

impl ProtocolType for Preset {
    const NAME: &'static str = "Preset";
    const VERSION_FIELD: Option<&'static str> = Some("version");

    fn check(&self) -> Vec<Violation> {
        let mut violations = Vec::new();
        if !valid_name(&self.metadata.name) {
            violations.push(Violation::new(
                "/metadata/name",
                "name",
                "a preset name is 1 to 64 letters, digits, '-' or '_'",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (position, step) in self.steps.iter().enumerate() {
            if !seen.insert(step.id()) {
                violations.push(Violation::new(
                    format!("/steps/{position}/id"),
                    "unique",
                    format!("step id {:?} is used by an earlier step", step.id()),
                ));
            }
        }
        violations
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Preset {
    /// A preset of the given steps, stamped now.
    pub fn new(name: impl Into<String>, request: impl Into<String>, steps: Vec<GnStep>) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            metadata: PresetMetadata {
                name: name.into(),
                description: String::new(),
                request: request.into(),
                object: None,
                created_unix_ms: unix_ms(),
                viga_version: env!("CARGO_PKG_VERSION").to_owned(),
                tags: Vec::new(),
            },
            steps,
        }
    }

    pub fn to_json(&self) -> Result<String, GnError> {
        serde_json::to_string_pretty(self).map_err(|err| GnError::Decode {
            function: "preset".to_owned(),
            message: err.to_string(),
        })
    }

    /// Parses and validates untrusted preset JSON.
    pub fn from_json(text: &str) -> Result<Self, GnError> {
        Ok(parse_json::<Preset>(text)?)
    }

    /// Writes the preset to any path (export).
    pub fn export(&self, path: &Path) -> Result<(), GnError> {
        write_whole(path, self.to_json()?.as_bytes())
    }

    /// Reads and validates a preset file (import).
    pub fn read(path: &Path) -> Result<Self, GnError> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| GnError::file(path, format!("cannot read it: {err}")))?;
        Self::from_json(&text).map_err(|err| GnError::preset(path, err))
    }
}

/// A folder of presets, one `<name>.json` each.
#[derive(Debug, Clone)]
pub struct PresetStore {
    dir: PathBuf,
}

impl PresetStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, name: &str) -> Result<PathBuf, GnError> {
        if !valid_name(name) {
            return Err(GnError::preset(
                &self.dir,
                format!("{name:?} is not a preset name; use 1 to 64 letters, digits, '-' or '_'"),
            ));
        }
        Ok(self.dir.join(format!("{name}.json")))
    }

    /// Saves (replacing a preset of the same name); returns the file.
    pub fn save(&self, preset: &Preset) -> Result<PathBuf, GnError> {
        let path = self.path_of(&preset.metadata.name)?;
        std::fs::create_dir_all(&self.dir)
            .map_err(|err| GnError::file(&self.dir, format!("cannot create it: {err}")))?;
        preset.export(&path)?;
        Ok(path)
    }

    /// The stored preset of this name; one that is not stored is an error listing those that
    /// are.
    pub fn load(&self, name: &str) -> Result<Preset, GnError> {
        let path = self.path_of(name)?;
        if !path.is_file() {
            return Err(GnError::PresetNotFound {
                name: name.to_owned(),
                dir: self.dir.clone(),
                stored: self.stored_names(),
            });
        }
        Preset::read(&path)
    }

    /// The names of the stored files, sorted, without reading them.
    fn stored_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let path = entry.path();
                let is_json = path.extension().is_some_and(|ext| ext == "json");
                let stem = path.file_stem()?.to_str()?.to_owned();
                is_json.then_some(stem)
            })
            .collect();
        names.sort();
        names
    }

    /// The presets in the store, by name. Files that do not parse are reported, not skipped.
    pub fn list(&self) -> Result<Vec<PresetMetadata>, GnError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(GnError::file(&self.dir, format!("cannot list it: {err}"))),
        };
        let mut presets = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "json") {
                presets.push(Preset::read(&path)?.metadata);
            }
        }
        presets.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(presets)
    }

    /// Copies a validated preset file into the store; refuses to replace one of the same
    /// name so an import never silently overwrites the user's work.
    pub fn import(&self, path: &Path) -> Result<Preset, GnError> {
        let preset = Preset::read(path)?;
        let target = self.path_of(&preset.metadata.name)?;
        if target.exists() {
            return Err(GnError::preset(
                &target,
                "a preset of this name is already stored; delete or rename one of them first",
            ));
        }
        self.save(&preset)?;
        Ok(preset)
    }

    pub fn export(&self, name: &str, path: &Path) -> Result<(), GnError> {
        self.load(name)?.export(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use viga_protocol::gn::{GnOp, GnOpsPayload};

    fn sample() -> Preset {
        let step = GnStep::GnOps {
            id: "target".into(),
            payload: GnOpsPayload {
                ops: vec![GnOp::EnsureTarget {
                    object: "Plane".into(),
                    modifier: "GN".into(),
                    group: None,
                }],
            },
        };
        let mut preset = Preset::new("scatter-cubes", "scatter cubes", vec![step]);
        preset.metadata.tags = vec!["scatter".into()];
        preset
    }

    #[test]
    fn a_run_takes_what_it_is_not_given_from_its_preset() {
        use crate::GnRunConfig;
        let mut preset = sample();
        preset.metadata.object = Some("Plane".into());
        let config = GnRunConfig::with_preset_defaults(None, None, Some(&preset));
        assert_eq!(config.request, preset.metadata.request);
        assert_eq!(config.object.as_deref(), Some("Plane"));
        let config = GnRunConfig::with_preset_defaults(
            Some("denser".into()),
            Some("Ground".into()),
            Some(&preset),
        );
        assert_eq!(
            (config.request.as_str(), config.object.as_deref()),
            ("denser", Some("Ground"))
        );
        preset.metadata.request.clear();
        let config = GnRunConfig::with_preset_defaults(None, None, Some(&preset));
        assert_eq!(config.request, "preset scatter-cubes");
        let config = GnRunConfig::with_preset_defaults(None, None, None);
        assert_eq!((config.request.as_str(), config.object), ("", None));
    }

    #[test]
    fn presets_round_trip_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path().join("presets"));
        let preset = sample();
        let path = store.save(&preset).unwrap();
        assert_eq!(path.file_name().unwrap(), "scatter-cubes.json");
        assert_eq!(store.load("scatter-cubes").unwrap(), preset);
        assert_eq!(store.list().unwrap(), vec![preset.metadata.clone()]);

        let exported = dir.path().join("shared.json");
        store.export("scatter-cubes", &exported).unwrap();
        let other = PresetStore::new(dir.path().join("other"));
        assert_eq!(other.import(&exported).unwrap(), preset);
        assert_eq!(other.load("scatter-cubes").unwrap(), preset);
        let again = other.import(&exported).unwrap_err().to_string();
        assert!(again.contains("already stored"), "{again}");
    }

    #[test]
    fn bad_presets_are_refused_with_the_path() {
        let mut preset = sample();
        preset.metadata.name = "../escape".into();
        let err = Preset::from_json(&preset.to_json().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("/metadata/name"), "{err}");
        let future = sample().to_json().unwrap().replacen(
            &format!("\"version\": {PROTOCOL_VERSION}"),
            "\"version\": 99",
            1,
        );
        let err = Preset::from_json(&future).unwrap_err().to_string();
        assert!(err.contains("unsupported protocol version 99"), "{err}");
        let store = PresetStore::new("presets");
        assert!(store.load("../etc/passwd").is_err());
    }

    #[test]
    fn a_missing_preset_names_the_stored_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let err = store.load("grid").unwrap_err().to_string();
        assert!(err.contains("no preset named \"grid\""), "{err}");
        assert!(err.ends_with("stored presets: none"), "{err}");
        store.save(&sample()).unwrap();
        let err = store.load("grid").unwrap_err().to_string();
        assert!(err.ends_with("stored presets: scatter-cubes"), "{err}");
    }
}
