//! The `application_name` of the manager's sessions: `eventsource/<id>`,
//! kept within the 63 bytes PostgreSQL stores, so `pg_stat_activity`, the
//! holders listing and `eventsource lock holders` can tell holders apart.

/// The longest `application_name` PostgreSQL keeps (NAMEDATALEN - 1).
const MAX_APPLICATION_NAME: usize = 63;

/// `eventsource/<holder_id>`, or `eventsource` without one. An id too long
/// for [`MAX_APPLICATION_NAME`] keeps both of its ends around `..`: the end
/// of an id (a pod's suffix, the `:PID` of the tool's `HOSTNAME:PID`) is
/// often what tells two holders apart.
pub(crate) fn application_name(holder_id: Option<&str>) -> String {
    const PREFIX: &str = "eventsource/";
    const GAP: &str = "..";
    let Some(id) = holder_id else {
        return "eventsource".to_owned();
    };
    if PREFIX.len() + id.len() <= MAX_APPLICATION_NAME {
        return format!("{PREFIX}{id}");
    }
    let budget = MAX_APPLICATION_NAME - PREFIX.len() - GAP.len();
    let mut head = budget / 2;
    while !id.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = id.len() - (budget - budget / 2);
    while !id.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{PREFIX}{}{GAP}{}", &id[..head], &id[tail..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_name_is_prefixed_and_fits() {
        assert_eq!(application_name(None), "eventsource");
        assert_eq!(application_name(Some("w-1")), "eventsource/w-1");
        let long = "é".repeat(100);
        let name = application_name(Some(&long));
        assert!(name.len() <= MAX_APPLICATION_NAME && name.starts_with("eventsource/é"));
        assert!(name.contains("é..é") && name.ends_with('é'), "{name}");
        // A long host name keeps its end and the pid.
        let id = "payments-worker-deployment-5f7b9c8d6-production-eu-west-1a-xk2lq:48213";
        let name = application_name(Some(id));
        assert_eq!(name.len(), MAX_APPLICATION_NAME);
        assert_eq!(
            name,
            "eventsource/payments-worker-deployme..on-eu-west-1a-xk2lq:48213"
        );
    }
}
