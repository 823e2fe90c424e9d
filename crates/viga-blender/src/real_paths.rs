//! Paths as a contained Blender can reach them. The containment launcher grants a worker its
//! inputs by their real paths (links resolved, `..` gone) and hides the rest of the folders
//! they sit in (the home folder, `/tmp`), so a path as the person wrote it, through a link
//! or a `..` across a hidden folder, does not exist inside. Every path a worker is sent is
//! therefore the resolved one the grants were made for.

use std::path::Path;

use viga_protocol::bridge::{BridgeCommand, SceneReset};

pub use viga_io::files::real_path;

fn real(path: String) -> String {
    real_path(Path::new(&path)).to_string_lossy().into_owned()
}

/// `command` with every path it sends resolved by [`real_path`].
pub fn with_real_paths(command: BridgeCommand) -> BridgeCommand {
    use BridgeCommand as C;
    match command {
        C::Execute {
            code,
            reset: Some(SceneReset::Blend { path }),
        } => C::Execute {
            code,
            reset: Some(SceneReset::Blend { path: real(path) }),
        },
        C::SaveBlend { path } => C::SaveBlend { path: real(path) },
        C::LoadBlend { path } => C::LoadBlend { path: real(path) },
        C::Checkpoint { path } => C::Checkpoint { path: real(path) },
        C::Restore { path } => C::Restore { path: real(path) },
        C::ListAddons { folder } => C::ListAddons {
            folder: folder.map(real),
        },
        C::ImportGnResult {
            path,
            node_groups,
            modifiers,
            message,
        } => C::ImportGnResult {
            path: real(path),
            node_groups,
            modifiers,
            message,
        },
        C::ImportSceneResult {
            path,
            plan,
            message,
        } => C::ImportSceneResult {
            path: real(path),
            plan,
            message,
        },
        other => other,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn links_and_dots_are_resolved_and_a_file_to_be_written_keeps_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let real_dir = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real_dir.join("scenes")).unwrap();
        std::fs::write(real_dir.join("scenes/base.blend"), b"").unwrap();
        std::os::unix::fs::symlink(real_dir.join("scenes"), real_dir.join("link")).unwrap();
        std::fs::create_dir(real_dir.join("other")).unwrap();
        let wanted = real_dir.join("scenes/base.blend");
        assert_eq!(real_path(&real_dir.join("link/base.blend")), wanted);
        assert_eq!(
            real_path(&real_dir.join("other/../scenes/base.blend")),
            wanted
        );
        assert_eq!(
            real_path(&real_dir.join("link/new.blend")),
            real_dir.join("scenes/new.blend")
        );
        let missing = real_dir.join("nowhere/base.blend");
        assert_eq!(real_path(&missing), missing);

        let reset = with_real_paths(BridgeCommand::Execute {
            code: String::new(),
            reset: Some(SceneReset::Blend {
                path: real_dir
                    .join("link/base.blend")
                    .to_string_lossy()
                    .into_owned(),
            }),
        });
        assert_eq!(
            reset,
            BridgeCommand::Execute {
                code: String::new(),
                reset: Some(SceneReset::Blend {
                    path: wanted.to_string_lossy().into_owned()
                }),
            }
        );
    }
}
