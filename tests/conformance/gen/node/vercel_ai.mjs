// node-vercel-ai: the Vercel AI SDK's generateText tool loop with experimental_telemetry on,
// driven by MockLanguageModelV3 from ai/test (a scripted model: a tool call, then an answer).
// The SDK validates tool input against each tool's zod schema before execute runs.
//   node vercel_ai.mjs http-protobuf|grpc|http-json
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { TOOLS, exporterFor, scenarios } from './common.mjs';

const transport = process.argv[2];
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-agent-vercel' }),
  spanProcessors: [new BatchSpanProcessor(exporterFor(transport))],
});
provider.register();

const usage = (input) => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 12, text: 12, reasoning: 0 },
});

function scriptedModel(s, callId) {
  return new MockLanguageModelV3({
    provider: 'scripted',
    modelId: 'scripted-model-1',
    doGenerate: async ({ prompt }) => {
      const answered = prompt.some((m) => m.role === 'tool');
      if (answered) {
        return {
          content: [{ type: 'text', text: s.reply }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: usage(160),
          warnings: [],
          response: { id: `resp-${callId}-2`, modelId: 'scripted-model-1', timestamp: new Date(0) },
        };
      }
      return {
        content: [{ type: 'tool-call', toolCallId: callId, toolName: s.tool, input: JSON.stringify(s.args) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: usage(80),
        warnings: [],
        response: { id: `resp-${callId}-1`, modelId: 'scripted-model-1', timestamp: new Date(0) },
      };
    },
  });
}

// Scenario 11's delete_file needs a human's approval (AI SDK 6 needsApproval), which is denied.
const APPROVAL = 11;
const toolsFor = (s) =>
  Object.fromEntries(
    Object.entries(TOOLS).map(([name, t]) => [
      name,
      tool({
        description: t.description,
        inputSchema: t.schema,
        needsApproval: s.n === APPROVAL && name === 'delete_file',
        execute: (args, { abortSignal }) => t.run(args, s.result, abortSignal),
      }),
    ]),
  );

const EXTRA = [
  // The SDK's own step timeout (timeout.stepMs) aborts the tool through execute's abortSignal.
  [10, 'export_report', (a) => ({ report_id: a }), 'framework step timeout'],
  [APPROVAL, 'delete_file', (a) => ({ path: `/srv/exports/${a}.csv` }), 'approval denied'],
];

for (const s of scenarios('vercel', 'b3d05a', EXTRA)) {
  const callId = `call_vercel_${String(s.n).padStart(2, '0')}`;
  const settings = {
    model: scriptedModel(s, callId),
    system: 'You are a support agent. Use the tools.',
    tools: toolsFor(s),
    stopWhen: stepCountIs(3),
    maxRetries: 0,
    ...(s.n === 10 ? { timeout: { stepMs: 250 } } : {}),
    experimental_telemetry: {
      isEnabled: true,
      functionId: 'support-agent',
      metadata: { sessionId: s.session, userId: 'user-vercel-7' },
    },
  };
  const messages = [{ role: 'user', content: s.prompt }];
  let out;
  try {
    out = await generateText({ ...settings, messages });
  } catch (err) {
    console.error(`vercel ${s.n} ${s.tool}: generateText threw ${err.name}: ${err.message}`);
    continue;
  }
  const request = out.content.find((p) => p.type === 'tool-approval-request');
  if (request) {
    // The operator says no: the SDK answers the model with an execution-denied tool result.
    messages.push(...out.response.messages, {
      role: 'tool',
      content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: false, reason: 'exports are deleted by the data team only' }],
    });
    out = await generateText({ ...settings, messages });
  }
  const parts = out.steps.flatMap((st) => st.content.map((p) => p.type));
  console.error(`vercel ${s.n} ${s.tool}: ${parts.join(',')}`);
}
await provider.shutdown();
