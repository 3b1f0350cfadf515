//! Worker CPU pinning for [`super::StdPort`] on Linux: which CPU each worker thread is bound to.
//!
//! Measured on a 2-vCPU virtual machine: after the engine's workers slept (between an application's
//! runs), the first futex wake-up often placed the worker on its waker's CPU, and the scheduler left
//! both spinning threads sharing that one CPU for many runs: the 2-layer encoder ran in 0.62 ms
//! instead of 0.38 (exactly its time with the process confined to one CPU by `taskset`). onnxruntime
//! and OpenVINO bind their pool threads for the same reason. So the port binds worker `i` (1-based)
//! to the `i`-th CPU of a [`CpuPlan`] made when the port is created, from the creating thread's
//! allowed CPUs (`sched_getaffinity`, so `taskset` and cgroup cpusets are honoured):
//!
//! ```text
//!   allowed CPUs, minus the creating thread's current CPU (the caller runs there: it is worker 0),
//!   one CPU per physical core first, cores other than the caller's first (sysfs topology),
//!   then the remaining SMT siblings; a worker past the end of the plan is left unbound
//! ```
//!
//! The caller's own thread is never bound. Pinning is best effort: any failing system call leaves
//! the worker unbound, which is only slower. Elsewhere than Linux the plan is empty.

use alloc::vec::Vec;

/// The CPUs workers 1, 2, … are bound to, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuPlan {
    cpus: Vec<usize>,
}

impl CpuPlan {
    /// The plan for workers of an engine created by the calling thread (empty off Linux, or when
    /// the allowed set cannot be read).
    pub(crate) fn for_caller() -> CpuPlan {
        #[cfg(target_os = "linux")]
        {
            linux::plan()
        }
        #[cfg(not(target_os = "linux"))]
        {
            CpuPlan::default()
        }
    }

    /// The CPU worker `index` (1-based) is bound to, if any.
    pub(crate) fn cpu(&self, index: usize) -> Option<usize> {
        self.cpus.get(index.checked_sub(1)?).copied()
    }

    /// Binds the calling thread (a worker) to `cpu`; false if the system refused.
    pub(crate) fn bind_current(cpu: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            linux::bind_current(cpu)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = cpu;
            false
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::CpuPlan;
    use alloc::vec::Vec;
    use std::fs;

    /// Orders the allowed CPUs as the module docs say.
    pub(super) fn plan() -> CpuPlan {
        let Some(allowed) = allowed_cpus() else {
            return CpuPlan::default();
        };
        // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
        let current = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
        let core_of = |cpu: usize| core_key(cpu).unwrap_or((usize::MAX, cpu));
        let caller_core = current.map(core_of);
        let mut seen: Vec<(usize, usize)> = caller_core.into_iter().collect();
        let (mut first, mut rest) = (Vec::new(), Vec::new());
        for cpu in allowed.into_iter().filter(|&c| Some(c) != current) {
            let core = core_of(cpu);
            if seen.contains(&core) {
                rest.push(cpu);
            } else {
                seen.push(core);
                first.push(cpu);
            }
        }
        first.extend(rest);
        CpuPlan { cpus: first }
    }

    /// The calling thread's allowed CPUs, ascending.
    fn allowed_cpus() -> Option<Vec<usize>> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity writes at most
        // `size_of::<cpu_set_t>()` bytes into it; CPU_ISSET reads it for indices below CPU_SETSIZE.
        unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            if libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return None;
            }
            let n = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
            Some((0..n).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
        }
    }

    /// `(package, core)` of `cpu` from sysfs.
    fn core_key(cpu: usize) -> Option<(usize, usize)> {
        let read = |leaf: &str| -> Option<usize> {
            let path = std::format!("/sys/devices/system/cpu/cpu{cpu}/topology/{leaf}");
            fs::read_to_string(path).ok()?.trim().parse().ok()
        };
        Some((read("physical_package_id")?, read("core_id")?))
    }

    pub(super) fn bind_current(cpu: usize) -> bool {
        if cpu >= usize::try_from(libc::CPU_SETSIZE).unwrap_or(0) {
            return false;
        }
        // SAFETY: an all-zero cpu_set_t is a valid empty set; `cpu` is below CPU_SETSIZE; pid 0
        // is the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::CpuPlan;

    #[test]
    fn plan_lists_distinct_allowed_cpus_but_the_callers() {
        let plan = CpuPlan::for_caller();
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut cpus = plan.cpus.clone();
        cpus.sort_unstable();
        cpus.dedup();
        assert_eq!(
            cpus.len(),
            plan.cpus.len(),
            "duplicate CPUs in {:?}",
            plan.cpus
        );
        // The caller's CPU is left out (unless it migrated between the two reads: then at most one
        // more allowed CPU is missing).
        assert!(
            plan.cpus.len() < allowed.max(2),
            "{:?} of {allowed}",
            plan.cpus
        );
        assert_eq!(plan.cpu(0), None, "worker indices are 1-based");
        assert_eq!(plan.cpu(plan.cpus.len() + 1), None);
    }

    #[test]
    fn binding_to_a_cpu_outside_the_set_fails() {
        let cpu = usize::try_from(libc::CPU_SETSIZE).unwrap();
        let t = std::thread::spawn(move || CpuPlan::bind_current(cpu));
        assert!(!t.join().unwrap());
    }
}
