# JSON::ParserError from the json gem; its message echoes the payload with a Slack token.
require "json"

def parse_webhook(body)
  JSON.parse(body)
end

def handle_delivery(delivery_id)
  parse_webhook("{\"delivery\": \"#{delivery_id}\", \"token\": #{ENV.fetch('SLACK_TOKEN')}}")
end

handle_delivery("dlv_3c9e11")
