// Error with a cause (ES2022 { cause }): Node prints the cause and its own properties.
'use strict';

function openConnection(dsn) {
  const err = new Error('connect ETIMEDOUT 10.0.4.12:5432');
  err.code = 'ETIMEDOUT';
  throw err;
}

function fetchInvoices(tenant) {
  const dsn = process.env.DB_DSN;
  try {
    openConnection(dsn);
  } catch (err) {
    throw new Error(`could not reach ${dsn} for tenant ${tenant} (E2203)`, { cause: err });
  }
}

fetchInvoices('acme-corp');
