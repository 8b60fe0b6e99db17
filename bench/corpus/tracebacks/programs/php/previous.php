<?php
// An exception with a previous one: PHP prints both, joined by "Next".

function openConnection(string $dsn): void
{
    throw new PDOException("SQLSTATE[08006] connection to server at \"db\" failed: timeout (request req_8f3a2c)");
}

function fetchInvoices(string $tenant): void
{
    $dsn = getenv('DB_DSN');
    try {
        openConnection($dsn);
    } catch (PDOException $e) {
        throw new RuntimeException("could not reach $dsn for tenant $tenant (E2203)", 2203, $e);
    }
}

fetchInvoices('acme-corp');
