# An ArgumentError raised inside a vendored gem (vendor/bundle/.../gems/tiny_money-0.3.1).
$LOAD_PATH.unshift(File.join(__dir__, "vendor", "bundle", "ruby", "3.1.0", "gems", "tiny_money-0.3.1", "lib"))
require "tiny_money"

def price_line_item(sku, raw_amount)
  TinyMoney.parse(raw_amount, currency: "EUR")
end

def build_invoice(invoice_id)
  price_line_item("SKU-118", "12,50 EUR key=#{ENV.fetch('AWS_KEY')}")
end

build_invoice("INV-20931")
