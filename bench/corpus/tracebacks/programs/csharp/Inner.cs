// An exception with an inner exception: "--->" and "--- End of inner exception stack trace ---".
using System;
using System.Collections.Generic;

namespace Acme.Billing
{
    public static class InnerProgram
    {
        static string LookupTenant(string tenant)
        {
            var dsnByTenant = new Dictionary<string, string> { ["globex"] = "postgres://ro@db/globex" };
            return dsnByTenant[tenant];
        }

        static void FetchInvoices(string tenant)
        {
            try
            {
                LookupTenant(tenant);
            }
            catch (KeyNotFoundException e)
            {
                var dsn = Environment.GetEnvironmentVariable("DB_DSN");
                throw new InvalidOperationException($"invoice sync failed for tenant {tenant}, fallback {dsn} refused (E2203)", e);
            }
        }

        public static void Main()
        {
            FetchInvoices("acme-corp");
        }
    }
}
