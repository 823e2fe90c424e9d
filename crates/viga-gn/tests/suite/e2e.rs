//! The manifest-driven cases in fixtures/gn, each on real Blender.

use std::path::PathBuf;

use viga_gn::e2e::{load_manifest, run_case};

use super::on_blender;

#[test]
fn every_manifest_case_passes() {
    on_blender(|blender| async move {
        let manifest =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gn/manifest.json");
        let cases = load_manifest(&manifest).unwrap();
        assert!(
            cases.len() >= 10,
            "ship at least 10 cases, found {}",
            cases.len()
        );
        let output = tempfile::tempdir().unwrap();
        let mut failed = Vec::new();
        for case in &cases {
            let result = run_case(case, &blender, Some(output.path())).await;
            if !result.passed() {
                failed.push(format!("{}: {}", result.name, result.failures.join("; ")));
            }
        }
        assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
    });
}
