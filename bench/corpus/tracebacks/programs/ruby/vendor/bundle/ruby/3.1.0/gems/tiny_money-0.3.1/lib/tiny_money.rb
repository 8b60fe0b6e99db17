# A tiny money parser standing in for a third-party gem installed under vendor/bundle.
module TinyMoney
  class InvalidAmount < ArgumentError; end

  def self.parse(raw, currency:)
    cents = normalize(raw)
    [cents, currency]
  end

  def self.normalize(raw)
    raise InvalidAmount, "invalid amount #{raw.inspect}" unless raw.match?(/\A\d+(\.\d{2})?\z/)

    (raw.to_f * 100).round
  end
end
