//! What `/proc/PID/stat` says of a process: its state, parent, process
//! group and session. Job control reads it for facts no system call gives
//! without side effects: whether a process is stopped now, and which
//! processes make up a process group (and whether the tool's own has
//! other stages of a pipeline in it).

/// The fields of `/proc/PID/stat` that job control needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    /// The state letter: `R` running, `S` sleeping, `T` stopped, `t`
    /// stopped by a tracer, `Z` ended but not yet reaped, ...
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

impl Stat {
    /// The process's stat now; `None` once it is gone.
    pub fn of(pid: i32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse(&text)
    }

    /// Stopped by a signal, or by a tracer: it runs none of its code.
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }

    /// Ended (a zombie not yet reaped, or being reaped).
    pub fn has_ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses a stat line. The command name, in parentheses, may itself hold
/// spaces and parentheses: the fields start after the last `)`.
fn parse(text: &str) -> Option<Stat> {
    let pid = text.split_once(' ')?.0.parse().ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let mut number = || fields.next()?.parse::<i32>().ok();
    Some(Stat {
        pid,
        state,
        ppid: number()?,
        pgrp: number()?,
        session: number()?,
    })
}

/// Every process of process group `pgid` now, from a scan of `/proc`.
pub fn group(pgid: i32) -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(Stat::of)
        .filter(|s| s.pgrp == pgid)
        .collect()
}

/// Whether this process's group has a live member other than this
/// process, its children and its ancestors: the other stages of a
/// pipeline (`eventsource ... | less`), or what a script without job
/// control runs beside it. Ended members not yet reaped do not count.
pub fn group_has_others() -> bool {
    let me = std::process::id() as i32;
    let pgrp = nix::unistd::getpgrp().as_raw();
    let mut ancestors = Vec::new();
    let mut next = Stat::of(me).map(|s| s.ppid);
    // Bounded: a chain of ancestors in one group is short.
    while let Some(pid) = next.filter(|&p| p > 0 && ancestors.len() < 64) {
        match Stat::of(pid) {
            Some(parent) if parent.pgrp == pgrp => {
                ancestors.push(pid);
                next = Some(parent.ppid);
            }
            _ => break,
        }
    }
    group(pgrp)
        .iter()
        .any(|m| m.pid != me && m.ppid != me && !m.has_ended() && !ancestors.contains(&m.pid))
}

/// Whether group `pgid` is stopped as a whole: a process of it stopped
/// and none running (ended processes not yet reaped count for neither, so
/// a group of such only is not stopped).
pub fn group_stopped(pgid: i32) -> bool {
    let members = group(pgid);
    members.iter().any(Stat::is_stopped) && members.iter().all(|m| m.is_stopped() || m.has_ended())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_after_the_last_parenthesis_of_the_name() {
        let line = "4242 (odd) name (x) T 10 4242 7 34816 4242 4194560 0 0 0 0";
        let stat = parse(line).unwrap();
        assert_eq!(
            stat,
            Stat {
                pid: 4242,
                state: 'T',
                ppid: 10,
                pgrp: 4242,
                session: 7
            }
        );
        assert!(stat.is_stopped() && !stat.has_ended());
        assert_eq!(parse("12 (truncated"), None);
        assert_eq!(parse("12 (sh) S 1"), None);
    }

    #[test]
    fn this_process_is_found_running_in_its_own_group() {
        let me = Stat::of(std::process::id() as i32).unwrap();
        assert!(!me.is_stopped() && !me.has_ended(), "{me:?}");
        let pgrp = nix::unistd::getpgrp().as_raw();
        assert_eq!(me.pgrp, pgrp);
        assert!(group(pgrp).iter().any(|s| s.pid == me.pid));
    }
}
