// Uncaught custom exception three frames deep; the message carries a GitHub token.
package com.acme.billing;

public class Billing {
    static class PaymentDeclinedException extends RuntimeException {
        PaymentDeclinedException(String message) { super(message); }
    }

    static void chargeCard(String orderId, int amountCents) {
        String token = System.getenv("GH_TOKEN");
        throw new PaymentDeclinedException("card declined for order " + orderId + " code=E1042 amount=" + amountCents + " token=" + token);
    }

    static void loadOrder(String orderId) {
        chargeCard(orderId, 4200);
    }

    static void handleRequest() {
        loadOrder("ORD-40917");
    }

    public static void main(String[] args) {
        handleRequest();
    }
}
