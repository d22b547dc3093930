//! The `application_name` of the manager's sessions: `eventsource/<id>`,
//! kept within the 63 bytes PostgreSQL stores, so `pg_stat_activity`, the
//! holders listing and `eventsource lock holders` can tell holders apart.
//!
//! PostgreSQL replaces every byte of an `application_name` outside
//! printable ASCII with `?`, so the id is written with such bytes
//! percent-encoded (`wörker` as `w%C3%B6rker`), and `%` itself as `%25`;
//! [`decode_holder_id`] gives the id back. An id of printable ASCII
//! without `%` is written as it is.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};

/// The longest `application_name` PostgreSQL keeps (NAMEDATALEN - 1).
const MAX_APPLICATION_NAME: usize = 63;

/// What is percent-encoded: control characters, `%`, and (always, by
/// `utf8_percent_encode`) every non-ASCII byte.
const ESCAPED: &AsciiSet = &CONTROLS.add(b'%');

/// `eventsource/<holder_id>`, or `eventsource` without one, the id
/// percent-encoded as the module says. An id too long for
/// [`MAX_APPLICATION_NAME`] keeps both of its ends around `..`: the end of
/// an id (a pod's suffix, the `:PID` of the tool's `HOSTNAME:PID`) is often
/// what tells two holders apart. It is cut between characters, never
/// inside one's encoding, so the two ends decode to whole characters.
pub(crate) fn application_name(holder_id: Option<&str>) -> String {
    const PREFIX: &str = "eventsource/";
    const GAP: &str = "..";
    let Some(id) = holder_id else {
        return "eventsource".to_owned();
    };
    let encoded: String = utf8_percent_encode(id, ESCAPED).collect();
    if PREFIX.len() + encoded.len() <= MAX_APPLICATION_NAME {
        return format!("{PREFIX}{encoded}");
    }
    let budget = MAX_APPLICATION_NAME - PREFIX.len() - GAP.len();
    let chars: Vec<String> = id.chars().map(encode_char).collect();
    let (mut head, mut head_len) = (0, 0);
    while head < chars.len() && head_len + chars[head].len() <= budget / 2 {
        head_len += chars[head].len();
        head += 1;
    }
    let (mut tail, mut tail_len) = (chars.len(), 0);
    while tail > head && head_len + tail_len + chars[tail - 1].len() <= budget {
        tail_len += chars[tail - 1].len();
        tail -= 1;
    }
    format!(
        "{PREFIX}{}{GAP}{}",
        chars[..head].concat(),
        chars[tail..].concat()
    )
}

fn encode_char(c: char) -> String {
    let mut buf = [0; 4];
    utf8_percent_encode(c.encode_utf8(&mut buf), ESCAPED).collect()
}

/// The holder id an [`application_name`] carries (the part after the
/// prefix), decoded. A `%` not followed by two hex digits is kept as it
/// is, so an id written by an older version, without encoding, reads back
/// unchanged unless it holds such a sequence.
pub(crate) fn decode_holder_id(encoded: &str) -> String {
    percent_decode_str(encoded).decode_utf8_lossy().into_owned()
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
        assert!(name.len() <= MAX_APPLICATION_NAME, "{name}");
        assert!(name.starts_with("eventsource/%C3%A9"), "{name}");
        assert!(
            name.contains("%C3%A9..%C3%A9") && name.ends_with("%A9"),
            "{name}"
        );
        let id = decode_holder_id(name.strip_prefix("eventsource/").unwrap());
        assert!(
            id.starts_with('é') && id.ends_with('é') && id.contains("é..é"),
            "{id}"
        );
        // A long host name keeps its end and the pid.
        let id = "payments-worker-deployment-5f7b9c8d6-production-eu-west-1a-xk2lq:48213";
        let name = application_name(Some(id));
        assert_eq!(name.len(), MAX_APPLICATION_NAME);
        assert_eq!(
            name,
            "eventsource/payments-worker-deployme..on-eu-west-1a-xk2lq:48213"
        );
    }

    /// PostgreSQL keeps printable ASCII alone: everything else is encoded,
    /// and decodes back; printable ASCII ids are written as they are.
    #[test]
    fn ids_outside_printable_ascii_are_encoded_reversibly() {
        for (id, written) in [
            ("wörker-7", "eventsource/w%C3%B6rker-7"),
            ("tab\there", "eventsource/tab%09here"),
            ("50%", "eventsource/50%25"),
            ("host-a:42 (x) #1 ~!", "eventsource/host-a:42 (x) #1 ~!"),
        ] {
            let name = application_name(Some(id));
            assert_eq!(name, written);
            assert!(name.bytes().all(|b| (0x20..0x7f).contains(&b)), "{name}");
            assert_eq!(decode_holder_id(&name["eventsource/".len()..]), id);
        }
        assert_eq!(decode_holder_id("a%zz%"), "a%zz%");
    }
}
