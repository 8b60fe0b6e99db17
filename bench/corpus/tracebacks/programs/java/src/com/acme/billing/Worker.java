// An uncaught exception on a named worker thread (the default handler prints it) while main waits.
package com.acme.billing;

public class Worker {
    static void refundOrder(String orderId) {
        Object ledger = null;
        if (orderId.startsWith("ORD-")) {
            throw new NullPointerException("ledger for " + orderId + " not loaded (E5001), api key " + System.getenv("OPENAI_KEY"));
        }
        ledger.hashCode();
    }

    public static void main(String[] args) throws InterruptedException {
        Thread t = new Thread(() -> refundOrder("ORD-55102"), "refund-worker-1");
        t.start();
        t.join();
        System.exit(1);  // a service would exit non-zero after losing its worker
    }
}
