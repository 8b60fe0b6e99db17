// Uncaught custom error three frames deep; the message carries a GitHub token.
'use strict';

class PaymentDeclined extends Error {
  constructor(message) {
    super(message);
    this.name = 'PaymentDeclined';
  }
}

function chargeCard(orderId, amountCents) {
  const token = process.env.GH_TOKEN;
  throw new PaymentDeclined(`card declined for order ${orderId} code=E1042 amount=${amountCents} token=${token}`);
}

function loadOrder(orderId) {
  chargeCard(orderId, 4200);
}

function handleRequest() {
  loadOrder('ORD-40917');
}

handleRequest();
