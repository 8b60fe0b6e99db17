// go-otel-genai: a small agent loop hand-instrumented with the OpenTelemetry Go SDK the way the
// GenAI semantic conventions describe (invoke_agent, chat and execute_tool spans), a scripted
// model, and tools that call the loopback stub through an otelhttp-instrumented http.Client.
//
//	agent grpc|http-protobuf
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const (
	hex   = "90b7e3"
	model = "scripted-model-1"
)

var (
	stub   = os.Getenv("STUB_URL")
	tracer trace.Tracer
	// The tools' client: instrumented, so each request is a CLIENT span with its status code.
	client = &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport), Timeout: 250 * time.Millisecond}
	// ErrInvalidArgs marks arguments the loop rejects before a tool runs.
	ErrInvalidArgs = errors.New("invalid tool arguments")
)

// HTTPStatusError is what a careful tool author returns on a non-2xx reply.
type HTTPStatusError struct {
	Method, URL string
	Status      int
	RetryAfter  string
}

func (e *HTTPStatusError) Error() string {
	wait := ""
	if e.RetryAfter != "" {
		wait = fmt.Sprintf(" (retry after %ss)", e.RetryAfter)
	}
	return fmt.Sprintf("%s %s failed: HTTP %d %s%s", e.Method, e.URL, e.Status, http.StatusText(e.Status), wait)
}

func canary(n int, kind string) string { return fmt.Sprintf("CNRY-go-%02d%s-%s", n, kind, hex) }

func send(ctx context.Context, method, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, stub+path, nil)
	if err != nil {
		return "", err
	}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode >= 400 {
		return "", &HTTPStatusError{method, stub + path, res.StatusCode, res.Header.Get("Retry-After")}
	}
	return string(body), nil
}

// decode unmarshals a tool's JSON arguments and checks the required ones are there.
func decode(raw string, into any, required map[string]*string) error {
	if err := json.Unmarshal([]byte(raw), into); err != nil {
		return err // a mistyped argument: *json.UnmarshalTypeError
	}
	for name, v := range required {
		if *v == "" {
			return fmt.Errorf("%w: missing required argument %q", ErrInvalidArgs, name)
		}
	}
	return nil
}

func runTool(ctx context.Context, n int, tool, raw string) (string, error) {
	switch tool {
	case "get_weather":
		var a struct {
			City  string `json:"city"`
			Units string `json:"units"`
		}
		if err := decode(raw, &a, map[string]*string{"city": &a.City}); err != nil {
			return "", err
		}
		body, err := send(ctx, "GET", "/weather?city="+url.QueryEscape(a.City))
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(body, "}") + fmt.Sprintf(", \"station\": %q}", canary(n, "t")), nil
	case "lookup_order":
		var a struct {
			OrderID string `json:"order_id"`
			Note    string `json:"note"`
		}
		if err := decode(raw, &a, map[string]*string{"order_id": &a.OrderID}); err != nil {
			return "", err
		}
		// A structured error returned as a normal result.
		out, _ := json.Marshal(map[string]string{"error": "not_found", "message": "no order " + a.OrderID, "ref": canary(n, "t")})
		return string(out), nil
	case "get_customer", "search_docs", "fetch_report", "summarize_ledger", "delete_file":
		var a map[string]string
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			return "", err
		}
		switch tool {
		case "get_customer":
			return send(ctx, "GET", "/customers/"+url.PathEscape(a["customer_id"]))
		case "search_docs":
			return send(ctx, "GET", "/search?q="+url.QueryEscape(a["query"]))
		case "fetch_report":
			return send(ctx, "GET", "/slow/"+url.PathEscape(a["report_id"]))
		case "delete_file":
			if _, err := send(ctx, "DELETE", "/files"+a["path"]); err != nil {
				return "", err
			}
			return `{"deleted": true}`, nil
		default:
			body, err := send(ctx, "GET", "/ledger/"+url.PathEscape(a["account_id"]))
			if err != nil {
				return "", err
			}
			fields := strings.Fields(body)
			return fmt.Sprintf(`{"total": %q}`, fields[len(fields)+1]), nil // a bug: panics
		}
	}
	return "", fmt.Errorf("unknown tool %q", tool)
}

// executeTool runs one call under an execute_tool span; a panic is recovered and recorded.
func executeTool(ctx context.Context, n int, callID, tool, raw string) (result string) {
	ctx, span := tracer.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.tool.call.id", callID),
			attribute.String("gen_ai.tool.type", "function"),
			attribute.String("gen_ai.tool.call.arguments", raw),
		))
	defer span.End()
	fail := func(err error) string {
		span.RecordError(err, trace.WithStackTrace(true))
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
		out, _ := json.Marshal(map[string]string{"error": err.Error()})
		return string(out)
	}
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok {
				err = fmt.Errorf("panic: %v", r)
			}
			result = fail(err)
		}
	}()
	out, err := runTool(ctx, n, tool, raw)
	if err != nil {
		return fail(err)
	}
	span.SetAttributes(attribute.String("gen_ai.tool.call.result", out))
	return out
}

type message map[string]any

func chat(ctx context.Context, n int, callID, tool, args string, messages []message) message {
	_, span := tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	in, _ := json.Marshal(messages)
	span.SetAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "scripted"),
		attribute.String("gen_ai.request.model", model),
		attribute.String("gen_ai.conversation.id", "conv-"+canary(n, "s")),
		attribute.String("gen_ai.input.messages", string(in)),
	)
	answered := messages[len(messages)-1]["role"] == "tool"
	out := message{"role": "assistant", "content": "Here is what I found: " + canary(n, "r")}
	finish, step := "stop", 2
	if !answered {
		out = message{"role": "assistant", "tool_calls": []message{{"id": callID, "type": "function",
			"function": message{"name": tool, "arguments": args}}}}
		finish, step = "tool_calls", 1
	}
	o, _ := json.Marshal([]message{out})
	span.SetAttributes(
		attribute.String("gen_ai.response.id", fmt.Sprintf("resp-%s-%d", callID, step)),
		attribute.String("gen_ai.response.model", model),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{finish}),
		attribute.Int("gen_ai.usage.input_tokens", 40*len(messages)),
		attribute.Int("gen_ai.usage.output_tokens", 12),
		attribute.String("gen_ai.output.messages", string(o)),
	)
	return out
}

func invokeAgent(ctx context.Context, n int, callID, tool, args string) {
	ctx, span := tracer.Start(ctx, "invoke_agent support-agent", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.provider.name", "scripted"),
			attribute.String("gen_ai.agent.name", "support-agent"),
			attribute.String("gen_ai.agent.id", "agent-support-1"),
			attribute.String("gen_ai.conversation.id", "conv-"+canary(n, "s")),
			attribute.String("gen_ai.request.model", model),
		))
	defer span.End()
	messages := []message{
		{"role": "system", "content": "You are a support agent. Use the tools."},
		{"role": "user", "content": fmt.Sprintf("Please help with %s, reference %s", strings.ReplaceAll(tool, "_", " "), canary(n, "p"))},
	}
	for turn := 0; turn < 4; turn++ {
		reply := chat(ctx, n, callID, tool, args, messages)
		messages = append(messages, reply)
		if _, ok := reply["tool_calls"]; !ok {
			return
		}
		messages = append(messages, message{"role": "tool", "tool_call_id": callID, "content": executeTool(ctx, n, callID, tool, args)})
	}
}

func main() {
	transport := os.Args[1]
	ctx := context.Background()
	var exporter sdktrace.SpanExporter
	var err error
	switch transport {
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(os.Getenv("OTLP_GRPC_ENDPOINT")), otlptracegrpc.WithInsecure())
	case "http-protobuf":
		exporter, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(os.Getenv("OTLP_HTTP_ENDPOINT")))
	default:
		log.Fatalf("unknown transport %s", transport)
	}
	if err != nil {
		log.Fatal(err)
	}
	res, _ := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "support-agent-go")))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	tracer = provider.Tracer("support-agent", trace.WithInstrumentationVersion("0.3.0"))

	plan := []struct{ tool, args string }{
		{"get_weather", `{"city":%q}`},
		{"lookup_order", `{"order_id":%q}`},
		{"get_weather", `{"city":12345,"units":%q}`},
		{"lookup_order", `{"note":%q}`},
		{"get_customer", `{"customer_id":%q}`},
		{"search_docs", `{"query":%q}`},
		{"delete_file", `{"path":"/srv/exports/%s.csv"}`},
		{"fetch_report", `{"report_id":%q}`},
		{"summarize_ledger", `{"account_id":%q}`},
	}
	for i, p := range plan {
		n := i + 1
		invokeAgent(ctx, n, fmt.Sprintf("call_go_%02d", n), p.tool, fmt.Sprintf(p.args, canary(n, "a")))
	}
	if err := provider.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
}
