use super::*;

#[test]
fn holder_id_comes_from_prefixed_application_names_only() {
    assert_eq!(
        holder_id_from_application_name("eventsource/host-a:42").as_deref(),
        Some("host-a:42")
    );
    assert_eq!(holder_id_from_application_name("eventsource"), None);
    assert_eq!(holder_id_from_application_name("eventsource/"), None);
    assert_eq!(holder_id_from_application_name("psql"), None);
    assert_eq!(
        holder_id_from_application_name("eventsource/w%C3%B6rker-7").as_deref(),
        Some("wörker-7")
    );
}
