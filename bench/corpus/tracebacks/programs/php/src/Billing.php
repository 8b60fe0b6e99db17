<?php
// Billing functions of the app: the exception is thrown two calls below handleRequest().

class PaymentDeclinedException extends RuntimeException
{
}

function chargeCard(string $orderId, int $amountCents): void
{
    $token = getenv('GH_TOKEN');
    throw new PaymentDeclinedException("card declined for order $orderId code=E1042 amount=$amountCents token=$token");
}

function loadOrder(string $orderId): void
{
    chargeCard($orderId, 4200);
}

function handleRequest(): void
{
    loadOrder('ORD-40917');
}
