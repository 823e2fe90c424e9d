//! The browser and its tab behind the worker's calls: opening a tab at a viewport, running
//! a script in the page's isolated world, and what a call that failed costs (its tab, or
//! the browser, which is then restarted).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use viga_process::{LostReason, Recovery, WorkerLost};

use crate::browser::{Browser, BrowserLaunch};
use crate::cdp::CdpError;
use crate::page::Viewport;

use super::{Failure, State, TAB_CLOSE_LIMIT, Tab, WebError, WebWorker};

impl WebWorker {
    /// Turns a step's outcome into the caller's result, recovering from a lost step: a step
    /// that ran out of time costs its tab (or, if the browser does not answer, the browser);
    /// a broken connection costs the browser.
    pub(super) async fn settle<T>(
        &self,
        state: &mut State,
        op: &'static str,
        limit: Duration,
        outcome: Result<Result<T, Failure>, tokio::time::error::Elapsed>,
    ) -> Result<T, WebError> {
        let reason = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(Failure::Refused(message))) => return Err(WebError::Refused(message)),
            Ok(Err(Failure::Page(err))) => return Err(err),
            Ok(Err(Failure::Lost(reason))) => reason,
            Err(_) => LostReason::Timeout(limit),
        };
        let browser_up = state.browser.is_some();
        let recovery = if matches!(reason, LostReason::Timeout(_))
            && browser_up
            && self.close_tab(state).await
        {
            Recovery::ProcessKept
        } else {
            self.restart(state).await
        };
        let reason = match (reason, state.browser.as_mut()) {
            (LostReason::Disconnected(why), Some(browser)) => {
                browser.lost_reason(&CdpError::Closed(why)).await
            }
            (reason, _) => reason,
        };
        tracing::warn!(worker = %self.config.name, op, %reason, %recovery, "page stopped");
        Err(WebError::Lost(WorkerLost {
            worker: "the page",
            op,
            reason,
            recovery,
        }))
    }

    /// Closes the tab and its browser context; false when the browser does not answer.
    pub(super) async fn close_tab(&self, state: &mut State) -> bool {
        let Some(tab) = state.tab.take() else {
            return true;
        };
        let Some(browser) = state.browser.as_ref() else {
            return false;
        };
        let close = async {
            browser
                .cdp
                .call("Target.closeTarget", json!({"targetId": tab.target}), None)
                .await?;
            browser
                .cdp
                .call(
                    "Target.disposeBrowserContext",
                    json!({"browserContextId": tab.context}),
                    None,
                )
                .await
        };
        matches!(
            tokio::time::timeout(TAB_CLOSE_LIMIT, close).await,
            Ok(Ok(_))
        )
    }

    pub(super) async fn restart(&self, state: &mut State) -> Recovery {
        state.tab = None;
        if let Some(mut browser) = state.browser.take() {
            browser.kill();
        }
        self.restarts.fetch_add(1, Ordering::Relaxed);
        match Browser::start(&self.launch()).await {
            Ok(browser) => {
                state.browser = Some(browser);
                // A browser keeps no state between calls: nothing to restore.
                Recovery::Restarted {
                    restored_checkpoint: None,
                }
            }
            Err(why) => Recovery::RestartFailed(why),
        }
    }

    /// The tab, made (with a browser context of its own) when there is none, at `viewport`.
    pub(super) async fn open_tab(
        &self,
        state: &mut State,
        viewport: Viewport,
    ) -> Result<Tab, Failure> {
        if state.browser.is_none() {
            // An earlier restart failed: try again.
            let browser = Browser::start(&self.launch())
                .await
                .map_err(|why| Failure::Page(WebError::Start(why)))?;
            state.browser = Some(browser);
        }
        if let Some(tab) = state.tab.as_mut() {
            if tab.viewport != viewport {
                let browser = state.browser.as_ref().ok_or_else(|| {
                    Failure::Lost(LostReason::Disconnected("no browser".to_owned()))
                })?;
                set_viewport(browser, &tab.session, viewport).await?;
                tab.viewport = viewport;
            }
            return Ok(tab.clone());
        }
        let browser = browser_of(state)?;
        let context = browser
            .cdp
            .call("Target.createBrowserContext", json!({}), None)
            .await?;
        let context = string_field(&context, "browserContextId")?;
        let target = browser
            .cdp
            .call(
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": context}),
                None,
            )
            .await?;
        let target = string_field(&target, "targetId")?;
        let attached = browser
            .cdp
            .call(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
                None,
            )
            .await?;
        let session = string_field(&attached, "sessionId")?;
        for domain in ["Page.enable", "Runtime.enable", "Network.enable"] {
            browser.cdp.call(domain, json!({}), Some(&session)).await?;
        }
        set_viewport(browser, &session, viewport).await?;
        let tab = Tab {
            context,
            target,
            session,
            viewport,
            world: None,
            loaded: false,
        };
        state.tab = Some(tab.clone());
        Ok(tab)
    }

    pub(super) fn launch(&self) -> BrowserLaunch {
        BrowserLaunch {
            site: self.site.clone(),
            chromium: self.config.chromium.clone(),
            scratch: self.root.path().to_path_buf(),
            readable: self.readable.clone(),
            confinement: self.config.confinement.clone(),
            startup_timeout: self.config.startup_timeout,
            name: self.config.name.clone(),
        }
    }
}

pub(super) fn browser_of(state: &State) -> Result<&Browser, Failure> {
    state
        .browser
        .as_ref()
        .ok_or_else(|| Failure::Lost(LostReason::Disconnected("no browser".to_owned())))
}
pub(super) fn string_field(value: &Value, field: &str) -> Result<String, Failure> {
    value[field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure::Refused(format!("no {field} in Chromium's answer")))
}

pub(super) async fn set_viewport(
    browser: &Browser,
    session: &str,
    viewport: Viewport,
) -> Result<(), Failure> {
    let metrics = json!({
        "width": viewport.width,
        "height": viewport.height,
        "deviceScaleFactor": 1,
        "mobile": false,
    });
    browser
        .cdp
        .call("Emulation.setDeviceMetricsOverride", metrics, Some(session))
        .await?;
    Ok(())
}

/// A world of its own in the page's main frame: the page's scripts cannot replace the DOM
/// functions the verifier's queries call there.
pub(super) async fn isolated_world(browser: &Browser, session: &str) -> Result<i64, Failure> {
    let tree = browser
        .cdp
        .call("Page.getFrameTree", json!({}), Some(session))
        .await?;
    let frame = tree["frameTree"]["frame"]["id"].clone();
    let world = browser
        .cdp
        .call(
            "Page.createIsolatedWorld",
            json!({"frameId": frame, "worldName": "viga-inspect"}),
            Some(session),
        )
        .await?;
    world["executionContextId"]
        .as_i64()
        .ok_or_else(|| Failure::Refused("no isolated world".to_owned()))
}

pub(super) async fn evaluate(
    browser: &Browser,
    session: &str,
    world: Option<i64>,
    expression: &str,
) -> Result<Value, Failure> {
    let mut params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
    if let Some(world) = world {
        params["contextId"] = json!(world);
    }
    let mut reply = browser
        .cdp
        .call("Runtime.evaluate", params, Some(session))
        .await?;
    if let Some(details) = reply.get("exceptionDetails") {
        let text = details["exception"]["description"]
            .as_str()
            .or_else(|| details["text"].as_str())
            .unwrap_or("an exception");
        return Err(Failure::Refused(format!("the query raised {text}")));
    }
    Ok(reply["result"]["value"].take())
}
