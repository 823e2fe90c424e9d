//! Whether an add-on can run in this Blender: its manifest's `requirements` (seed 004:
//! `blender_version_min`, `dependencies`) against what the bridge reports.
//!
//! `api_keys` are not checked: the manifest says which services need a key, not where a key
//! would be found, so there is nothing to look at.

use viga_protocol::manifest::AddonManifest;

use super::problems::ProblemReason;

/// What the bridge found about one add-on beside its manifest.
#[derive(Debug, Clone, Copy)]
pub(super) struct FoundAddon<'a> {
    pub has_handlers: bool,
    /// Manifest dependencies Blender's Python cannot import (checked inside Blender).
    pub missing_dependencies: &'a [String],
}

/// Everything that keeps the add-on from running here; empty when it can run.
pub(super) fn unmet_requirements(
    manifest: &AddonManifest,
    found: FoundAddon<'_>,
    running_blender: &str,
) -> Vec<ProblemReason> {
    let mut unmet = Vec::new();
    if !found.has_handlers {
        unmet.push(ProblemReason::NoHandlers);
    }
    let requirements = &manifest.ai_integration.requirements;
    if let Some(required) = &requirements.blender_version_min {
        unmet.extend(version_problem(required, running_blender));
    }
    if !found.missing_dependencies.is_empty() {
        unmet.push(ProblemReason::MissingDependencies {
            missing: found.missing_dependencies.to_vec(),
        });
    }
    unmet
}

fn version_problem(required: &str, running: &str) -> Option<ProblemReason> {
    let Some(minimum) = parse_version(required) else {
        return Some(ProblemReason::InvalidVersionRequirement {
            required: required.to_owned(),
        });
    };
    let Some(current) = parse_version(running) else {
        return Some(ProblemReason::UnknownBlenderVersion {
            required: required.to_owned(),
            running: running.to_owned(),
        });
    };
    (current < minimum).then(|| ProblemReason::BlenderTooOld {
        required: required.to_owned(),
        running: running.to_owned(),
    })
}

/// `major.minor.patch` from "4.2", "4.2.0" or "4.2.1 LTS" (missing parts are 0); `None`
/// for anything else, so a typo in a manifest is reported rather than guessed at.
fn parse_version(text: &str) -> Option<[u32; 3]> {
    let numeric = text.split_whitespace().next()?;
    let mut parts = [0_u32; 3];
    let mut count = 0;
    for piece in numeric.split('.') {
        let slot = parts.get_mut(count)?;
        *slot = piece.parse().ok()?;
        count += 1;
    }
    (count > 0).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions_are_read_leniently_but_never_guessed() {
        assert_eq!(parse_version("4.2"), Some([4, 2, 0]));
        assert_eq!(parse_version("5.0.1"), Some([5, 0, 1]));
        assert_eq!(parse_version("4.2.1 LTS"), Some([4, 2, 1]));
        assert_eq!(parse_version(" 3 "), Some([3, 0, 0]));
        for wrong in ["", "latest", "4.x", "4.2.0.1", "4..2", "v4.2"] {
            assert_eq!(parse_version(wrong), None, "{wrong:?}");
        }
    }
}
