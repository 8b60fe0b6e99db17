// node-langchainjs: LangChain.js tools (zod schemas, validated by LangChain before the tool
// runs) called from a tool-calling loop inside a RunnableLambda, with a scripted chat model,
// traced by OpenInference's LangChain.js instrumentation.  A tool failure becomes an error
// ToolMessage for the model, as LangGraph's ToolNode does.
//   node langchainjs.mjs grpc|http-protobuf|http-json
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import * as CallbackManagerModule from '@langchain/core/callbacks/manager';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { RunnableLambda } from '@langchain/core/runnables';
import { tool } from '@langchain/core/tools';
import { TOOLS, exporterFor, scenarios } from './common.mjs';

const transport = process.argv[2];
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-agent-langchainjs' }),
  spanProcessors: [new BatchSpanProcessor(exporterFor(transport))],
});
provider.register();
new LangChainInstrumentation().manuallyInstrument(CallbackManagerModule);

// The scripted model: one tool call, then the final answer once a ToolMessage is in.
class ScriptedChatModel extends BaseChatModel {
  constructor(s, callId) {
    super({});
    this.s = s;
    this.callId = callId;
  }

  _llmType() {
    return 'scripted';
  }

  bindTools() {
    return this;
  }

  async _generate(messages) {
    const answered = messages.some((m) => ToolMessage.isInstance(m));
    const message = answered
      ? new AIMessage({ content: this.s.reply, id: `resp-${this.callId}-2` })
      : new AIMessage({
          content: '',
          id: `resp-${this.callId}-1`,
          tool_calls: [{ id: this.callId, name: this.s.tool, args: this.s.args, type: 'tool_call' }],
        });
    return { generations: [{ text: answered ? this.s.reply : '', message }], llmOutput: {} };
  }
}

const toolsFor = (s) =>
  Object.fromEntries(
    Object.entries(TOOLS).map(([name, t]) => [
      name,
      tool(async (args, config) => JSON.stringify(await t.run(args, s.result, config?.signal)), {
        name,
        description: t.description,
        schema: t.schema,
      }),
    ]),
  );

const agent = RunnableLambda.from(async ({ s, callId }, config) => {
  const tools = toolsFor(s);
  const model = new ScriptedChatModel(s, callId).bindTools(Object.values(tools));
  const messages = [new SystemMessage('You are a support agent. Use the tools.'), new HumanMessage(s.prompt)];
  for (let turn = 0; turn < 4; turn++) {
    const ai = await model.invoke(messages, config);
    messages.push(ai);
    if (!ai.tool_calls?.length) return ai.content;
    for (const tc of ai.tool_calls) {
      try {
        // export_report runs under LangChain's own per-call timeout (RunnableConfig.timeout).
        const callConfig = tc.name === 'export_report' ? { ...config, timeout: 250 } : config;
        messages.push(await tools[tc.name].invoke(tc, callConfig));
      } catch (err) {
        messages.push(new ToolMessage({ content: `Error: ${err.message}`, tool_call_id: tc.id, name: tc.name, status: 'error' }));
      }
    }
  }
  throw new Error('agent loop did not finish');
}).withConfig({ runName: 'support-agent' });

const EXTRA = [[10, 'export_report', (a) => ({ report_id: a }), 'framework timeout']];
for (const s of scenarios('lcjs', 'e61f27', EXTRA)) {
  const callId = `call_lcjs_${String(s.n).padStart(2, '0')}`;
  await agent.invoke({ s, callId }, { metadata: { session_id: s.session, user_id: 'user-lcjs-3' } });
}
await provider.shutdown();
