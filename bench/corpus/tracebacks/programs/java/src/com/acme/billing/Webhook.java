// An exception from inside a dependency (Gson), wrapped by the app with a Slack token in the message.
package com.acme.billing;

import com.google.gson.Gson;
import com.google.gson.JsonSyntaxException;
import java.util.Map;

public class Webhook {
    static Map<?, ?> parsePayload(String body) {
        return new Gson().fromJson(body, Map.class);
    }

    static void handleWebhook(String deliveryId) {
        try {
            parsePayload("{\"event\": \"refund.created\", \"amount\": 4200, \"note\": ");
        } catch (JsonSyntaxException e) {
            throw new IllegalArgumentException("bad webhook payload in delivery " + deliveryId + " signed with " + System.getenv("SLACK_TOKEN"), e);
        }
    }

    public static void main(String[] args) {
        handleWebhook("dlv_3c9e11");
    }
}
