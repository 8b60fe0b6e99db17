// Caused-by chain three deep with "... N more": a DSN password in the middle exception.
package com.acme.billing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;

public class Chained {
    static class DatabaseUnavailableException extends Exception {
        DatabaseUnavailableException(String message, Throwable cause) { super(message, cause); }
    }

    static void openSocket() throws SocketTimeoutException {
        throw new SocketTimeoutException("connect timed out after 5000ms (request req_8f3a2c)");
    }

    static void openConnection(String dsn) throws DatabaseUnavailableException {
        try {
            openSocket();
        } catch (SocketTimeoutException e) {
            throw new DatabaseUnavailableException("could not reach " + dsn + " (E2203)", e);
        }
    }

    static void fetchInvoices(String tenant) {
        try {
            openConnection(System.getenv("DB_DSN"));
        } catch (DatabaseUnavailableException e) {
            throw new IllegalStateException("invoice sync failed for tenant " + tenant, e);
        }
    }

    public static void main(String[] args) {
        fetchInvoices("acme-corp");
    }
}
