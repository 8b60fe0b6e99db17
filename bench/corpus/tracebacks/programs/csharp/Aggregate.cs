// Task.WaitAll over failing tasks: an AggregateException with inner exceptions listed.
using System;
using System.Threading.Tasks;

namespace Acme.Agent
{
    public static class AggregateProgram
    {
        static void CallSearchTool(string query)
        {
            var key = Environment.GetEnvironmentVariable("AWS_KEY");
            throw new ArgumentException($"search tool rejected query '{query}': access key {key} is disabled");
        }

        static void CallWeatherTool(string city)
        {
            throw new TimeoutException($"weather tool timed out for {city} after 30s (E3107)");
        }

        static void RunToolBatch(string batchId)
        {
            var search = Task.Run(() => CallSearchTool("refund policy"));
            search.Wait();
            var weather = Task.Run(() => CallWeatherTool("Lyon"));
            Task.WaitAll(weather);
        }

        public static void Main()
        {
            RunToolBatch("batch-7781");
        }
    }
}
