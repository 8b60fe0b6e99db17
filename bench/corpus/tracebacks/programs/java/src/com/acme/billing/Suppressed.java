// try-with-resources: the close() failure is printed as "Suppressed:" with its own frames.
package com.acme.billing;

public class Suppressed {
    static class LedgerSession implements AutoCloseable {
        @Override
        public void close() {
            throw new IllegalStateException("ledger session close failed: lock held by job-5521");
        }
    }

    static void postLedgerEntry(String entryId) {
        try (LedgerSession session = new LedgerSession()) {
            throw new ArithmeticException("ledger imbalance of 13 cents in entry " + entryId + " (E4410) key=" + System.getenv("AWS_KEY"));
        }
    }

    public static void main(String[] args) {
        postLedgerEntry("LED-00917");
    }
}
