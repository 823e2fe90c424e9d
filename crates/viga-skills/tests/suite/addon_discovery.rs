//! What the add-on registry makes of Blender's add-on listing, with a scripted bridge:
//! clashing tool names, unmet requirements, duplicate ids, and rediscovery that follows
//! Blender and is cheap when nothing changed.

use serde_json::{Value, json};
use viga_skills::addons::{
    AddonError, AddonProblem, AddonRegistry, AddonSetChange, ProblemReason, discover,
};
use viga_skills::generator::generator_tools;
use viga_testkit::blender::FakeBlender;

/// A Blender whose `list_addons` answers `listing`, running Blender 4.2.3.
fn scripted_bridge(listing: Value) -> FakeBlender {
    let bridge = FakeBlender::new().blender_version("4.2.3 LTS");
    bridge.answer("list_addons", listing);
    bridge
}

fn manifest(id: &str, priority: i32, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({"name": name, "description": format!("{name} does it"), "parameters": []}))
        .collect();
    json!({
        "addon_info": {"id": id, "name": id},
        "ai_integration": {"agent_description": format!("{id} helps"), "tools": tools,
                           "metadata": {"priority": priority}}
    })
}

fn entry(manifest: Value) -> Value {
    let id = manifest["addon_info"]["id"].as_str().unwrap().to_owned();
    json!({"path": format!("/addons/{id}/addon_ai.json"), "manifest": manifest, "has_handlers": true})
}

fn listing(fingerprint: &str, entries: Vec<Value>) -> Value {
    json!({"addons": entries, "problems": [], "blender_version": "4.2.0", "fingerprint": fingerprint})
}

fn reasons_of<'a>(registry: &'a AddonRegistry, addon: &str) -> Vec<&'a ProblemReason> {
    registry
        .problems()
        .iter()
        .filter(|p| p.addon.as_deref() == Some(addon))
        .map(|p| &p.reason)
        .collect()
}

fn scene_tool_names() -> Vec<String> {
    let tools = generator_tools().unwrap();
    tools.names().into_iter().map(str::to_owned).collect()
}

#[tokio::test]
async fn clashing_tool_names_are_refused_naming_both_and_the_rest_still_work() {
    let bridge = scripted_bridge(listing(
        "one",
        vec![
            entry(manifest("placer", 80, &["place", "measure"])),
            entry(manifest("hijacker", 90, &["execute_code", "harmless"])),
            entry(manifest("copycat", 10, &["place"])),
        ],
    ));
    let mut registry = AddonRegistry::new();
    registry.reserve_tool_names(scene_tool_names());
    registry.refresh(&bridge, None).await.unwrap();

    assert_eq!(registry.ids(), ["placer"]);
    assert_eq!(
        reasons_of(&registry, "hijacker"),
        [&ProblemReason::BuiltInToolClash {
            tool: "execute_code".into()
        }]
    );
    assert_eq!(
        reasons_of(&registry, "copycat"),
        [&ProblemReason::ToolClash {
            tool: "place".into(),
            owner: "placer".into()
        }],
        "the higher priority add-on keeps the name"
    );
    let messages: Vec<String> = registry
        .problems()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("\"hijacker\"")
            && m.contains("/addons/hijacker/addon_ai.json")
            && m.contains("\"execute_code\"")
            && m.contains("built-in tool")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("\"copycat\"")
            && m.contains("\"place\"")
            && m.contains("add-on \"placer\"")),
        "{messages:?}"
    );
    let offered = registry.extend(&generator_tools().unwrap()).unwrap();
    assert!(offered.names().contains(&"place") && offered.names().contains(&"execute_code"));
    assert!(
        !offered.names().contains(&"harmless"),
        "a refused add-on offers nothing"
    );
    assert!(!registry.prompt_section().contains("hijacker"));

    let serialised = serde_json::to_value(registry.problems()).unwrap();
    assert!(
        serialised
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"].is_null()
                && p["reason"]["kind"] == "built_in_tool_clash"
                && p["reason"]["tool"] == "execute_code"
                && p["addon"] == "hijacker"),
        "{serialised}"
    );
}

#[test]
fn names_reserved_later_evict_an_addon_registered_before() {
    let hijacker: viga_protocol::manifest::AddonManifest =
        viga_protocol::parse_value(manifest("hijacker", 50, &["get_scene_info"])).unwrap();
    let mut registry = AddonRegistry::new();
    registry.register(hijacker.clone()).unwrap();
    // Not reserved yet: extending skips the add-on instead of breaking the listing.
    let offered = registry.extend(&generator_tools().unwrap()).unwrap();
    assert!(offered.names().contains(&"get_scene_info"));
    assert_eq!(registry.tools().unwrap().len(), 1);

    registry.reserve_tool_names(scene_tool_names());
    assert!(registry.ids().is_empty());
    assert_eq!(
        registry.problems()[0].to_string(),
        "add-on \"hijacker\": its tool \"get_scene_info\" has the name of a built-in tool; rename the add-on's tool"
    );
    let err = registry.register(hijacker).unwrap_err();
    assert!(
        matches!(&err, AddonError::BuiltInToolClash { addon, tool } if addon == "hijacker" && tool == "get_scene_info"),
        "{err}"
    );
}

#[tokio::test]
async fn addons_that_cannot_run_are_unavailable_with_a_machine_readable_reason() {
    let with_requirements = |id: &str, requirements: Value| {
        let mut m = manifest(id, 50, &[&format!("{id}_tool")]);
        m["ai_integration"]["requirements"] = requirements;
        m
    };
    let mut needs_scipy = entry(with_requirements(
        "needs_scipy",
        json!({"dependencies": ["numpy", "scipy>=1.0"]}),
    ));
    needs_scipy["missing_dependencies"] = json!(["scipy>=1.0"]);
    let mut silent = entry(manifest("silent", 50, &["silent_tool"]));
    silent["has_handlers"] = json!(false);
    let bridge = scripted_bridge(listing(
        "one",
        vec![
            entry(with_requirements(
                "needs_newer",
                json!({"blender_version_min": "4.3"}),
            )),
            entry(with_requirements(
                "typo",
                json!({"blender_version_min": "latest"}),
            )),
            needs_scipy,
            silent,
            entry(with_requirements(
                "fits",
                json!({"blender_version_min": "4.2.0", "dependencies": ["numpy"]}),
            )),
        ],
    ));
    let mut registry = AddonRegistry::new();
    let problems = discover(&bridge, None, &mut registry).await.unwrap();

    assert_eq!(registry.ids(), ["fits"]);
    assert_eq!(
        reasons_of(&registry, "needs_newer"),
        [&ProblemReason::BlenderTooOld {
            required: "4.3".into(),
            running: "4.2.0".into()
        }]
    );
    assert_eq!(
        reasons_of(&registry, "typo"),
        [&ProblemReason::InvalidVersionRequirement {
            required: "latest".into()
        }]
    );
    assert_eq!(
        reasons_of(&registry, "needs_scipy"),
        [&ProblemReason::MissingDependencies {
            missing: vec!["scipy>=1.0".into()]
        }]
    );
    assert_eq!(
        reasons_of(&registry, "silent"),
        [&ProblemReason::NoHandlers]
    );
    assert!(
        problems.iter().any(|p| p
            == "add-on \"needs_newer\" (/addons/needs_newer/addon_ai.json): it needs Blender 4.3 or newer; this is Blender 4.2.0"),
        "{problems:?}"
    );
    let kinds: Vec<Value> = serde_json::to_value(registry.problems())
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reason"]["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        [
            "blender_too_old",
            "missing_dependencies",
            "no_handlers",
            "invalid_version_requirement"
        ],
        "by priority, then id"
    );
    let section = registry.prompt_section();
    assert!(section.contains("fits_tool"), "{section}");
    for unavailable in ["needs_newer", "typo", "needs_scipy", "silent"] {
        assert!(
            !section.contains(unavailable),
            "{unavailable} offered:\n{section}"
        );
    }
}

#[tokio::test]
async fn rediscovery_follows_blender_and_is_cheap_when_nothing_changed() {
    let placer = || entry(manifest("placer", 80, &["place"]));
    let painter = || entry(manifest("painter", 60, &["paint"]));
    let bridge = scripted_bridge(listing("first", vec![placer()]));
    let mut registry = AddonRegistry::new();
    registry
        .register(viga_protocol::parse_value(manifest("by_hand", 50, &["hand_tool"])).unwrap())
        .unwrap();
    let refresh = async |registry: &mut AddonRegistry, answer: Value| {
        bridge.answer("list_addons", answer);
        registry.refresh(&bridge, None).await.unwrap()
    };

    let change = refresh(&mut registry, listing("first", vec![placer()])).await;
    assert_eq!(change, AddonSetChange::Changed);
    assert_eq!(registry.ids(), ["by_hand", "placer"]);

    // An equal fingerprint means an equal listing: nothing is read again.
    let change = refresh(&mut registry, listing("first", vec![placer(), painter()])).await;
    assert_eq!(change, AddonSetChange::Unchanged);
    assert_eq!(registry.ids(), ["by_hand", "placer"]);

    let change = refresh(&mut registry, listing("second", vec![placer(), painter()])).await;
    assert_eq!(change, AddonSetChange::Changed, "an add-on was enabled");
    assert_eq!(registry.ids(), ["by_hand", "painter", "placer"]);

    let change = refresh(&mut registry, listing("third", vec![painter(), placer()])).await;
    assert_eq!(
        change,
        AddonSetChange::Unchanged,
        "same add-ons, new fingerprint"
    );

    let change = refresh(&mut registry, listing("fourth", vec![painter()])).await;
    assert_eq!(change, AddonSetChange::Changed, "an add-on was disabled");
    assert_eq!(
        registry.ids(),
        ["by_hand", "painter"],
        "add-ons registered by hand stay"
    );

    assert!(registry.unregister("painter"));
    let change = refresh(&mut registry, listing("fourth", vec![painter()])).await;
    assert_eq!(
        change,
        AddonSetChange::Changed,
        "Blender still has it, so it comes back"
    );
    assert_eq!(registry.ids(), ["by_hand", "painter"]);
    assert_eq!(bridge.count("scene_info"), 0);
}

#[tokio::test]
async fn an_older_bridge_is_asked_for_its_version_and_read_in_full() {
    let mut old = manifest("old", 50, &["old_tool"]);
    old["ai_integration"]["requirements"] = json!({"blender_version_min": "4.3"});
    let bridge = scripted_bridge(json!({
        "addons": [{"path": "/addons/old/addon_ai.json", "manifest": old, "has_handlers": true},
                   entry(manifest("fine", 50, &["fine_tool"]))],
        "problems": ["broken: cannot be loaded: RuntimeError: boom"]
    }));
    let mut registry = AddonRegistry::new();
    assert_eq!(
        registry.refresh(&bridge, None).await.unwrap(),
        AddonSetChange::Changed
    );
    assert_eq!(registry.ids(), ["fine"]);
    assert_eq!(
        reasons_of(&registry, "old"),
        [&ProblemReason::BlenderTooOld {
            required: "4.3".into(),
            running: "4.2.3 LTS".into()
        }]
    );
    assert_eq!(
        registry.problems()[0],
        AddonProblem {
            addon: None,
            source: None,
            reason: ProblemReason::NotLoadable {
                message: "broken: cannot be loaded: RuntimeError: boom".into()
            }
        }
    );
    assert_eq!(
        registry.refresh(&bridge, None).await.unwrap(),
        AddonSetChange::Unchanged
    );
    assert_eq!(bridge.count("scene_info"), 2);
}

#[tokio::test]
async fn invalid_manifests_and_duplicate_ids_are_reported_and_skipped() {
    let mut twin = entry(manifest("placer", 99, &["other_place"]));
    twin["path"] = json!("/elsewhere/placer/addon_ai.json");
    let bridge = scripted_bridge(listing(
        "one",
        vec![
            entry(manifest("placer", 10, &["place"])),
            twin,
            entry(json!({"addon_info": {"id": "broken"}, "ai_integration": {}})),
        ],
    ));
    let mut registry = AddonRegistry::new();
    let problems = discover(&bridge, None, &mut registry).await.unwrap();
    assert_eq!(registry.ids(), ["placer"]);
    assert!(
        registry.provides("placer", "place"),
        "the first listed is kept"
    );
    assert_eq!(
        reasons_of(&registry, "placer"),
        [&ProblemReason::DuplicateId {
            first_source: "/addons/placer/addon_ai.json".into()
        }]
    );
    assert!(
        problems.iter().any(
            |p| p.starts_with("/addons/broken/addon_ai.json: invalid manifest:")
                && p.contains("/addon_info")
        ),
        "{problems:?}"
    );
}
