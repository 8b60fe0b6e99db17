// node-otel-genai: a small hand-written agent loop instrumented with the OpenTelemetry JS SDK
// the way the GenAI semantic conventions describe (invoke_agent -> chat / execute_tool spans),
// with the undici instrumentation that sdk-node users get for fetch.  The model is scripted.
//   node otel_genai.mjs grpc|http-protobuf|http-json
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { TOOLS, exporterFor, scenarios } from './common.mjs';

const transport = process.argv[2];
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-agent-node' }),
  spanProcessors: [new BatchSpanProcessor(exporterFor(transport))],
});
provider.register();
registerInstrumentations({ instrumentations: [new UndiciInstrumentation()] });
const tracer = trace.getTracer('support-agent', '0.3.0');

const MODEL = 'scripted-model-1';
const PROVIDER = 'scripted';

// The scripted model: a tool call on the first turn, the final answer once a tool result is in.
function scriptedModel(s, callId, messages) {
  const last = messages[messages.length - 1];
  if (last.role === 'tool') {
    return { id: `resp-${callId}-2`, finish: 'stop', message: { role: 'assistant', content: s.reply } };
  }
  return {
    id: `resp-${callId}-1`,
    finish: 'tool_calls',
    message: {
      role: 'assistant',
      tool_calls: [{ id: callId, type: 'function', function: { name: s.tool, arguments: JSON.stringify(s.args) } }],
    },
  };
}

async function chat(s, callId, messages) {
  return tracer.startActiveSpan(`chat ${MODEL}`, { kind: SpanKind.CLIENT }, async (span) => {
    span.setAttributes({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': PROVIDER,
      'gen_ai.request.model': MODEL,
      'gen_ai.conversation.id': s.session,
      'gen_ai.input.messages': JSON.stringify(messages),
    });
    const out = scriptedModel(s, callId, messages);
    span.setAttributes({
      'gen_ai.response.id': out.id,
      'gen_ai.response.model': MODEL,
      'gen_ai.response.finish_reasons': [out.finish],
      'gen_ai.usage.input_tokens': 40 * messages.length,
      'gen_ai.usage.output_tokens': 12,
      'gen_ai.output.messages': JSON.stringify([out.message]),
    });
    span.end();
    return out.message;
  });
}

// One tool call under an execute_tool span; a failure is recorded and handed back to the model.
async function executeTool(s, toolCall) {
  const name = toolCall.function.name;
  const tool = TOOLS[name];
  return tracer.startActiveSpan(`execute_tool ${name}`, { kind: SpanKind.INTERNAL }, async (span) => {
    span.setAttributes({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': name,
      'gen_ai.tool.call.id': toolCall.id,
      'gen_ai.tool.type': 'function',
      'gen_ai.tool.description': tool.description,
      'gen_ai.tool.call.arguments': toolCall.function.arguments,
    });
    try {
      const args = tool.schema.parse(JSON.parse(toolCall.function.arguments));
      const result = JSON.stringify(await tool.run(args, s.result));
      span.setAttribute('gen_ai.tool.call.result', result);
      return result;
    } catch (err) {
      span.recordException(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
      span.setAttribute('error.type', err.name ?? '_OTHER');
      return JSON.stringify({ error: `${err.name}: ${err.message}` });
    } finally {
      span.end();
    }
  });
}

async function invokeAgent(s, callId) {
  const attrs = {
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.provider.name': PROVIDER,
    'gen_ai.agent.name': 'support-agent',
    'gen_ai.agent.id': 'agent-support-1',
    'gen_ai.conversation.id': s.session,
    'gen_ai.request.model': MODEL,
  };
  return tracer.startActiveSpan('invoke_agent support-agent', { kind: SpanKind.INTERNAL, attributes: attrs }, async (span) => {
    const messages = [
      { role: 'system', content: 'You are a support agent. Use the tools.' },
      { role: 'user', content: s.prompt },
    ];
    try {
      for (let turn = 0; turn < 4; turn++) {
        const msg = await chat(s, callId, messages);
        messages.push(msg);
        if (!msg.tool_calls) return msg.content;
        for (const tc of msg.tool_calls) {
          messages.push({ role: 'tool', tool_call_id: tc.id, content: await executeTool(s, tc) });
        }
      }
      throw new Error('agent loop did not finish');
    } finally {
      span.end();
    }
  });
}

for (const s of scenarios('nodeotel', '7c1e94')) {
  const callId = `call_nodeotel_${String(s.n).padStart(2, '0')}`;
  await context.with(context.active(), () => invokeAgent(s, callId));
}
await provider.shutdown();
