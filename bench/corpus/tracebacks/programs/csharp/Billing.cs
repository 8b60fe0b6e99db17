// Uncaught custom exception three frames deep; the message carries a GitHub token.
using System;

namespace Acme.Billing
{
    public class PaymentDeclinedException : Exception
    {
        public PaymentDeclinedException(string message) : base(message) { }
    }

    public static class Program
    {
        static void ChargeCard(string orderId, int amountCents)
        {
            var token = Environment.GetEnvironmentVariable("GH_TOKEN");
            throw new PaymentDeclinedException($"card declined for order {orderId} code=E1042 amount={amountCents} token={token}");
        }

        static void LoadOrder(string orderId)
        {
            ChargeCard(orderId, 4200);
        }

        static void HandleRequest()
        {
            LoadOrder("ORD-40917");
        }

        public static void Main()
        {
            HandleRequest();
        }
    }
}
