//! How each limit is made to hold on Linux: a cgroup v2 leaf where one is delegated
//! (memory, processes), else resource limits the program inherits; the written size is the
//! launcher's to watch ([`crate::launch`]).

use std::path::PathBuf;

use nix::sys::resource::{Resource, setrlimit};

use crate::cgroup::{CGROUP_ROOT, Setting, delegated, make_leaf};
use crate::launch::{Plan, SUPERVISION_PERIOD};
use crate::{Enforcement, Limit, LimitGuard, LimitsStatus, show_size};

/// A cgroup leaf this launcher moved into, with the controllers it bounds.
#[derive(Debug)]
pub(crate) struct Leaf {
    pub dir: PathBuf,
}

/// Makes a cgroup v2 leaf bounding memory and processes and moves this launcher into it
/// (everything it starts is then inside), when the plan asks for either and a cgroup is
/// delegated. Run before the user namespace: the cgroup's files belong to the host's user.
pub(crate) fn cgroup_leaf(plan: &Plan) -> Result<Leaf, String> {
    let limits = plan.limits;
    if limits.memory.is_none() && limits.processes.is_none() {
        return Err("no memory or process limit asked for".to_owned());
    }
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|err| format!("/proc/self/cgroup is unreadable ({err})"))?;
    let root = PathBuf::from(CGROUP_ROOT);
    let parent = delegated(&root, &own, &["memory", "pids"])?;
    let mut settings = Vec::new();
    if let Some(memory) = limits.memory {
        settings.push(Setting::needed("memory.max", memory));
        // Swap would let the program go past the limit at the machine's expense (a kernel
        // without swap accounting has no such file).
        settings.push(Setting::if_there("memory.swap.max", 0));
        // Not memory.oom.group: the launcher is in the leaf too, and must outlive an
        // out-of-memory kill to say which limit the program went past.
    }
    if let Some(processes) = limits.processes {
        settings.push(Setting::needed("pids.max", processes));
    }
    make_leaf(&parent, std::process::id(), &settings).map(|dir| Leaf { dir })
}

/// What the namespaces gave that the limits depend on.
pub(crate) struct Context<'a> {
    /// The cgroup leaf, or why there is none.
    pub leaf: &'a Result<Leaf, String>,
    /// The launcher is in a user namespace of its own (process counts are then its own).
    pub own_user_namespace: bool,
}

/// Sets the resource limits the program inherits and says how each limit holds.
pub(crate) fn limits(plan: &Plan, context: &Context) -> LimitsStatus {
    let asked = plan.limits;
    let guard = |limit: Limit, make: &dyn Fn(u64) -> LimitGuard| match asked.get(limit) {
        None => LimitGuard::unlimited(),
        Some(value) => make(value),
    };
    LimitsStatus {
        memory: guard(Limit::Memory, &|value| memory(value, context)),
        processes: guard(Limit::Processes, &|value| processes(value, context)),
        file_size: guard(Limit::FileSize, &file_size),
        scratch: guard(Limit::Scratch, &|value| scratch(value, plan)),
    }
}

fn set(resource: Resource, value: u64) -> Result<(), String> {
    setrlimit(resource, value, value).map_err(|errno| format!("setrlimit failed ({errno})"))
}

fn memory(value: u64, context: &Context) -> LimitGuard {
    if let Ok(leaf) = context.leaf {
        return LimitGuard::held(
            Enforcement::Cgroup,
            value,
            format!(
                "memory.max of {}: the program and all it starts together, no swap; past it the kernel ends the largest of them",
                leaf.dir.display()
            ),
        );
    }
    // Not RLIMIT_AS: browsers and JavaScript engines reserve far more address space than
    // they use. RLIMIT_DATA counts what a process writes to (heap, private mappings).
    match set(Resource::RLIMIT_DATA, value) {
        Ok(()) => LimitGuard::held(
            Enforcement::Rlimit,
            value,
            "RLIMIT_DATA: each process's heap and private memory; past it an allocation fails (Python's MemoryError)",
        ),
        Err(why) => LimitGuard::missing(Some(value), format!("RLIMIT_DATA: {why}")),
    }
}

fn processes(value: u64, context: &Context) -> LimitGuard {
    let no_cgroup = match context.leaf {
        Ok(leaf) => {
            return LimitGuard::held(
                Enforcement::Cgroup,
                value,
                format!(
                    "pids.max of {}: processes and threads together",
                    leaf.dir.display()
                ),
            );
        }
        Err(why) => why,
    };
    if nix::unistd::getuid().is_root() {
        return LimitGuard::missing(
            Some(value),
            format!(
                "the kernel does not apply RLIMIT_NPROC to root, and {no_cgroup}; run viga as another user or give it a delegated cgroup v2, or turn the limit off with --process-limit none"
            ),
        );
    }
    if !context.own_user_namespace {
        return LimitGuard::missing(
            Some(value),
            format!(
                "without a user namespace of its own RLIMIT_NPROC would count every process of this user, and {no_cgroup}"
            ),
        );
    }
    match set(Resource::RLIMIT_NPROC, value) {
        Ok(()) => LimitGuard::held(
            Enforcement::Rlimit,
            value,
            "RLIMIT_NPROC in the program's own user namespace: processes and threads past it fail to start (EAGAIN)",
        ),
        Err(why) => LimitGuard::missing(Some(value), format!("RLIMIT_NPROC: {why}")),
    }
}

fn file_size(value: u64) -> LimitGuard {
    match set(Resource::RLIMIT_FSIZE, value) {
        Ok(()) => LimitGuard::held(
            Enforcement::Rlimit,
            value,
            "RLIMIT_FSIZE: a write past it fails with EFBIG (File too large); SIGXFSZ is ignored",
        ),
        Err(why) => LimitGuard::missing(Some(value), format!("RLIMIT_FSIZE: {why}")),
    }
}

fn scratch(value: u64, plan: &Plan) -> LimitGuard {
    let one_file = match plan.limits.file_size {
        Some(size) => format!("RLIMIT_FSIZE bounds one file to {}", show_size(size)),
        None => "nothing bounds one file between two looks".to_owned(),
    };
    LimitGuard::held(
        Enforcement::Watched,
        value,
        format!(
            "what the writable folders gain is measured every {} ms and the program stopped past it; {one_file}",
            SUPERVISION_PERIOD.as_millis()
        ),
    )
}
