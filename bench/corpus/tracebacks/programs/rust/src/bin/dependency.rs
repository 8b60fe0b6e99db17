//! A panic inside a dependency's frames: once_cell runs the app's initialiser, which fails.

use once_cell::sync::Lazy;

static SLACK_CLIENT: Lazy<String> = Lazy::new(|| {
    let token = std::env::var("SLACK_TOKEN").unwrap_or_default();
    panic!("slack client init failed: token {token} rejected (invalid_auth, req_51c0de)")
});

#[inline(never)]
fn notify_oncall(incident_id: &str) -> usize {
    SLACK_CLIENT.len() + incident_id.len()
}

fn main() {
    notify_oncall("INC-2291");
}
