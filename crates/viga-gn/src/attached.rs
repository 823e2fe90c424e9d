//! Geometry Nodes runs on a person's scene, without running model code in their Blender.
//!
//! The run works in viga's own (contained) worker, on a copy of the person's scene:
//! [`SceneCopy::open`] has their Blender save a copy of the open scene (their file, its path
//! and their unsaved state are untouched), opens it in the worker and takes a fingerprint of
//! every node group there. The run then goes on in the worker like any other. When it is
//! done, [`SceneCopy::result`] asks the worker what the run made or changed (the node groups,
//! the targets' modifiers and their input values), and [`import_result`] has the person's
//! Blender take that in through the bridge's fixed `import_gn_result` command: the groups are
//! appended from the .blend the worker saved, the modifiers created or updated, as one undo
//! step, and no program runs there. A run that is cancelled or fails never touches their
//! scene.
//!
//! What the worker reports was written where model code ran, so it is data to check: here
//! for shape and bounds, and in the bridge again against the file and the scene (no text, no
//! driver needing Python, nothing linked, inputs the groups declare).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::json;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::bridge::BridgeCommand;
use viga_protocol::gn::{GnInputValue, GnResult, GnResultImported};

use crate::{GnBlender, GnError, Target};

/// The longest datablock name Blender keeps, in bytes.
const MAX_NAME_BYTES: usize = 255;
/// The longest modifier name Blender keeps, in bytes.
const MAX_MODIFIER_NAME_BYTES: usize = 63;
const MAX_NODE_GROUPS: usize = 64;
const MAX_MODIFIERS: usize = 64;
const MAX_INPUTS: usize = 512;
const MAX_TEXT_CHARS: usize = 4096;

/// A copy of a person's scene, open in viga's worker, and the node groups as they were.
#[derive(Debug, Clone)]
pub struct SceneCopy {
    fingerprints: BTreeMap<String, String>,
}

impl SceneCopy {
    /// Has `user` (a person's Blender) save a copy of its open scene as `copy`, opens that in
    /// `worker` and fingerprints its node groups. A contained worker reads only its scratch
    /// folder, so the copy is opened from there.
    pub async fn open(
        user: &dyn BlenderTransport,
        worker: &GnBlender,
        copy: &Path,
    ) -> Result<Self, GnError> {
        user.save_blend(&copy.to_string_lossy())
            .await
            .map_err(|source| GnError::Blender {
                function: "save a copy of your scene".to_owned(),
                source,
            })?;
        let transport = worker.transport();
        // A contained worker reads only its own folder: the copy goes in under a fresh name,
        // created new there (a link a program left under some name is never written through).
        let staged = match transport.shared_folder() {
            Some(folder) => {
                let name = folder.fresh_name("scene-copy", "blend");
                folder
                    .place(&name, copy)
                    .map_err(|err| GnError::file(folder.full_path(&name), err))?;
                Some((folder, name))
            }
            None => None,
        };
        let opened = match &staged {
            Some((folder, name)) => folder.full_path(name),
            None => copy.to_path_buf(),
        };
        let loaded = transport.load_blend(&opened.to_string_lossy()).await;
        if let Some((folder, name)) = &staged {
            let _ = folder.remove(name);
        }
        loaded.map_err(|source| GnError::Blender {
            function: "open the copy of your scene".to_owned(),
            source,
        })?;
        let fingerprints = worker.call("group_fingerprints", &json!({})).await?;
        Ok(Self { fingerprints })
    }

    /// What the finished run made or changed: the node groups (new, changed since
    /// [`SceneCopy::open`], and every target's) and the targets' modifiers with their input
    /// values. Checked for shape and bounds.
    pub async fn result(
        &self,
        worker: &GnBlender,
        targets: &[Target],
    ) -> Result<GnResult, GnError> {
        let args = json!({"fingerprints": self.fingerprints, "targets": targets});
        let result: GnResult = worker.call("describe_result", &args).await?;
        check_result(&result).map_err(GnError::Result)?;
        Ok(result)
    }
}

/// Brings `result` into the open scene of `user` (a person's Blender) from `blend`, the
/// .blend the run's worker saved, as one undo step named `undo_name`. No program runs
/// there; a result the bridge refuses leaves the scene as it was.
pub async fn import_result(
    user: &dyn BlenderTransport,
    blend: &Path,
    result: &GnResult,
    undo_name: &str,
) -> Result<GnResultImported, GnError> {
    let blend = std::path::absolute(blend).map_err(|err| GnError::file(blend, err))?;
    let command = BridgeCommand::ImportGnResult {
        path: blend.to_string_lossy().into_owned(),
        node_groups: result.node_groups.clone(),
        modifiers: result.modifiers.clone(),
        message: undo_name.to_owned(),
    };
    let reply = user
        .call(command, None)
        .await
        .map_err(|source| GnError::Blender {
            function: "import_gn_result".to_owned(),
            source,
        })?;
    serde_json::from_value(reply).map_err(|err| GnError::Decode {
        function: "import_gn_result".to_owned(),
        message: err.to_string(),
    })
}

/// Why a result reported by the worker is not one to hand to a person's Blender.
fn check_result(result: &GnResult) -> Result<(), String> {
    if result.node_groups.len() > MAX_NODE_GROUPS {
        return Err(format!(
            "it names {} node groups, more than {MAX_NODE_GROUPS}",
            result.node_groups.len()
        ));
    }
    if result.modifiers.len() > MAX_MODIFIERS {
        return Err(format!(
            "it names {} modifiers, more than {MAX_MODIFIERS}",
            result.modifiers.len()
        ));
    }
    let mut groups = HashSet::new();
    for group in &result.node_groups {
        check_name(group, "a node group", MAX_NAME_BYTES)?;
        if !groups.insert(group.as_str()) {
            return Err(format!("it names the node group {group:?} twice"));
        }
    }
    let mut modifiers = HashSet::new();
    for modifier in &result.modifiers {
        let place = format!("modifier {:?} on {:?}", modifier.modifier, modifier.object);
        check_name(&modifier.object, "an object", MAX_NAME_BYTES)?;
        check_name(&modifier.modifier, "a modifier", MAX_MODIFIER_NAME_BYTES)?;
        if !groups.contains(modifier.node_group.as_str()) {
            return Err(format!(
                "{place} uses the node group {:?}, which the result does not bring",
                modifier.node_group
            ));
        }
        if !modifiers.insert((&modifier.object, &modifier.modifier)) {
            return Err(format!("{place} is named twice"));
        }
        if modifier.inputs.len() > MAX_INPUTS {
            return Err(format!("{place} has more than {MAX_INPUTS} inputs"));
        }
        for (key, value) in &modifier.inputs {
            check_input(key, value).map_err(|problem| format!("{place}: {problem}"))?;
        }
    }
    Ok(())
}

fn check_name(name: &str, what: &str, max_bytes: usize) -> Result<(), String> {
    if name.is_empty() || name.len() > max_bytes || name.chars().any(char::is_control) {
        return Err(format!(
            "{what} name must have 1 to {max_bytes} bytes and no control characters, not {name:?}"
        ));
    }
    Ok(())
}

/// A modifier input key is a socket identifier (`Socket_2`, `Input_3` in older files),
/// alone or with `_use_attribute` or `_attribute_name`.
fn check_input(key: &str, value: &GnInputValue) -> Result<(), String> {
    let plain = key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plain {
        return Err(format!("the input key {key:?} is not a socket identifier"));
    }
    let finite = |number: &f64| number.is_finite();
    let fits = match value {
        GnInputValue::Boolean(_) | GnInputValue::Integer(_) => true,
        GnInputValue::Number(number) => finite(number),
        GnInputValue::Text(text) => text.chars().count() <= MAX_TEXT_CHARS,
        GnInputValue::Vector(numbers) => {
            (2..=4).contains(&numbers.len()) && numbers.iter().all(finite)
        }
        GnInputValue::Datablock(datablock) => match &datablock.name {
            Some(name) => check_name(name, "a datablock", MAX_NAME_BYTES).is_ok(),
            None => true,
        },
    };
    if fits {
        Ok(())
    } else {
        Err(format!("the value of {key:?} is out of bounds: {value:?}"))
    }
}

#[cfg(test)]
mod tests {
    use viga_protocol::gn::{DatablockKind, DatablockRef, GnModifierResult};

    use super::*;

    fn result(inputs: BTreeMap<String, GnInputValue>) -> GnResult {
        GnResult {
            node_groups: vec!["Scatter".into()],
            modifiers: vec![GnModifierResult {
                object: "Plane".into(),
                modifier: "Scatter".into(),
                node_group: "Scatter".into(),
                inputs,
            }],
        }
    }

    #[test]
    fn a_plain_result_passes() {
        let inputs = BTreeMap::from([
            ("Socket_2".to_owned(), GnInputValue::Number(7.5)),
            (
                "Socket_2_use_attribute".to_owned(),
                GnInputValue::Boolean(false),
            ),
            (
                "Socket_3".to_owned(),
                GnInputValue::Vector(vec![1.0, 2.0, 3.0]),
            ),
            (
                "Socket_4".to_owned(),
                GnInputValue::Datablock(DatablockRef {
                    kind: DatablockKind::Object,
                    name: Some("Cube".into()),
                }),
            ),
        ]);
        assert_eq!(check_result(&result(inputs)), Ok(()));
    }

    #[test]
    fn bad_names_keys_and_values_are_refused() {
        let mut unknown_group = result(BTreeMap::new());
        unknown_group.modifiers[0].node_group = "Other".into();
        let mut long_modifier = result(BTreeMap::new());
        long_modifier.modifiers[0].modifier = "m".repeat(64);
        let mut control = result(BTreeMap::new());
        control.node_groups[0] = "a\nb".into();
        control.modifiers[0].node_group = "a\nb".into();
        let mut twice = result(BTreeMap::new());
        twice.node_groups.push("Scatter".into());
        let cases = [
            (unknown_group, "does not bring"),
            (long_modifier, "1 to 63 bytes"),
            (control, "no control characters"),
            (twice, "twice"),
            (
                result(BTreeMap::from([(
                    "__class__".to_owned(),
                    GnInputValue::Integer(1),
                )])),
                "not a socket identifier",
            ),
            (
                result(BTreeMap::from([(
                    "Socket_2".to_owned(),
                    GnInputValue::Number(f64::NAN),
                )])),
                "out of bounds",
            ),
            (
                result(BTreeMap::from([(
                    "Socket_2".to_owned(),
                    GnInputValue::Vector(vec![0.0; 100]),
                )])),
                "out of bounds",
            ),
        ];
        for (result, needle) in cases {
            let problem = check_result(&result).unwrap_err();
            assert!(problem.contains(needle), "{problem}");
        }
    }
}
