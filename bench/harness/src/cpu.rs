//! CPU time of processes, from `/proc/<pid>/stat`: the load generator's own and the engine's, so
//! that a rate can be told apart as the engine's limit or the generator's.

use std::time::Duration;

/// The kernel's unit of `utime` and `stime` in `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// User + system CPU time of process `pid` (all its threads), or `None` if it cannot be read.
pub fn process(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: fields are counted after its closing ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11); // field 3 is the first after ')'
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SECOND,
    ))
}

/// CPU time of this process.
pub fn own() -> Option<Duration> {
    process(std::process::id())
}

/// The engine's process id: `--engine-pid`, else `DYNAMODB_ENDPOINT_PID` (which
/// `scripts/bench.sh` sets), else the process listening on the endpoint's loopback port.
pub fn engine_pid(given: Option<u32>, endpoint: &str) -> Option<u32> {
    given
        .or_else(|| std::env::var("DYNAMODB_ENDPOINT_PID").ok()?.parse().ok())
        .or_else(|| listener_pid(endpoint))
}

/// The process that listens on `endpoint`'s port, found through `/proc/net/tcp*` and the socket
/// inodes of the processes' open files (visible for our own user's processes, or as root).
fn listener_pid(endpoint: &str) -> Option<u32> {
    let port: u16 = endpoint
        .rsplit_once(':')?
        .1
        .trim_end_matches('/')
        .parse()
        .ok()?;
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT, st 0A is LISTEN, the inode is field 10.
            let listening = f.get(3) == Some(&"0A");
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if listening && local_port == Some(port) {
                if let Some(inode) = f.get(9) {
                    inodes.push(format!("socket:[{inode}]"));
                }
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if inodes.iter().any(|i| target.as_os_str() == i.as_str()) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

/// CPU time used by this process and by the engine between two readings.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    own: Option<Duration>,
    engine: Option<Duration>,
    at: std::time::Instant,
}

/// What a stretch of work cost: wall time, and CPU seconds of the generator and of the engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spent {
    /// Wall-clock seconds.
    pub wall: f64,
    /// CPU seconds of this process (the load generator).
    pub own: f64,
    /// CPU seconds of the engine, if its process is known.
    pub engine: Option<f64>,
}

impl Reading {
    /// Reads both now.
    pub fn now(engine: Option<u32>) -> Reading {
        Reading {
            own: own(),
            engine: engine.and_then(process),
            at: std::time::Instant::now(),
        }
    }

    /// What was spent since `self`, reading `engine` again.
    pub fn since(&self, engine: Option<u32>) -> Spent {
        let later = Reading::now(engine);
        let delta = |a: Option<Duration>, b: Option<Duration>| {
            a.zip(b).map(|(a, b)| b.saturating_sub(a).as_secs_f64())
        };
        Spent {
            wall: later.at.duration_since(self.at).as_secs_f64(),
            own: delta(self.own, later.own).unwrap_or(f64::NAN),
            engine: delta(self.engine, later.engine),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_cpu_time() {
        let before = own().expect("own stat");
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(own().expect("own stat") >= before);
    }
}
