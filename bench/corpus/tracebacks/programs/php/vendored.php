<?php
// An InvalidArgumentException thrown inside a Composer-style vendor package.
require __DIR__ . '/vendor/acme/money/src/Money.php';

use Acme\Money\Money;

function priceLineItem(string $sku, string $rawAmount): Money
{
    return Money::parse($rawAmount, 'EUR');
}

function buildInvoice(string $invoiceId): void
{
    priceLineItem('SKU-118', '12,50 EUR key=' . getenv('AWS_KEY'));
}

buildInvoice('INV-20931');
