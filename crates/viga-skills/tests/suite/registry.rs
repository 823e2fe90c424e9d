use std::sync::Arc;

use viga_skills::generator::{MakePlan, generator_tools};
use viga_skills::registry::RegistryError;
use viga_skills::verifier::verifier_tools;

#[test]
fn tool_specs_are_derived_and_snapshotted() {
    let generator = generator_tools().unwrap();
    assert_eq!(
        generator.names(),
        [
            "end_process",
            "execute_code",
            "get_better_assets",
            "get_scene_info",
            "make_plan"
        ]
    );
    insta::assert_json_snapshot!("generator_tools", generator.specs());
    let verifier = verifier_tools().unwrap();
    assert_eq!(
        verifier.names(),
        [
            "end_process",
            "get_scene_info",
            "initialize_viewpoint",
            "investigate",
            "set_camera",
            "set_keyframe",
            "set_visibility"
        ]
    );
    insta::assert_json_snapshot!("verifier_tools", verifier.specs());
}

#[test]
fn duplicate_names_are_refused_and_tools_can_leave() {
    let mut registry = generator_tools().unwrap();
    assert_eq!(
        registry.register(Arc::new(MakePlan)),
        Err(RegistryError::Duplicate("make_plan".into()))
    );
    assert!(registry.unregister("make_plan"));
    assert!(!registry.unregister("make_plan"));
    registry.register(Arc::new(MakePlan)).unwrap();
}
