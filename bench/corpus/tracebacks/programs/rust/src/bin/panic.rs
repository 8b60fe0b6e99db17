//! An explicit panic three frames deep; the message carries a GitHub token.

fn charge_card(order_id: &str, amount_cents: u32) {
    let token = std::env::var("GH_TOKEN").unwrap_or_default();
    panic!("card declined for order {order_id} code=E1042 amount={amount_cents} token={token}");
}

#[inline(never)]
fn load_order(order_id: &str) {
    charge_card(order_id, 4200);
}

#[inline(never)]
fn handle_request() {
    load_order("ORD-40917");
}

fn main() {
    handle_request();
}
