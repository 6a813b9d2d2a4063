//! The command `run` starts: spawning it with the lock's variables, the signals ddb-lock forwards
//! to it, and stopping it when the lock is lost.
//!
//! Unless ddb-lock runs in the foreground of a terminal, the command leads a process group of its
//! own, and every signal goes to that whole group: a shell script's children (a `terraform
//! apply` it runs) are stopped with it, not orphaned to go on working after the lock is released.
//! When the command exits, what is left of its group (processes it started in the background, or
//! children still shutting down after a signal) is ended the same way, SIGTERM then SIGKILL after
//! the grace, before ddb-lock releases the lock. In a terminal's foreground the command shares
//! ddb-lock's group, so that it can read the terminal and gets a Ctrl-C from it directly (as with
//! `timeout --foreground`); then signals reach the command alone.

use crate::failure::{Failure, CANNOT_EXECUTE, COMMAND_NOT_FOUND, UNAVAILABLE};
use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::future::Future;
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

/// How often ddb-lock looks whether the rest of the command's group has ended.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How long ddb-lock waits for the command's group after SIGKILL (a process in uninterruptible
/// sleep may take a while to die) before it releases the lock anyway.
const AFTER_KILL: Duration = Duration::from_secs(2);

/// The command, running: its process, and the process group it leads, if it has one of its own.
#[derive(Debug)]
pub struct RunningCommand {
    child: Child,
    group: Option<Pid>,
}

/// Starts `command` (program and arguments) with `vars` added to ddb-lock's environment, its
/// standard streams ddb-lock's, leading a process group of its own unless ddb-lock runs in the
/// foreground of a terminal. On Linux the command gets SIGTERM if ddb-lock dies (killed, say):
/// nothing would extend the lock any more.
pub fn spawn(command: &[OsString], vars: &[(&str, String)]) -> Result<RunningCommand, Failure> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(crate::failure::USAGE, "no command to run"))?;
    let mut child = Command::new(program);
    child
        .args(args)
        .envs(vars.iter().map(|(name, value)| (name, value)));
    let grouped = !in_the_terminals_foreground();
    if grouped {
        child.process_group(0);
    }
    #[cfg(target_os = "linux")]
    terminate_when_orphaned(&mut child);
    let child = child.spawn().map_err(|err| {
        let program = program.to_string_lossy();
        match err.kind() {
            io::ErrorKind::NotFound => {
                Failure::new(COMMAND_NOT_FOUND, format!("{program}: command not found"))
            }
            _ => Failure::new(CANNOT_EXECUTE, format!("{program}: cannot run it: {err}")),
        }
    })?;
    let group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .filter(|_| grouped)
        .map(Pid::from_raw);
    Ok(RunningCommand { child, group })
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

impl RunningCommand {
    /// Waits for the command to exit. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Passes `signal`, caught by ddb-lock, on to the command: all but an interrupt that the
    /// terminal sent, which the command, in ddb-lock's process group, got too. Passed on, a
    /// Ctrl-C reached the command twice, and some take a second interrupt as "stop at once,
    /// whatever the state" (Terraform does).
    pub fn forward(&self, signal: Signal) {
        if signal == Signal::SIGINT && self.group.is_none() && in_the_terminals_foreground() {
            return;
        }
        self.send(signal);
    }

    /// Sends `signal` to the command's group (or the command alone, in ddb-lock's group), if it
    /// still runs.
    fn send(&self, signal: Signal) {
        // ESRCH: it has ended (and not been waited for yet); nothing to do.
        let _ = match self.group {
            Some(group) => killpg(group, signal),
            None => match self.child.id().and_then(|pid| i32::try_from(pid).ok()) {
                Some(pid) => kill(Pid::from_raw(pid), signal),
                None => Ok(()),
            },
        };
    }

    /// Stops the command: SIGTERM, then SIGKILL if it has not exited after `grace`, or at once
    /// when `lost` completes (the lock is lost: the next holder may hold it). Returns how it
    /// ended; the rest of its group is left to [`end_the_rest`](Self::end_the_rest).
    pub async fn stop(
        &mut self,
        grace: Duration,
        lost: impl Future<Output = ()>,
    ) -> io::Result<ExitStatus> {
        self.send(Signal::SIGTERM);
        let exited = tokio::select! {
            exited = tokio::time::timeout(grace, self.child.wait()) => exited.ok(),
            () = lost => None,
        };
        match exited {
            Some(status) => status,
            None => {
                self.send(Signal::SIGKILL);
                self.child.start_kill()?;
                self.child.wait().await
            }
        }
    }

    /// Once the command has exited: ends what is left of its process group, SIGTERM, then
    /// SIGKILL if some of it still runs after `grace`, or at once when `lost` completes (the
    /// lock is lost: given the rest of its grace, what the command left worked on beside the next
    /// holder; found by review), and waits for it to be gone (a while at most after SIGKILL).
    /// Nothing to do for a command in ddb-lock's own group, or whose group has ended with it.
    pub async fn end_the_rest(&self, grace: Duration, lost: impl Future<Output = ()>) {
        let Some(group) = self.group else {
            return;
        };
        if !group_runs(group) {
            return;
        }
        eprintln!("ddb-lock: the command exited; ending the processes it left running");
        self.send(Signal::SIGTERM);
        let ended = tokio::select! {
            ended = tokio::time::timeout(grace, group_ended(group)) => ended.is_ok(),
            () = lost => false,
        };
        if ended {
            return;
        }
        self.send(Signal::SIGKILL);
        if tokio::time::timeout(AFTER_KILL, group_ended(group))
            .await
            .is_err()
        {
            eprintln!("ddb-lock: processes of the command's group outlived SIGKILL");
        }
    }
}

/// Whether ddb-lock's process group is the foreground group of its controlling terminal, to which
/// the terminal sends the interrupt of a Ctrl-C (false without a terminal).
fn in_the_terminals_foreground() -> bool {
    std::fs::File::open("/dev/tty")
        .ok()
        .and_then(|tty| nix::unistd::tcgetpgrp(&tty).ok())
        .is_some_and(|foreground| foreground == nix::unistd::getpgrp())
}

/// Whether any process of `group` is left. Zombies that are ddb-lock's to reap (where it is the
/// reaper of orphans: a container's first process) are reaped first.
fn group_runs(group: Pid) -> bool {
    while let Ok(status) = waitpid(Pid::from_raw(-group.as_raw()), Some(WaitPidFlag::WNOHANG)) {
        if status == nix::sys::wait::WaitStatus::StillAlive {
            break;
        }
    }
    killpg(group, None) != Err(Errno::ESRCH)
}

/// Completes once no process of `group` is left.
async fn group_ended(group: Pid) {
    while group_runs(group) {
        tokio::time::sleep(GROUP_POLL).await;
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
