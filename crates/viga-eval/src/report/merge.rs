//! Merging shard outputs: the instance folders of several shards copied into one folder
//! (plain files only), refused when the shards' settings differ or an instance is in two.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Summary, collect, write_reports};
use crate::EvalError;
use crate::scores::{EvalSettings, SETTINGS_FILE, read_json, write_json};

/// Copies the instance folders of several shard outputs into `into`, refusing shards made
/// with other settings and instances found in two shards (scored, failed or selected);
/// then writes the reports. Nothing in the
/// shard folders is changed.
pub fn merge(shards: &[PathBuf], into: &Path) -> Result<Summary, EvalError> {
    let mut settings: Option<EvalSettings> = None;
    let mut owner: BTreeMap<String, PathBuf> = BTreeMap::new();
    for shard in shards {
        let path = shard.join(SETTINGS_FILE);
        let these: EvalSettings = read_json(&path)?;
        if let Some(first) = &settings {
            let differences = first.differences(&these);
            if !differences.is_empty() {
                return Err(EvalError::BadResults {
                    path,
                    message: format!(
                        "this shard was made with other settings ({})",
                        differences.join("; ")
                    ),
                });
            }
        }
        settings = Some(these);
        let found = collect(shard)?;
        for instance in found.instances().into_keys() {
            if let Some(previous) = owner.insert(instance.to_owned(), shard.clone()) {
                return Err(EvalError::BadResults {
                    path: shard.join(instance),
                    message: format!(
                        "instance {instance} is also in {}: shards overlap (were they run with the same --shard n and selection?)",
                        previous.display()
                    ),
                });
            }
        }
    }
    let Some(settings) = settings else {
        return Err(EvalError::BadResults {
            path: into.to_path_buf(),
            message: "no shard folders given to merge".to_owned(),
        });
    };
    let existing = into.join(SETTINGS_FILE);
    if existing.is_file() {
        let theirs: EvalSettings = read_json(&existing)?;
        let differences = theirs.differences(&settings);
        if !differences.is_empty() {
            return Err(EvalError::BadResults {
                path: existing,
                message: format!(
                    "the merge target holds other settings ({})",
                    differences.join("; ")
                ),
            });
        }
    }
    std::fs::create_dir_all(into).map_err(|err| EvalError::io(into, err))?;
    write_json(&existing, &settings)?;
    for (instance, shard) in &owner {
        copy_dir(&shard.join(instance), &into.join(instance))?;
    }
    write_reports(into)
}

/// Copies plain files and folders. A link is refused rather than followed: a shard folder is
/// data, and a link in it could pull any file (or the whole disk) into the merge.
fn copy_dir(from: &Path, to: &Path) -> Result<(), EvalError> {
    std::fs::create_dir_all(to).map_err(|err| EvalError::io(to, err))?;
    for entry in std::fs::read_dir(from).map_err(|err| EvalError::io(from, err))? {
        let entry = entry.map_err(|err| EvalError::io(from, err))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|err| EvalError::io(&entry.path(), err))?;
        if kind.is_symlink() {
            return Err(EvalError::BadResults {
                path: entry.path(),
                message: "is a link; shards are merged from plain files and folders only"
                    .to_owned(),
            });
        }
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|err| EvalError::io(&target, err))?;
        }
    }
    Ok(())
}
