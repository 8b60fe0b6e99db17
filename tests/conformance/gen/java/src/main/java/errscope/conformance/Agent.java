package errscope.conformance;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * java-otel-genai: a small agent loop hand-instrumented with the OpenTelemetry Java SDK the way
 * the GenAI semantic conventions describe (invoke_agent, chat and execute_tool spans), a scripted
 * model, and tools that call the loopback stub with java.net.http.HttpClient.
 *
 * <p>Usage: {@code java -cp ... errscope.conformance.Agent grpc|http-protobuf}
 */
public final class Agent {
  private static final String STUB = System.getenv("STUB_URL");
  private static final String HEX = "4a9dc0";
  private static final String MODEL = "scripted-model-1";
  private static final Duration CLIENT_TIMEOUT = Duration.ofMillis(250);
  private static final HttpClient HTTP = HttpClient.newHttpClient();
  private static Tracer tracer;

  private Agent() {}

  /** What a careful tool author throws on a non-2xx reply: the status and the URL. */
  static final class HttpStatusException extends IOException {
    final int status;

    HttpStatusException(String method, URI uri, int status, String retryAfter) {
      super(method + " " + uri + " failed: HTTP " + status
          + (retryAfter == null ? "" : " (retry after " + retryAfter + "s)"));
      this.status = status;
    }
  }

  record Scenario(int n, String tool, Map<String, Object> args) {
    String canary(String kind) {
      return String.format("CNRY-java-%02d%s-%s", n, kind, HEX);
    }
  }

  // ---- tools -------------------------------------------------------------------------------

  static String requireString(Map<String, Object> args, String name) {
    Object value = args.get(name);
    if (value == null) {
      throw new IllegalArgumentException("missing required argument '" + name + "'");
    }
    if (!(value instanceof String s)) {
      throw new IllegalArgumentException(
          "argument '" + name + "' must be a string, got " + value.getClass().getSimpleName());
    }
    return s;
  }

  static HttpResponse<String> send(String method, String path, Duration timeout)
      throws IOException, InterruptedException {
    URI uri = URI.create(STUB + path);
    HttpRequest.Builder req = HttpRequest.newBuilder(uri).method(method, HttpRequest.BodyPublishers.noBody());
    if (timeout != null) {
      req.timeout(timeout);
    }
    HttpResponse<String> res = HTTP.send(req.build(), HttpResponse.BodyHandlers.ofString());
    if (res.statusCode() >= 400) {
      throw new HttpStatusException(
          method, uri, res.statusCode(), res.headers().firstValue("retry-after").orElse(null));
    }
    return res;
  }

  static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  static String runTool(Scenario s, String tool, Map<String, Object> args) throws Exception {
    switch (tool) {
      case "get_weather": {
        String city = requireString(args, "city");
        String body = send("GET", "/weather?city=" + enc(city), null).body();
        return body.substring(0, body.length() - 1) + ", \"station\": \"" + s.canary("t") + "\"}";
      }
      case "lookup_order": {
        String id = requireString(args, "order_id");
        // A structured error returned as a normal result.
        return json(Map.of("error", "not_found", "message", "no order " + id, "ref", s.canary("t")));
      }
      case "get_customer":
        return send("GET", "/customers/" + enc(requireString(args, "customer_id")), null).body();
      case "search_docs":
        return send("GET", "/search?q=" + enc(requireString(args, "query")), null).body();
      case "delete_file":
        send("DELETE", "/files" + requireString(args, "path"), null);
        return "{\"deleted\": true}";
      case "fetch_report":
        return send("GET", "/slow/" + enc(requireString(args, "report_id")), CLIENT_TIMEOUT).body();
      case "summarize_ledger": {
        String body = send("GET", "/ledger/" + enc(requireString(args, "account_id")), null).body();
        long total = Long.parseLong(body.split(" ")[0]); // the stub answers text: NumberFormatException
        return "{\"total\": " + total + "}";
      }
      default:
        throw new IllegalStateException("unknown tool " + tool);
    }
  }

  // ---- the loop ----------------------------------------------------------------------------

  static String json(Object v) {
    if (v instanceof String s) {
      return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
    if (v instanceof Map<?, ?> m) {
      List<String> parts = new ArrayList<>();
      m.forEach((k, val) -> parts.add(json(String.valueOf(k)) + ":" + json(val)));
      return "{" + String.join(",", parts) + "}";
    }
    if (v instanceof List<?> l) {
      List<String> parts = new ArrayList<>();
      l.forEach(x -> parts.add(json(x)));
      return "[" + String.join(",", parts) + "]";
    }
    return String.valueOf(v);
  }

  static Map<String, Object> msg(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  /** The scripted model: a tool call on the first turn, the final answer after a tool result. */
  static Map<String, Object> chat(Scenario s, String callId, List<Map<String, Object>> messages) {
    Span span = tracer.spanBuilder("chat " + MODEL).setSpanKind(SpanKind.CLIENT).startSpan();
    try (Scope ignored = span.makeCurrent()) {
      span.setAttribute("gen_ai.operation.name", "chat");
      span.setAttribute("gen_ai.provider.name", "scripted");
      span.setAttribute("gen_ai.request.model", MODEL);
      span.setAttribute("gen_ai.conversation.id", "conv-" + s.canary("s"));
      span.setAttribute("gen_ai.input.messages", json(messages));
      boolean answered = "tool".equals(messages.get(messages.size() - 1).get("role"));
      Map<String, Object> out = answered
          ? msg("role", "assistant", "content", "Here is what I found: " + s.canary("r"))
          : msg("role", "assistant", "tool_calls", List.of(msg("id", callId, "type", "function",
              "function", msg("name", s.tool(), "arguments", json(s.args())))));
      span.setAttribute("gen_ai.response.id", "resp-" + callId + (answered ? "-2" : "-1"));
      span.setAttribute("gen_ai.response.model", MODEL);
      span.setAttribute(AttributeKey.stringArrayKey("gen_ai.response.finish_reasons"),
          List.of(answered ? "stop" : "tool_calls"));
      span.setAttribute("gen_ai.usage.input_tokens", 40L * messages.size());
      span.setAttribute("gen_ai.usage.output_tokens", 12L);
      span.setAttribute("gen_ai.output.messages", json(List.of(out)));
      return out;
    } finally {
      span.end();
    }
  }

  static String executeTool(Scenario s, String callId, String tool, Map<String, Object> args) {
    Span span = tracer.spanBuilder("execute_tool " + tool).setSpanKind(SpanKind.INTERNAL)
        .setAttribute("gen_ai.operation.name", "execute_tool")
        .setAttribute("gen_ai.tool.name", tool)
        .setAttribute("gen_ai.tool.call.id", callId)
        .setAttribute("gen_ai.tool.type", "function")
        .setAttribute("gen_ai.tool.call.arguments", json(args))
        .startSpan();
    try (Scope ignored = span.makeCurrent()) {
      String result = runTool(s, tool, args);
      span.setAttribute("gen_ai.tool.call.result", result);
      return result;
    } catch (Exception e) {
      span.recordException(e);
      span.setStatus(StatusCode.ERROR, String.valueOf(e.getMessage()));
      // HTTP failures carry the status code as error.type; anything else its class name.
      span.setAttribute("error.type", e instanceof HttpStatusException h
          ? String.valueOf(h.status) : e.getClass().getName());
      return json(msg("error", e.getClass().getSimpleName() + ": " + e.getMessage()));
    } finally {
      span.end();
    }
  }

  static void invokeAgent(Scenario s, String callId) {
    Span span = tracer.spanBuilder("invoke_agent support-agent").setSpanKind(SpanKind.INTERNAL)
        .setAttribute("gen_ai.operation.name", "invoke_agent")
        .setAttribute("gen_ai.provider.name", "scripted")
        .setAttribute("gen_ai.agent.name", "support-agent")
        .setAttribute("gen_ai.agent.id", "agent-support-1")
        .setAttribute("gen_ai.conversation.id", "conv-" + s.canary("s"))
        .setAttribute("gen_ai.request.model", MODEL)
        .startSpan();
    try (Scope ignored = span.makeCurrent()) {
      List<Map<String, Object>> messages = new ArrayList<>();
      messages.add(msg("role", "system", "content", "You are a support agent. Use the tools."));
      messages.add(msg("role", "user", "content",
          "Please help with " + s.tool().replace('_', ' ') + ", reference " + s.canary("p")));
      for (int turn = 0; turn < 4; turn++) {
        Map<String, Object> reply = chat(s, callId, messages);
        messages.add(reply);
        if (!reply.containsKey("tool_calls")) {
          return;
        }
        String result = executeTool(s, callId, s.tool(), s.args());
        messages.add(msg("role", "tool", "tool_call_id", callId, "content", result));
      }
      throw new IllegalStateException("agent loop did not finish");
    } finally {
      span.end();
    }
  }

  static List<Scenario> scenarios() {
    List<Scenario> rows = new ArrayList<>();
    String[][] plan = {
      {"get_weather", "city"}, {"lookup_order", "order_id"}, {"get_weather", "mistyped"},
      {"lookup_order", "missing"}, {"get_customer", "customer_id"}, {"search_docs", "query"},
      {"delete_file", "path"}, {"fetch_report", "report_id"}, {"summarize_ledger", "account_id"},
    };
    for (int i = 0; i < plan.length; i++) {
      int n = i + 1;
      String a = String.format("CNRY-java-%02da-%s", n, HEX);
      Map<String, Object> args = new LinkedHashMap<>();
      switch (plan[i][1]) {
        case "mistyped" -> { args.put("city", 12345); args.put("units", a); }
        case "missing" -> args.put("note", a);
        case "path" -> args.put("path", "/srv/exports/" + a + ".csv");
        default -> args.put(plan[i][1], a);
      }
      rows.add(new Scenario(n, plan[i][0], args));
    }
    return rows;
  }

  public static void main(String[] argv) {
    String transport = argv[0];
    SpanExporter exporter = switch (transport) {
      case "grpc" -> OtlpGrpcSpanExporter.builder()
          .setEndpoint("http://" + System.getenv("OTLP_GRPC_ENDPOINT")).build();
      case "http-protobuf" -> OtlpHttpSpanExporter.builder()
          .setEndpoint(System.getenv("OTLP_HTTP_ENDPOINT")).build();
      default -> throw new IllegalArgumentException("unknown transport " + transport);
    };
    SdkTracerProvider provider = SdkTracerProvider.builder()
        .setResource(Resource.getDefault().merge(Resource.create(
            Attributes.of(AttributeKey.stringKey("service.name"), "support-agent-java"))))
        .addSpanProcessor(BatchSpanProcessor.builder(exporter).build())
        .build();
    OpenTelemetrySdk sdk = OpenTelemetrySdk.builder().setTracerProvider(provider).build();
    tracer = sdk.getTracer("support-agent", "0.3.0");
    for (Scenario s : scenarios()) {
      invokeAgent(s, String.format("call_java_%02d", s.n()));
    }
    provider.shutdown().join(30, TimeUnit.SECONDS);
  }
}
