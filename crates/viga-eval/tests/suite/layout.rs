//! The layout reader on folders made here: what it accepts, and errors that name the instance
//! and the file.

use std::path::Path;

use viga_eval::{Selection, Suite, Task, discover};

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

#[test]
fn blenderbench_levels_are_read_with_their_task_text_and_goal_picture() {
    let root = tempfile::tempdir().unwrap();
    instance(root.path(), "level1/camera10", 1);
    instance(root.path(), "level1/camera2", 1);
    instance(root.path(), "level3/scene", 2);
    instance(root.path(), "level2/attribute5", 1);
    std::fs::write(
        root.path().join("level1/camera2/task.txt"),
        "  Move Camera1.\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("level1/camera2/renders/goal/style1.png"),
        "",
    )
    .unwrap();
    std::fs::write(
        root.path()
            .join("level2/attribute5/renders/goal/style1.png"),
        "",
    )
    .unwrap();
    std::fs::write(
        root.path()
            .join("level2/attribute5/renders/goal/visprompt1.png"),
        "",
    )
    .unwrap();
    std::fs::create_dir_all(root.path().join("level1/.cache")).unwrap();
    std::fs::write(root.path().join("level1/notes.txt"), "").unwrap();
    // A BlenderGym folder beside them is not a BlenderBench instance.
    instance(root.path(), "placement1", 1);

    let all = Suite::BlenderBench
        .discover(root.path(), &Selection::default())
        .unwrap();
    let names: Vec<_> = all.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "level1-camera2",
            "level1-camera10",
            "level2-attribute5",
            "level3-scene"
        ]
    );
    let camera2 = &all[0];
    assert_eq!(camera2.task, Task::Level1);
    assert_eq!(camera2.description.as_deref(), Some("Move Camera1."));
    assert!(
        camera2
            .visual_prompt
            .as_ref()
            .unwrap()
            .ends_with("renders/goal/style1.png")
    );
    assert_eq!(all[1].description, None);
    assert_eq!(all[1].visual_prompt, None);
    // visprompt1.png is preferred, as in VIGA's prompt builder.
    assert!(
        all[2]
            .visual_prompt
            .as_ref()
            .unwrap()
            .ends_with("visprompt1.png")
    );
    // The goal picture is no view: views are render<k>.png.
    assert_eq!((all[2].views, all[3].views), (1, 2));

    let level2 = Selection {
        tasks: Some(vec![Task::Level2]),
        instances: None,
    };
    assert_eq!(
        Suite::BlenderBench
            .discover(root.path(), &level2)
            .unwrap()
            .len(),
        1
    );
    let one = Selection {
        tasks: None,
        instances: Some(vec!["level3-scene".to_owned()]),
    };
    assert_eq!(
        Suite::BlenderBench.discover(root.path(), &one).unwrap()[0].views,
        2
    );

    let gym_task = Selection {
        tasks: Some(vec![Task::Placement]),
        instances: None,
    };
    let err = Suite::BlenderBench
        .discover(root.path(), &gym_task)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "placement is not a BlenderBench task; BlenderBench's are level1, level2, level3"
        ),
        "{err}"
    );
    let err = Suite::BlenderGym
        .discover(root.path(), &level2)
        .unwrap_err()
        .to_string();
    assert!(err.contains("level2 is not a BlenderGym task"), "{err}");
    // BlenderGym's reader does not mistake the level folders for instances.
    let gym = discover(root.path(), &Selection::default()).unwrap();
    assert_eq!(gym.len(), 1);

    std::fs::remove_file(root.path().join("level3/scene/goal.py")).unwrap();
    let err = Suite::BlenderBench
        .discover(root.path(), &Selection::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("level3-scene") && err.contains("goal.py"),
        "{err}"
    );
    let empty = tempfile::tempdir().unwrap();
    let err = Suite::BlenderBench
        .discover(empty.path(), &Selection::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no BlenderBench instances"), "{err}");
}
