//! The command `run` starts: spawning it with the lock's variables, the signals ddb-lock forwards
//! to it, and stopping it when the lock is lost.

use crate::failure::{Failure, CANNOT_EXECUTE, COMMAND_NOT_FOUND, UNAVAILABLE};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};

/// The signals ddb-lock catches: while it waits for the lock they stop the wait, while the
/// command runs they are passed on to it.
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Catches SIGINT, SIGTERM and SIGHUP from now on.
    pub fn catch() -> Result<Signals, Failure> {
        let catch = |kind: SignalKind| {
            signal(kind)
                .map_err(|e| Failure::new(UNAVAILABLE, format!("cannot catch signals: {e}")))
        };
        Ok(Signals {
            interrupt: catch(SignalKind::interrupt())?,
            terminate: catch(SignalKind::terminate())?,
            hangup: catch(SignalKind::hangup())?,
        })
    }

    /// The next signal caught. Cancel-safe.
    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::SIGINT,
            _ = self.terminate.recv() => Signal::SIGTERM,
            _ = self.hangup.recv() => Signal::SIGHUP,
        }
    }
}

/// Starts `command` (program and arguments) with `vars` added to ddb-lock's environment, its
/// standard streams ddb-lock's. On Linux the command gets SIGTERM if ddb-lock dies (killed, say):
/// nothing would extend the lock any more.
pub fn spawn(command: &[OsString], vars: &[(&str, String)]) -> Result<Child, Failure> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(crate::failure::USAGE, "no command to run"))?;
    let mut child = Command::new(program);
    child
        .args(args)
        .envs(vars.iter().map(|(name, value)| (name, value)));
    #[cfg(target_os = "linux")]
    terminate_when_orphaned(&mut child);
    child.spawn().map_err(|err| {
        let program = program.to_string_lossy();
        match err.kind() {
            io::ErrorKind::NotFound => {
                Failure::new(COMMAND_NOT_FOUND, format!("{program}: command not found"))
            }
            _ => Failure::new(CANNOT_EXECUTE, format!("{program}: cannot run it: {err}")),
        }
    })
}

/// Asks the kernel to send the command SIGTERM when ddb-lock's thread that started it ends
/// (`PR_SET_PDEATHSIG`): ddb-lock runs on one thread, so when ddb-lock ends.
#[cfg(target_os = "linux")]
fn terminate_when_orphaned(command: &mut Command) {
    use nix::sys::prctl::set_pdeathsig;
    use nix::unistd::getppid;
    let parent = nix::unistd::getpid();
    // SAFETY: between fork and exec the closure makes two system calls, allocating nothing.
    unsafe {
        command.pre_exec(move || {
            set_pdeathsig(Signal::SIGTERM)?;
            // ddb-lock may have died before the request took effect.
            if getppid() != parent {
                return Err(io::Error::other(
                    "ddb-lock ended before the command started",
                ));
            }
            Ok(())
        });
    }
}

/// Passes `signal`, caught by ddb-lock, on to the command: all but an interrupt that the
/// terminal sent, which the command, in ddb-lock's process group, got too. Passed on, a Ctrl-C
/// reached the command twice, and some take a second interrupt as "stop at once, whatever the
/// state" (Terraform does).
pub fn forward(child: &Child, signal: Signal) {
    if signal == Signal::SIGINT && in_the_terminals_foreground() {
        return;
    }
    send(child, signal);
}

/// Whether ddb-lock's process group is the foreground group of its controlling terminal, to which
/// the terminal sends the interrupt of a Ctrl-C (false without a terminal).
fn in_the_terminals_foreground() -> bool {
    std::fs::File::open("/dev/tty")
        .ok()
        .and_then(|tty| nix::unistd::tcgetpgrp(&tty).ok())
        .is_some_and(|foreground| foreground == nix::unistd::getpgrp())
}

/// Sends `signal` to `child`, if it still runs.
pub fn send(child: &Child, signal: Signal) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        // ESRCH: it has exited and not been waited for yet; nothing to do.
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// Stops `child`: SIGTERM, then SIGKILL if it has not exited after `grace`. Returns how it ended.
pub async fn stop(child: &mut Child, grace: Duration) -> io::Result<ExitStatus> {
    send(child, Signal::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            child.start_kill()?;
            child.wait().await
        }
    }
}

/// The exit code a shell would give for `status`: the child's code, or 128 plus the signal that
/// killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    }
}
