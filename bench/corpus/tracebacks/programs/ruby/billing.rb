# Uncaught custom exception three frames deep; the message carries a GitHub token.
class PaymentDeclined < StandardError; end

def charge_card(order_id, amount_cents)
  token = ENV.fetch("GH_TOKEN")
  raise PaymentDeclined, "card declined for order #{order_id} code=E1042 amount=#{amount_cents} token=#{token}"
end

def load_order(order_id)
  charge_card(order_id, 4200)
end

def handle_request
  load_order("ORD-40917")
end

handle_request
