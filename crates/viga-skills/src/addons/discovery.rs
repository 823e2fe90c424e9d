//! Finding add-ons in a running Blender: the bridge's `list_addons` answer, read once per
//! refresh, and what the registry makes of it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::bridge::{BridgeCommand, DiscoveredAddon};
use viga_protocol::manifest::AddonManifest;
use viga_protocol::parse_value;

use super::problems::{AddonProblem, ProblemReason};
use super::requirements::{FoundAddon, unmet_requirements};
use super::{AddonRegistry, by_priority, manifest_error};
use crate::registry::ToolError;

/// What Blender's add-ons looked like at one moment: every add-on with a manifest that is
/// enabled there or in an add-on folder it was given, with what the bridge found about it.
///
/// This reads `list_addons` as [`viga_protocol::bridge::AddonListing`] plus the fields this
/// bridge adds (`fingerprint`, `blender_version`, each add-on's `missing_dependencies`); an
/// older bridge omits them, and is then asked for its version and re-read in full.
#[derive(Debug, Clone, Deserialize)]
pub struct AddonScan {
    addons: Vec<ScannedAddon>,
    #[serde(default)]
    problems: Vec<String>,
    /// A hash of everything else in the reply: equal fingerprints, equal listings.
    #[serde(default)]
    fingerprint: Option<String>,
    #[serde(default)]
    blender_version: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct ScannedAddon {
    #[serde(flatten)]
    found: DiscoveredAddon,
    #[serde(default)]
    missing_dependencies: Vec<String>,
}

/// Whether a refresh changed the add-ons offered: their tools and the prompt section.
/// (Problems may change without that; [`AddonRegistry::problems`] has them.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddonSetChange {
    Unchanged,
    Changed,
}

impl AddonScan {
    /// Asks Blender for its add-ons. `folder` (an add-on folder to load packages from) is
    /// remembered by the bridge, so later scans include it without naming it again.
    pub async fn fetch(
        blender: &dyn BlenderTransport,
        folder: Option<&Path>,
    ) -> Result<Self, ToolError> {
        let command = BridgeCommand::ListAddons {
            folder: folder.map(|f| f.to_string_lossy().into_owned()),
        };
        let mut scan: Self = serde_json::from_value(blender.call(command, None).await?)
            .map_err(|err| ToolError::Fatal(format!("the add-on listing is malformed: {err}")))?;
        if scan.blender_version.is_none() {
            scan.blender_version = Some(blender.scene_info(0, 1).await?.blender_version);
        }
        Ok(scan)
    }

    /// The Blender version requirements are checked against.
    fn running_blender(&self) -> &str {
        self.blender_version.as_deref().unwrap_or_default()
    }
}

impl AddonRegistry {
    /// Rediscovers the add-ons of `blender`: those that appeared are registered, those that
    /// went away (disabled, uninstalled) are dropped, and [`AddonRegistry::problems`] says why
    /// any add-on is not offered. Add-ons registered by hand stay. Cheap when nothing
    /// changed: the bridge's fingerprint is compared before any manifest is read again.
    pub async fn refresh(
        &mut self,
        blender: &dyn BlenderTransport,
        folder: Option<&Path>,
    ) -> Result<AddonSetChange, ToolError> {
        let scan = AddonScan::fetch(blender, folder).await?;
        Ok(self.apply_scan(scan))
    }

    /// [`AddonRegistry::refresh`] with a scan fetched beforehand, so a caller can talk to
    /// Blender without holding the registry locked.
    pub fn apply_scan(&mut self, scan: AddonScan) -> AddonSetChange {
        if scan.fingerprint.is_some() && scan.fingerprint == self.fingerprint {
            return AddonSetChange::Unchanged;
        }
        let before = self.offered_manifests();
        for id in std::mem::take(&mut self.discovered) {
            self.addons.remove(&id);
        }
        self.problems = self.admit(&scan);
        self.fingerprint = scan.fingerprint;
        if before == self.offered_manifests() {
            AddonSetChange::Unchanged
        } else {
            AddonSetChange::Changed
        }
    }

    /// Registers every add-on of `scan` that can run, highest priority first (so of two
    /// add-ons claiming one tool name, the more important keeps it), and returns the
    /// problems of the others.
    fn admit(&mut self, scan: &AddonScan) -> Vec<AddonProblem> {
        let mut problems: Vec<AddonProblem> = scan
            .problems
            .iter()
            .cloned()
            .map(AddonProblem::not_loadable)
            .collect();
        for (manifest, scanned) in valid_manifests(scan, &mut problems) {
            if let Err(refusals) = self.admit_one(manifest, scanned, scan.running_blender()) {
                problems.extend(refusals);
            }
        }
        problems
    }

    fn admit_one(
        &mut self,
        manifest: AddonManifest,
        scanned: &ScannedAddon,
        running_blender: &str,
    ) -> Result<(), Vec<AddonProblem>> {
        let source = &scanned.found.path;
        let found = FoundAddon {
            has_handlers: scanned.found.has_handlers,
            missing_dependencies: &scanned.missing_dependencies,
        };
        let unmet = unmet_requirements(&manifest, found, running_blender);
        if !unmet.is_empty() {
            let id = &manifest.addon_info.id;
            return Err(unmet
                .into_iter()
                .map(|reason| AddonProblem::of_addon(id, source, reason))
                .collect());
        }
        self.register_discovered(manifest, source).map_err(|err| {
            let mut problem = AddonProblem::from(err);
            problem.source = Some(source.clone());
            vec![problem]
        })
    }
}

/// The manifests of `scan` that are valid, one per id, highest priority first. Of two
/// manifests with one id the first listed is kept, because the bridge routes that id's
/// commands to it.
fn valid_manifests<'a>(
    scan: &'a AddonScan,
    problems: &mut Vec<AddonProblem>,
) -> Vec<(AddonManifest, &'a ScannedAddon)> {
    let mut first_source: BTreeMap<String, &str> = BTreeMap::new();
    let mut valid = Vec::new();
    for scanned in &scan.addons {
        let source = scanned.found.path.as_str();
        let manifest = match parse_value::<AddonManifest>(scanned.found.manifest.clone()) {
            Ok(manifest) => manifest,
            Err(err) => {
                problems.push(manifest_error(source, err).into());
                continue;
            }
        };
        let id = manifest.addon_info.id.clone();
        if let Some(first) = first_source.get(&id) {
            let reason = ProblemReason::DuplicateId {
                first_source: (*first).to_owned(),
            };
            problems.push(AddonProblem::of_addon(&id, source, reason));
            continue;
        }
        first_source.insert(id, source);
        valid.push((manifest, scanned));
    }
    valid.sort_by(|(a, _), (b, _)| by_priority(a, b));
    valid
}

/// Asks Blender which add-ons it has (enabled ones, plus those in `folder` and in every
/// folder given before), validates their manifests and requirements, and registers the ones
/// that can run, replacing what an earlier discovery registered. Returns every problem
/// found, each naming the add-on, so one broken add-on never hides the others; the same
/// problems, machine-readable, are in [`AddonRegistry::problems`].
pub async fn discover(
    blender: &dyn BlenderTransport,
    folder: Option<&Path>,
    registry: &mut AddonRegistry,
) -> Result<Vec<String>, ToolError> {
    registry.refresh(blender, folder).await?;
    Ok(registry
        .problems()
        .iter()
        .map(ToString::to_string)
        .collect())
}
