//! `viga gateway` contains each user's Blender: an add-on whose own code opens whatever it
//! is named (which the gateway's path confinement cannot see) reads no secret of the
//! gateway's account, not its users file either, and writes nowhere but in the user's own
//! folder, where the add-on's confined path parameters still work.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use viga_testkit::websocket::{ask, connect};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

const TOKEN: &str = "alice-token-0123456789";

/// Kills the gateway (and with it its users' Blenders) when the test ends, however it ends.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `viga gateway` on a free loopback port and returns it with its address.
fn start_gateway(base: &Path) -> (Gateway, String) {
    let users = base.join("users.txt");
    std::fs::write(&users, format!("alice: {TOKEN}\n")).unwrap();
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();
    let addons = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/addons");
    let mut child = Command::new(env!("CARGO_BIN_EXE_viga"))
        .args(["gateway", "--listen", "127.0.0.1:0", "--users"])
        .arg(&users)
        .arg("--addons")
        .arg(addons)
        .arg("--files-root")
        .arg(base.join("files"))
        .env_remove("VIGA_CONTAINMENT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let gateway = Gateway(child);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the gateway ended"
        );
        if let Some(rest) = line.split("listening on ").nth(1) {
            let address = rest
                .split_whitespace()
                .next()
                .unwrap()
                .trim_start_matches("ws://")
                .to_owned();
            // The rest of its log is not needed, but the pipe must not fill up.
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            return (gateway, address);
        }
    }
}

fn command(id: &str, name: &str, params: Value) -> Value {
    json!({"type": "addon_command", "message_id": id, "addon_id": "peeker", "command": name, "params": params})
}

#[tokio::test]
async fn a_users_blender_reads_no_secret_and_writes_only_in_the_users_folder() {
    within(BLENDER_TEST_LIMIT, "the gateway test", async {
        let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let secret = base.path().join("secret.txt");
        std::fs::write(&secret, "sk-canary-gateway-5521").unwrap();
        let elsewhere = base.path().join("planted.txt");
        let (_gateway, address) = start_gateway(base.path());
        let mut alice = connect(address).await;
        let hello = json!({"type": "hello", "message_id": "h", "user": "alice", "token": TOKEN});
        assert_eq!(ask(&mut alice, hello).await["ok"], true);
        for (id, target) in [("r1", &secret), ("r2", &base.path().join("users.txt"))] {
            let reply = ask(
                &mut alice,
                command(id, "peek", json!({"target_name": target})),
            )
            .await;
            let result = &reply["result"]["result"];
            assert!(result["refused"].is_string(), "{reply}");
            assert!(!reply.to_string().contains(TOKEN), "{reply}");
            assert!(!reply.to_string().contains("sk-canary"), "{reply}");
        }
        let planted = ask(
            &mut alice,
            command("w1", "plant", json!({"target_name": elsewhere})),
        )
        .await;
        assert!(
            planted["result"]["result"]["refused"].is_string(),
            "{planted}"
        );
        assert!(!elsewhere.exists());
        // Her own folder is where add-on commands write.
        let noted = ask(
            &mut alice,
            command("w2", "write_note", json!({"note_path": "note.txt"})),
        )
        .await;
        let note = base.path().join("files/alice/note.txt");
        assert_eq!(
            std::fs::read_to_string(&note).unwrap_or_default(),
            "a note",
            "{noted}"
        );
    })
    .await;
}
