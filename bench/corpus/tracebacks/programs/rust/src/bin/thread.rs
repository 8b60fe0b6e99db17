//! A panic on a named worker thread, then main's unwrap on the join error.

use std::thread;

#[inline(never)]
fn sync_invoice(id: u32) {
    let key = std::env::var("AWS_KEY").unwrap_or_default();
    let invoices: Vec<u32> = vec![1, 2, 3];
    let _ = key;
    let _ = invoices[id as usize];
}

fn main() {
    let worker = thread::Builder::new()
        .name("invoice-worker-3".into())
        .spawn(|| sync_invoice(7))
        .unwrap();
    worker.join().unwrap();
}
