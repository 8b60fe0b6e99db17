// An XmlException thrown inside the framework (System.Xml) while the app loads a payload.
using System;
using System.Xml;

namespace Acme.Billing
{
    public static class FrameworkProgram
    {
        static XmlDocument ParseInvoiceXml(string body)
        {
            var doc = new XmlDocument();
            doc.LoadXml(body);
            return doc;
        }

        static void ImportInvoice(string invoiceId)
        {
            var token = Environment.GetEnvironmentVariable("SLACK_TOKEN");
            ParseInvoiceXml($"<invoice id=\"{invoiceId}\"><auth>{token}</auth><total>12,50</invoice>");
        }

        public static void Main()
        {
            ImportInvoice("INV-20931");
        }
    }
}
