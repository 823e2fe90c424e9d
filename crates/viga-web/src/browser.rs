//! The Chromium process: started (through the containment launcher, when given) with the
//! DevTools protocol on fds 3 and 4, every request intercepted from the first moment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::process::{Child, Command};
use viga_process::{Confinement, LostReason, OutputTail, kill_group};

use crate::cdp::{Cdp, CdpError};
use crate::page::Interceptor;

const STDERR_LINES: usize = 40;

/// Chromium's flags. Besides the interception of every request (Fetch), what does not go
/// through Fetch is stopped too: WebSockets and preconnects go to a SOCKS proxy at a closed
/// port, no name resolves, WebRTC sends no UDP of its own. Nothing is written outside the
/// scratch folder (no /dev/shm, no crash reports), no popup opens, and a page's scripts get
/// a bounded heap.
const FLAGS: [&str; 22] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
    "--disable-dev-shm-usage",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--block-new-web-contents",
    "--hide-scrollbars",
    "--mute-audio",
    "--no-default-browser-check",
    "--proxy-server=socks5://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--js-flags=--max-old-space-size=512",
];

/// Gives the program the DevTools pipe as fds 3 (commands in) and 4 (replies out) without
/// unsafe code in viga: the shell moves its standard input and output there and then runs
/// the program (or the launcher, which passes them on), whose own standard output goes to
/// standard error.
const PIPE_SHIM: &str = "exec \"$@\" 3<&0 4>&1 0</dev/null 1>&2";

#[derive(Debug, Clone)]
pub(crate) struct BrowserLaunch {
    /// A loopback site whose requests and WebSockets go through (see `WebConfig::site`).
    pub site: Option<crate::page::Site>,
    pub chromium: PathBuf,
    pub scratch: PathBuf,
    pub readable: Vec<PathBuf>,
    pub confinement: Option<Confinement>,
    pub startup_timeout: Duration,
    pub name: String,
}

#[derive(Debug)]
pub(crate) struct Browser {
    child: Child,
    leader: Option<u32>,
    pub cdp: Cdp,
    pub interceptor: Arc<Interceptor>,
    stderr: OutputTail,
    pub version: String,
}

/// Chromium's own arguments: [`FLAGS`], opened up for the loopback site if there is one,
/// with the profile folder and a blank first page.
fn chromium_arguments(launch: &BrowserLaunch, profile: &Path) -> Vec<OsString> {
    let mut chromium_args: Vec<OsString> = FLAGS.iter().map(OsString::from).collect();
    if let Some(site) = &launch.site {
        // The site's address resolves, and its requests and WebSockets (which Fetch does
        // not see) go to it directly; everything else still goes to the dead proxy.
        let bypass = format!("--proxy-bypass-list=<-loopback>;{}", site.host_port());
        let resolve = format!(
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {}",
            site.host()
        );
        for flag in &mut chromium_args {
            let Some(text) = flag.to_str() else {
                continue;
            };
            if text.starts_with("--proxy-bypass-list=") {
                *flag = OsString::from(&bypass);
            } else if text.starts_with("--host-resolver-rules=") {
                *flag = OsString::from(&resolve);
            }
        }
    }
    let mut user_data = OsString::from("--user-data-dir=");
    user_data.push(profile);
    chromium_args.push(user_data);
    chromium_args.push("about:blank".into());
    chromium_args
}

/// Starts Chromium (through the launcher when confined) behind [`PIPE_SHIM`], with its
/// standard streams piped.
fn spawn(launch: &BrowserLaunch, chromium_args: Vec<OsString>) -> Result<Child, String> {
    let (program, args) = match &launch.confinement {
        Some(confinement) => {
            let readable: Vec<&Path> = launch.readable.iter().map(PathBuf::as_path).collect();
            confinement
                .command_line(
                    &[&launch.scratch],
                    &readable,
                    &launch.chromium,
                    &chromium_args,
                )
                .map_err(|err| err.to_string())?
        }
        None => (launch.chromium.clone(), chromium_args),
    };
    let mut command = Command::new("/bin/sh");
    viga_process::clean_environment(&mut command, &launch.scratch);
    command
        .arg("-c")
        .arg(PIPE_SHIM)
        .arg("viga-chromium")
        .arg(&program)
        .args(&args)
        .current_dir(&launch.scratch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A launcher leads a session of its own; without one Chromium leads its own group.
    if launch.confinement.is_none() {
        command.process_group(0);
    }
    command
        .spawn()
        .map_err(|err| format!("could not run {}: {err}", launch.chromium.display()))
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Browser {
    pub async fn start(launch: &BrowserLaunch) -> Result<Self, String> {
        let profile = launch.scratch.join("profile");
        // Fresh at every start: a restarted browser keeps nothing of the pages before.
        if let Err(err) = std::fs::remove_dir_all(&profile)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            return Err(format!("could not clear Chromium's profile: {err}"));
        }
        let mut child = spawn(launch, chromium_arguments(launch, &profile))?;
        let leader = child.id();
        let (Some(to_browser), Some(from_browser), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("Chromium's pipes could not be opened".to_owned());
        };
        let stderr = OutputTail::follow(stderr, launch.name.clone(), STDERR_LINES);
        let interceptor = Arc::new(Interceptor::new(launch.site.clone()));
        let cdp = Cdp::start(to_browser, from_browser, Arc::clone(&interceptor) as _);
        let mut browser = Self {
            child,
            leader,
            cdp,
            interceptor,
            stderr,
            version: String::new(),
        };
        match tokio::time::timeout(launch.startup_timeout, browser.set_up()).await {
            Ok(Ok(version)) => {
                browser.version = version;
                Ok(browser)
            }
            Ok(Err(err)) => {
                let words = browser.stderr.last_words(Duration::from_secs(2)).await;
                Err(format!("{err}; Chromium's last output:\n{words}"))
            }
            Err(_) => Err(format!(
                "Chromium did not answer within {:?}; its last output:\n{}",
                launch.startup_timeout,
                browser.stderr.text()
            )),
        }
    }

    /// Asks for the version and turns on the interception of every request and the refusal
    /// of downloads; answers the product name.
    async fn set_up(&self) -> Result<String, CdpError> {
        let version = self.cdp.call("Browser.getVersion", json!({}), None).await?;
        // From here on every request of every tab is paused until it is answered.
        self.cdp
            .call(
                "Fetch.enable",
                json!({"patterns": [{"urlPattern": "*"}]}),
                None,
            )
            .await?;
        self.cdp
            .call(
                "Browser.setDownloadBehavior",
                json!({"behavior": "deny"}),
                None,
            )
            .await?;
        Ok(version["product"].as_str().unwrap_or("Chromium").to_owned())
    }

    /// What the containment launcher reported (JSON), if it did.
    pub fn contained_report(&self) -> Option<String> {
        self.stderr.contained_report()
    }

    /// Why the browser is lost after `err`: exited, or a broken pipe.
    pub async fn lost_reason(&mut self, err: &CdpError) -> LostReason {
        match tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await {
            Ok(Ok(status)) => {
                // Reaped: its process id may be reused, so its group is not named again.
                self.leader = None;
                let words = self.stderr.last_words(Duration::from_secs(1)).await;
                LostReason::Exited(format!("{status}; last output:\n{words}"))
            }
            _ => LostReason::Disconnected(err.to_string()),
        }
    }

    /// Kills Chromium and every process of its group (renderers, utilities), once.
    pub fn kill(&mut self) {
        if let Some(leader) = self.leader.take() {
            kill_group(leader);
        }
        let _ = self.child.start_kill();
    }

    pub async fn shutdown(mut self) {
        let close = self.cdp.call("Browser.close", json!({}), None);
        let _ = tokio::time::timeout(Duration::from_secs(2), close).await;
        self.kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
    }
}
