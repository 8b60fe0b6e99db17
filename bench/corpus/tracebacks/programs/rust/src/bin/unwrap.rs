//! `Result::unwrap()` on an error whose Debug form carries a DSN with its password.

#[derive(Debug)]
#[allow(dead_code)]
struct DatabaseUnavailable {
    dsn: String,
    code: &'static str,
}

fn open_connection(dsn: &str) -> Result<(), DatabaseUnavailable> {
    Err(DatabaseUnavailable { dsn: dsn.to_string(), code: "E2203" })
}

#[inline(never)]
fn fetch_invoices(tenant: &str) {
    let dsn = std::env::var("DB_DSN").unwrap_or_default();
    println!("fetching invoices tenant={tenant} request_id=req_8f3a2c");
    open_connection(&dsn).unwrap();
}

fn main() {
    fetch_invoices("acme-corp");
}
