//! Killing a worker's process and everything it started. Each worker process is started as
//! the leader of a process group of its own (a containment launcher makes it a session
//! leader, which is the same), so its helpers (LibreOffice's threads are one process, but
//! Chromium has a zygote, renderers and utility processes, and a python-pptx program may
//! start anything) go with it.

/// SIGKILLs the process group `leader` leads, leader included. A group already gone is fine.
#[cfg(unix)]
pub fn kill_group(leader: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    // Group 0 or 1 would mean this process's own group or init's: never a worker's.
    if let Ok(group) = i32::try_from(leader)
        && group > 1
    {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
}

#[cfg(not(unix))]
pub fn kill_group(_leader: u32) {}

/// How a child that was waited for ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(std::process::ExitStatus),
    /// Still running at the limit: killed.
    TimedOut,
}

/// Waits up to `limit` for `child` (the leader of its own process group) to exit, then kills
/// its whole group, so nothing it started outlives it, and reaps it. The group is killed
/// while the leader is still unreaped (`waitid` with `WNOWAIT`), so the group id cannot have
/// been given to another process in between.
#[cfg(target_os = "linux")]
pub async fn wait_then_kill_group(
    child: &mut tokio::process::Child,
    limit: std::time::Duration,
) -> std::io::Result<Ended> {
    let Some(leader) = child.id() else {
        // Already reaped: nothing of its group can be named safely any more.
        return child.wait().await.map(Ended::Exited);
    };
    let exited = tokio::task::spawn_blocking(move || exit_without_reaping(leader));
    let timed_out = tokio::time::timeout(limit, exited).await.is_err();
    kill_group(leader);
    let status = child.wait().await?;
    Ok(if timed_out {
        Ended::TimedOut
    } else {
        Ended::Exited(status)
    })
}

/// Blocks until the process `leader` has exited, leaving it unreaped.
#[cfg(target_os = "linux")]
fn exit_without_reaping(leader: u32) {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    if let Ok(pid) = i32::try_from(leader) {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        // Any other error (no such child) ends the wait too; the caller reaps.
        while let Err(nix::errno::Errno::EINTR) =
            waitid(Id::Pid(nix::unistd::Pid::from_raw(pid)), flags)
        {}
    }
}

/// Elsewhere the group is killed only at the limit: a leader that exits on its own is
/// reaped by the wait, and its group id may then be reused.
#[cfg(not(target_os = "linux"))]
pub async fn wait_then_kill_group(
    child: &mut tokio::process::Child,
    limit: std::time::Duration,
) -> std::io::Result<Ended> {
    match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => status.map(Ended::Exited),
        Err(_) => {
            if let Some(leader) = child.id() {
                kill_group(leader);
            }
            child.wait().await?;
            Ok(Ended::TimedOut)
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_at_the_limit_or_the_exit() {
        let mut quick = tokio::process::Command::new("/bin/sh")
            .args(["-c", "exit 3"])
            .process_group(0)
            .spawn()
            .unwrap();
        let ended = wait_then_kill_group(&mut quick, std::time::Duration::from_secs(30))
            .await
            .unwrap();
        assert!(matches!(ended, Ended::Exited(status) if status.code() == Some(3)));
        let mut endless = tokio::process::Command::new("/bin/sh")
            .args(["-c", "while :; do :; done"])
            .process_group(0)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let ended = wait_then_kill_group(&mut endless, std::time::Duration::from_millis(200))
            .await
            .unwrap();
        assert_eq!(ended, Ended::TimedOut);
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[tokio::test]
    async fn the_whole_group_dies() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        // The shell starts a grandchild that would outlive it, then waits.
        let mut child = tokio::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("sleep 60 & echo $! > {}; wait", pid_file.display()))
            .process_group(0)
            .spawn()
            .unwrap();
        let leader = child.id().unwrap();
        while !pid_file.exists() || std::fs::read_to_string(&pid_file).unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let grandchild: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        kill_group(leader);
        child.wait().await.unwrap();
        // The grandchild was reparented and killed; give the kernel a moment to reap it.
        let mut alive = true;
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat"));
            alive = stat.is_ok_and(|stat| !stat.contains(") Z "));
            if !alive {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!alive, "the grandchild {grandchild} outlived its group");
    }
}
