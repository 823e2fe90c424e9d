//! Containment on Linux: a session of its own, a user namespace with network, mount and PID
//! namespaces inside it (nix's safe `unshare` and `mount`), and Landlock (the `landlock`
//! crate) for reads, writes, TCP and UDP, signals and abstract sockets.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible as _, LandlockStatus,
    RestrictionStatus, Ruleset, RulesetAttr as _, RulesetCreatedAttr as _, RulesetError,
    RulesetStatus, Scope, path_beneath_rules,
};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

pub(crate) use crate::cgroup::oom_killed;
use crate::launch::{Guards, Plan};
use crate::{ContainError, Guard, Half};

/// Newest Landlock ABI this code asks for; an older kernel gets what it has.
const WANTED_ABI: ABI = ABI::V10;

/// Folders hidden behind an empty file system in every contained program: where the
/// session's sockets live (the display's, the bus's, daemons', agents').
const ALWAYS_HIDDEN: [&str; 5] = ["/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"];

/// What every program may read and run: the system's programs and libraries.
const SYSTEM_PROGRAMS: [&str; 9] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/nix/store",
    "/gnu/store",
];

/// What of `/etc` a program needs to start, find libraries, fonts, its user, the time zone
/// and its locale; nothing else there (host keys, other programs' secrets) is readable.
const SYSTEM_SETTINGS: [&str; 29] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/fonts",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/machine-id",
    "/etc/ssl/openssl.cnf",
    "/etc/ssl/certs",
    "/etc/OpenCL",
    "/etc/vulkan",
    "/etc/glvnd",
    "/etc/drirc",
];

/// What of `/sys` a program needs: the processors and memory nodes (thread pools size
/// themselves from them), its cgroup's limits, and the GPU's devices and driver.
const SYSTEM_DEVICES_INFO: [&str; 7] = [
    "/sys/devices/system/cpu",
    "/sys/devices/system/node",
    "/sys/fs/cgroup",
    "/sys/class/drm",
    "/sys/bus/pci",
    "/sys/dev/char",
    "/sys/module/nvidia",
];

/// Devices anything may write to (nothing is created in `/dev`, and no other device, a
/// terminal above all, can be opened for writing).
const SINKS: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// Devices anything may read.
const SOURCES: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// GPU devices, written to and driven by ioctl when a program renders on a GPU.
fn gpu_devices() -> Vec<PathBuf> {
    let mut devices: Vec<PathBuf> = ["/dev/dri", "/dev/kfd"].map(PathBuf::from).to_vec();
    if let Ok(listing) = std::fs::read_dir("/dev") {
        devices.extend(
            listing
                .flatten()
                .filter(|entry| entry.file_name().to_string_lossy().starts_with("nvidia"))
                .map(|entry| entry.path()),
        );
    }
    devices.retain(|device| device.exists());
    devices
}

/// The PCI devices' folders, which `/sys/class/drm` and `/sys/bus/pci` link into.
fn pci_device_folders() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/devices")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("pci"))
        .map(|entry| entry.path())
        .collect()
}

pub(crate) fn contain(plan: &Plan) -> Result<Guards, ContainError> {
    leave_terminal()?;
    // Before the user namespace: the cgroup's files belong to the host's user.
    let leaf = crate::enforce::cgroup_leaf(plan);
    let namespaces = Namespaces::enter(plan)?;
    // After it: RLIMIT_NPROC then counts the processes of this namespace alone.
    let context = crate::enforce::Context {
        leaf: &leaf,
        own_user_namespace: namespaces.user,
    };
    let limits = crate::enforce::limits(plan, &context);
    let mut unix_sockets = match &namespaces.mount {
        Ok(()) => hide(plan),
        Err(why) => Guard::absent(why.clone()),
    };
    // Before Landlock, which allows no mount.
    let (init, processes) = own_proc(&namespaces);
    let mut network = namespaces.network;
    let (writes, reads, abi) = restrict(plan)?;
    if !network.active && plan.wants(Half::Network) {
        network = match abi {
            Some(abi) if abi >= ABI::V10 => Guard::active(format!(
                "TCP and UDP denied by Landlock {abi:?} ({})",
                network.detail
            )),
            Some(abi) if abi >= ABI::V4 => Guard::absent(format!(
                "{}; Landlock {abi:?} denies TCP but cannot deny UDP (name lookups and datagrams go out)",
                network.detail
            )),
            _ => network,
        };
    }
    if !unix_sockets.active && plan.wants(Half::UnixSockets) {
        unix_sockets = match abi {
            Some(abi) if abi >= ABI::V9 => Guard::active(format!(
                "connecting to a Unix socket by path denied by Landlock {abi:?} ({})",
                unix_sockets.detail
            )),
            _ => unix_sockets,
        };
    }
    Ok(Guards {
        network,
        writes,
        reads,
        unix_sockets,
        processes,
        limits,
        cgroup: leaf.ok().map(|leaf| leaf.dir),
        init,
    })
}

/// A `/proc` of the program's own PID namespace over the machine's, so it lists no process
/// but the program's (nor their command lines). A procfs mount names its PID namespace by a
/// process in it (Linux 6.18's `pidns=` option; before, the mounting process's own), and
/// the launcher is not in it and cannot fork without unsafe code: so a placeholder first
/// process is started in it (`cat` reading a pipe only the launcher holds), and the program
/// comes second. When the launcher closes the pipe (the program ended), or is killed, the
/// placeholder ends, and the kernel ends every process left in the namespace. (Landlock
/// would not let the launcher signal it: it was started before the launcher restricted
/// itself.) Returns the placeholder and the processes' guard, saying whether `/proc` is the
/// namespace's own.
fn own_proc(namespaces: &Namespaces) -> (Option<std::process::Child>, Guard) {
    use std::process::{Command, Stdio};
    let guard = namespaces.processes.clone();
    if !guard.active || namespaces.mount.is_err() {
        return (None, guard);
    }
    let with = |note: String| Guard::active(format!("{}; {note}", guard.detail));
    let Some(cat) = ["/usr/bin/cat", "/bin/cat"]
        .into_iter()
        .find(|path| Path::new(path).is_file())
    else {
        return (
            None,
            with(machine_proc("no cat program to hold the namespace")),
        );
    };
    let started = Command::new(cat)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut init = match started {
        Ok(init) => init,
        Err(err) => {
            return (
                None,
                with(machine_proc(&format!("{cat} did not start: {err}"))),
            );
        }
    };
    let options = format!("pidns=/proc/{}/ns/pid", init.id());
    let mounted = mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(options.as_str()),
    );
    match mounted {
        Ok(()) => (
            Some(init),
            with("a /proc of its own that lists only its processes".to_owned()),
        ),
        Err(errno) => {
            // The program is then the namespace's first process, as without the mount.
            drop(init.stdin.take());
            let _ = init.wait();
            let why = format!("this kernel mounts no /proc for another PID namespace ({errno})");
            (None, with(machine_proc(&why)))
        }
    }
}

/// The note of a `/proc` that stays the machine's.
fn machine_proc(why: &str) -> String {
    format!("/proc lists every process of the machine and their command lines ({why})")
}

/// A session of its own, without a controlling terminal: a program cannot open
/// `/dev/tty` and type into the shell viga was started from.
fn leave_terminal() -> Result<(), ContainError> {
    nix::unistd::setsid().map(drop).map_err(|errno| {
        ContainError::Setup(format!("could not leave the terminal's session ({errno})"))
    })
}

/// What the namespaces gave.
struct Namespaces {
    /// A user namespace of its own.
    user: bool,
    network: Guard,
    /// A mount namespace of its own, or why not.
    mount: Result<(), String>,
    processes: Guard,
}

impl Namespaces {
    /// A new user namespace (mapping only this user, so files keep their owner), and
    /// inside it a network namespace (no interface but a loopback that is down), a mount
    /// namespace (to hide the session's sockets) and a PID namespace for what the launcher
    /// starts next (whose first process takes every other one with it when it ends).
    fn enter(plan: &Plan) -> Result<Self, ContainError> {
        let left_out = |half: Half| format!("left out on purpose ({half} off for a test)");
        let wanted = [Half::Network, Half::UnixSockets, Half::Processes];
        if wanted.iter().all(|half| !plan.wants(*half)) {
            return Ok(Self {
                user: false,
                network: Guard::absent(left_out(Half::Network)),
                mount: Err(left_out(Half::UnixSockets)),
                processes: Guard::absent(left_out(Half::Processes)),
            });
        }
        if let Err(why) = enter_user_namespace()? {
            return Ok(Self {
                user: false,
                network: Guard::absent(why.clone()),
                mount: Err(why.clone()),
                processes: Guard::absent(format!(
                    "{why}; a process that leaves the program's process group outlives it"
                )),
            });
        }
        let network = if !plan.wants(Half::Network) {
            Guard::absent(left_out(Half::Network))
        } else {
            match unshare(CloneFlags::CLONE_NEWNET) {
                Ok(()) => Guard::active("own network namespace, no interfaces"),
                Err(errno) => Guard::absent(format!("no network namespace ({errno})")),
            }
        };
        let mount = if !plan.wants(Half::UnixSockets) {
            Err(left_out(Half::UnixSockets))
        } else {
            unshare(CloneFlags::CLONE_NEWNS)
                .map_err(|errno| format!("no mount namespace ({errno})"))
        };
        let processes = if !plan.wants(Half::Processes) {
            Guard::absent(left_out(Half::Processes))
        } else {
            match unshare(CloneFlags::CLONE_NEWPID) {
                Ok(()) => Guard::active(
                    "own PID namespace: every process the program starts ends with it, one in a session of its own too",
                ),
                Err(errno) => Guard::absent(format!(
                    "no PID namespace ({errno}); a process that leaves the program's process group outlives it"
                )),
            }
        };
        Ok(Self {
            user: true,
            network,
            mount,
            processes,
        })
    }
}

/// Enters a user namespace that maps this user to itself. The outer error ends the launch
/// (a namespace entered without its maps could not create a file); the inner one says why
/// there is none.
fn enter_user_namespace() -> Result<Result<(), String>, ContainError> {
    if let Some(why) = user_namespaces_restricted() {
        return Ok(Err(why));
    }
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    if let Err(errno) = unshare(CloneFlags::CLONE_NEWUSER) {
        return Ok(Err(format!("no user namespace: unshare failed ({errno})")));
    }
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|err| {
            ContainError::Setup(format!(
                "entered a user namespace but could not write {file}: {err}"
            ))
        })
    };
    write("/proc/self/setgroups", "deny".to_owned())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(Ok(()))
}

/// Why this kernel will not give an unprivileged process a usable user namespace, when a
/// setting says so up front (trying would leave the launcher in a namespace where it cannot
/// create files).
fn user_namespaces_restricted() -> Option<String> {
    let setting = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim().to_owned())
    };
    if setting("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Some("user namespaces are disabled (user.max_user_namespaces = 0)".to_owned());
    }
    if setting("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Some(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
                .to_owned(),
        );
    }
    if setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Some(
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
                .to_owned(),
        );
    }
    None
}

/// One folder to hide, and the paths beneath it the program needs, put back in place.
#[derive(Debug, PartialEq)]
struct Mask {
    folder: PathBuf,
    put_back: Vec<PathBuf>,
}

/// Which folders to hide and what to put back in each. A folder inside another hidden one
/// is covered by it; a folder the program needs whole (it, or a folder above it, is
/// readable or writable) is not hidden, and is returned apart.
fn masks(hidden: &[PathBuf], needed: &[PathBuf]) -> (Vec<Mask>, Vec<PathBuf>) {
    let mut folders: Vec<&PathBuf> = hidden.iter().collect();
    folders.sort();
    folders.dedup();
    let mut masks: Vec<Mask> = Vec::new();
    let mut kept_visible = Vec::new();
    for folder in folders {
        if masks.iter().any(|mask| folder.starts_with(&mask.folder)) {
            continue;
        }
        if needed.iter().any(|path| folder.starts_with(path)) {
            kept_visible.push(folder.clone());
            continue;
        }
        let mut beneath: Vec<&PathBuf> = needed
            .iter()
            .filter(|path| path.starts_with(folder))
            .collect();
        beneath.sort();
        let mut put_back: Vec<PathBuf> = Vec::new();
        for path in beneath {
            if !put_back.iter().any(|outer| path.starts_with(outer)) {
                put_back.push(path.clone());
            }
        }
        masks.push(Mask {
            folder: folder.clone(),
            put_back,
        });
    }
    (masks, kept_visible)
}

/// Hides the session's socket folders behind empty file systems (in the mount namespace
/// just entered), putting back what the program needs beneath them, so no pathname Unix
/// socket of the session can be reached: Landlock before ABI 9 does not cover connecting
/// to one.
fn hide(plan: &Plan) -> Guard {
    // Changes made here stay in this namespace.
    if let Err(errno) = mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    ) {
        return Guard::absent(format!(
            "the mounts could not be made private ({errno}); the session's sockets stay reachable"
        ));
    }
    let mut hidden: Vec<PathBuf> = ALWAYS_HIDDEN
        .iter()
        .map(PathBuf::from)
        .chain(plan.hidden.iter().cloned())
        .filter_map(|folder| folder.canonicalize().ok())
        .filter(|folder| folder.is_dir())
        .collect();
    hidden.sort();
    hidden.dedup();
    let needed = plan.needed();
    let (masks, kept_visible) = masks(&hidden, &needed);
    let mut done = Vec::new();
    for mask in &masks {
        if let Err(why) = apply(mask) {
            return Guard::absent(format!("{why}; the session's sockets stay reachable"));
        }
        done.push(mask.folder.display().to_string());
    }
    reenter_working_folder();
    if !kept_visible.is_empty() {
        let kept: Vec<String> = kept_visible
            .iter()
            .map(|folder| folder.display().to_string())
            .collect();
        return Guard::absent(format!(
            "hidden: {}; not hidden, because the program reads or writes it whole: {}",
            done.join(", "),
            kept.join(", ")
        ));
    }
    Guard::active(format!(
        "own mount namespace; hidden behind empty folders: {}",
        done.join(", ")
    ))
}

/// Puts an empty file system over `mask.folder` and its needed paths back in place. On a
/// failure the folder is left as it was.
fn apply(mask: &Mask) -> Result<(), String> {
    // Held before the folder is covered: afterwards it could not be named.
    let held: Vec<(OwnedFd, &PathBuf)> = mask
        .put_back
        .iter()
        .map(|path| hold(path).map(|fd| (fd, path)))
        .collect::<Result<_, _>>()?;
    mount(
        Some("tmpfs"),
        &mask.folder,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=755,size=1m"),
    )
    .map_err(|errno| format!("{} could not be hidden ({errno})", mask.folder.display()))?;
    for (fd, path) in &held {
        if let Err(why) = put_back(fd, path) {
            // Blender could not find its own files under an empty folder: show it again.
            let _ = umount2(&mask.folder, MntFlags::MNT_DETACH);
            return Err(why);
        }
    }
    Ok(())
}

/// A handle on `path` that names it after it is covered.
fn hold(path: &Path) -> Result<OwnedFd, String> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    open(
        path,
        OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|errno| format!("{} could not be opened ({errno})", path.display()))
}

/// Binds the held `path` at its own name again, on the empty file system over it.
fn put_back(fd: &OwnedFd, path: &Path) -> Result<(), String> {
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        format!("{} could not be put back: {what} ({err})", path.display())
    };
    let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    if source.is_dir() {
        std::fs::create_dir_all(path).map_err(|err| failed("no mount point", &err))?;
    } else {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|err| failed("no mount point", &err))?;
        }
        std::fs::File::create(path).map_err(|err| failed("no mount point", &err))?;
    }
    mount(
        Some(&source),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|errno| failed("bind", &errno))
}

/// The working folder is still the one of the old view, through which a relative path
/// would reach what is now hidden: enter it again by name (or `/`, when it is hidden).
fn reenter_working_folder() {
    let again = std::env::current_dir()
        .ok()
        .filter(|folder| std::env::set_current_dir(folder).is_ok());
    if again.is_none() {
        let _ = std::env::set_current_dir("/");
    }
}

/// Landlock over reads, writes, TCP and UDP, signals and abstract Unix sockets, as far as
/// the plan wants them. Returns the writes' and the reads' guards and the ABI in force.
fn restrict(plan: &Plan) -> Result<(Guard, Guard, Option<ABI>), ContainError> {
    let status = enforce(plan).map_err(|err| ContainError::Setup(format!("Landlock: {err}")))?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => Some(effective_abi),
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => None,
    };
    let enforcement = match (status.ruleset, abi) {
        (RulesetStatus::NotEnforced, _) | (_, None) => Err(why_not_enforced(status.landlock)),
        (enforced, Some(abi)) => Ok((enforced, abi)),
    };
    Ok((
        writes_guard(plan, &enforcement),
        reads_guard(plan, &enforcement),
        abi,
    ))
}

/// Landlock's rights to read a file or folder, and to run a file.
fn read_access() -> BitFlags<AccessFs> {
    AccessFs::from_read(WANTED_ABI)
}

/// Landlock's rights to read without running.
fn reading_access() -> BitFlags<AccessFs> {
    read_access() & !AccessFs::Execute
}

/// Landlock's rights to write, make and remove, but not to connect to a Unix socket by path
/// (Landlock ABI 9), which is granted nowhere.
fn write_access() -> BitFlags<AccessFs> {
    AccessFs::from_write(WANTED_ABI) & !AccessFs::ResolveUnix
}

/// The rights Landlock refuses unless a rule grants them: those of the halves the plan
/// wants. A half left out (for a test) is not handled, so nothing of it is refused.
fn handled_access(plan: &Plan) -> (BitFlags<AccessFs>, BitFlags<AccessNet>) {
    let mut files: BitFlags<AccessFs> = BitFlags::empty();
    if plan.wants(Half::Reads) {
        files |= read_access();
    }
    if plan.wants(Half::Writes) {
        files |= write_access();
    }
    if plan.wants(Half::UnixSockets) {
        files |= AccessFs::ResolveUnix;
    }
    let mut network: BitFlags<AccessNet> = BitFlags::empty();
    if plan.wants(Half::Network) {
        network = AccessNet::BindTcp
            | AccessNet::ConnectTcp
            | AccessNet::BindUdp
            | AccessNet::ConnectSendUdp;
    }
    (files, network)
}

/// Which paths keep which rights: the parts of the system every program needs, the
/// plan's inputs, and its writable folders.
fn path_rules(plan: &Plan) -> [(Vec<PathBuf>, BitFlags<AccessFs>); 10] {
    let read = read_access();
    let reading = reading_access();
    [
        (paths(&SYSTEM_PROGRAMS), read),
        (paths(&SYSTEM_SETTINGS), reading),
        (paths(&SYSTEM_DEVICES_INFO), reading),
        (pci_device_folders(), reading),
        (vec![PathBuf::from("/proc")], reading),
        (paths(&SOURCES), reading),
        (paths(&SINKS), reading | AccessFs::WriteFile),
        (
            gpu_devices(),
            reading | AccessFs::WriteFile | AccessFs::IoctlDev,
        ),
        (plan.readable(), read),
        // Writable folders are readable too, but nothing written there may be run.
        (plan.writable(), reading | write_access()),
    ]
}

/// Builds the ruleset the plan asks for (its rights, its paths' rules, signals and
/// abstract Unix sockets scoped) and restricts this process with it.
fn enforce(plan: &Plan) -> Result<RestrictionStatus, RulesetError> {
    let (handled, network) = handled_access(plan);
    let rules = path_rules(plan);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)?;
    if !network.is_empty() {
        ruleset = ruleset.handle_access(network)?;
    }
    let mut created = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?;
    for (paths, access) in rules {
        // A right not handled (a half left out) needs no rule.
        let access = access & handled;
        if !access.is_empty() {
            created = created.add_rules(path_beneath_rules(paths, access))?;
        }
    }
    created.restrict_self()
}

/// How far Landlock holds once restricted: how fully the ruleset is enforced and under
/// which ABI, or why it holds nothing.
type Enforcement = Result<(RulesetStatus, ABI), &'static str>;

/// Why Landlock holds nothing after this process restricted itself.
fn why_not_enforced(landlock: LandlockStatus) -> &'static str {
    match landlock {
        LandlockStatus::NotEnabled => "Landlock is built into this kernel but not enabled",
        LandlockStatus::NotImplemented => "this kernel has no Landlock",
        LandlockStatus::Available { .. } => "Landlock did not enforce the rules",
    }
}

/// What a partly enforced ruleset adds to a guard's detail.
fn newer_rights_missing(enforced: &RulesetStatus) -> &'static str {
    if *enforced == RulesetStatus::PartiallyEnforced {
        "; rights of newer Landlock versions are not available on this kernel"
    } else {
        ""
    }
}

/// The writes' guard: where the program may write, or why it may write anywhere.
fn writes_guard(plan: &Plan, enforcement: &Enforcement) -> Guard {
    if !plan.wants(Half::Writes) {
        return Guard::absent("left out on purpose (writes off for a test)");
    }
    match enforcement {
        Ok((enforced, abi)) => Guard::active(format!(
            "Landlock {abi:?}: {}{}",
            match listed(&plan.writable()) {
                Some(folders) => format!("writes only in {folders}"),
                None => "writes nowhere".to_owned(),
            },
            newer_rights_missing(enforced)
        )),
        Err(why) => Guard::absent(*why),
    }
}

/// The reads' guard: what the program may read, or why it may read anything.
fn reads_guard(plan: &Plan, enforcement: &Enforcement) -> Guard {
    if !plan.wants(Half::Reads) {
        return Guard::absent("left out on purpose (reads off for a test)");
    }
    match enforcement {
        Ok((_, abi)) => Guard::active(format!(
            "Landlock {abi:?}: reads only in the system's programs, libraries and devices, part of /etc and /sys, /proc{}",
            listed(&plan.needed())
                .map(|folders| format!(", and {folders}"))
                .unwrap_or_default()
        )),
        Err(why) => Guard::absent(*why),
    }
}

/// The signals that ask the launcher to stop, blocked and turned into a file it reads
/// between looks at its program ([`stop_asked`]), instead of ending the launcher and
/// leaving the program without a parent that stops it. (No thread can wait for them: after
/// entering a PID namespace the launcher cannot start one.) Called once the program has
/// started, which would otherwise inherit the blocked signals.
pub(crate) fn hold_stop_signals() -> Option<SignalFd> {
    let mut signals = SigSet::empty();
    for signal in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        signals.add(signal);
    }
    signals.thread_block().ok()?;
    SignalFd::with_flags(&signals, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok()
}

/// Whether the launcher was told to stop since it last looked.
pub(crate) fn stop_asked(held: &Option<SignalFd>) -> bool {
    held.as_ref()
        .is_some_and(|signals| matches!(signals.read_signal(), Ok(Some(_))))
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

/// The paths, comma-separated; `None` for none.
fn listed(paths: &[PathBuf]) -> Option<String> {
    (!paths.is_empty()).then(|| {
        paths
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_put_back_what_is_needed_and_keep_visible_what_is_needed_whole() {
        let hidden = paths(&["/tmp", "/run", "/run/user/1000", "/home/ada", "/srv"]);
        let needed = paths(&[
            "/tmp/viga-worker-1",
            "/tmp/viga-worker-1/renders",
            "/tmp/base.blend",
            "/home/ada/.pyenv/versions/3.11",
            "/work/venv",
            "/",
        ]);
        // `/` is needed whole only in this made-up case; take it out to see the masks.
        let (masks_without_root, kept) = masks(&hidden, &needed[..5]);
        assert!(kept.is_empty());
        assert_eq!(
            masks_without_root,
            vec![
                Mask {
                    folder: PathBuf::from("/home/ada"),
                    put_back: paths(&["/home/ada/.pyenv/versions/3.11"]),
                },
                Mask {
                    folder: PathBuf::from("/run"),
                    put_back: Vec::new(),
                },
                Mask {
                    folder: PathBuf::from("/srv"),
                    put_back: Vec::new(),
                },
                Mask {
                    folder: PathBuf::from("/tmp"),
                    put_back: paths(&["/tmp/base.blend", "/tmp/viga-worker-1"]),
                },
            ]
        );
        let (with_root, kept) = masks(&hidden, &needed);
        assert!(with_root.is_empty());
        assert_eq!(
            kept,
            paths(&["/home/ada", "/run", "/run/user/1000", "/srv", "/tmp"])
        );
    }
}
