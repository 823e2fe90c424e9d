//! The layout reader on folders made here: what it accepts, and errors that name the instance
//! and the file.

use std::path::Path;

use viga_eval::{Selection, Task, discover};

fn instance(root: &Path, name: &str, views: u32) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("renders/goal")).unwrap();
    for file in ["blender_file.blend", "start.py", "goal.py"] {
        std::fs::write(dir.join(file), "").unwrap();
    }
    for k in 1..=views {
        std::fs::write(dir.join(format!("renders/goal/render{k}.png")), "").unwrap();
    }
}

#[test]
fn reads_sorted_instances_counts_views_and_ignores_other_entries() {
    let root = tempfile::tempdir().unwrap();
    instance(root.path(), "placement10", 1);
    instance(root.path(), "placement2", 3);
    instance(root.path(), "lighting1", 2);
    std::fs::write(root.path().join("README.md"), "").unwrap();
    std::fs::create_dir(root.path().join("scratch")).unwrap();
    let all = discover(root.path(), &Selection::default()).unwrap();
    let names: Vec<_> = all.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["placement2", "placement10", "lighting1"]);
    assert_eq!(all[0].views, 3);
    assert!(all[0].blend.is_absolute());
    let cameras: Vec<_> = all[0].cameras().collect();
    assert_eq!(cameras, ["Camera1", "Camera2", "Camera3"]);

    let lighting = Selection {
        tasks: Some(vec![Task::Lighting]),
        instances: None,
    };
    assert_eq!(discover(root.path(), &lighting).unwrap().len(), 1);
    let missing = Selection {
        tasks: None,
        instances: Some(vec!["placement7".to_owned()]),
    };
    let err = discover(root.path(), &missing).unwrap_err().to_string();
    assert!(err.contains("placement7"), "{err}");
}

#[test]
fn a_missing_file_names_the_instance_and_the_file() {
    let root = tempfile::tempdir().unwrap();
    instance(root.path(), "geometry3", 1);
    std::fs::remove_file(root.path().join("geometry3/start.py")).unwrap();
    let err = discover(root.path(), &Selection::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("geometry3") && err.contains("start.py"),
        "{err}"
    );

    instance(root.path(), "material1", 0);
    std::fs::remove_dir_all(root.path().join("geometry3")).unwrap();
    let err = discover(root.path(), &Selection::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("material1") && err.contains("renders/goal/render1.png"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    let err = discover(empty.path(), &Selection::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no BlenderGym instances"), "{err}");
    let err = discover(&empty.path().join("nope"), &Selection::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read the data folder"), "{err}");
}
