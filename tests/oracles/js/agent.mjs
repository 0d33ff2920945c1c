// An A2A agent built with the official JavaScript SDK (@a2a-js/sdk, server side, Express): the second
// implementation a2a-tape is checked against (tests/oracles/test_js_sdk.py).
//
//   node agent.mjs [--dialect 1.0|0.3] [--chunks N] [--push]
//
// It listens on 127.0.0.1 (a free port) and prints "listening on http://127.0.0.1:PORT" as its first line.
// Every message starts a task that streams: the Task snapshot (SUBMITTED, with metadata), WORKING with an agent
// message, N artifact chunks on one artifact (parts with mediaType and metadata, each update with metadata),
// then COMPLETED with an agent message. Every status carries a timestamp.
//
// --push: push notifications on (the SDK's in-memory config store and its default sender: each event of a task
// POSTed, in order, to the webhook a send's config names, with the config's token).
//
// --dialect 1.0 (the default) serves v1.0 only; --dialect 0.3 serves v0.3 only, through the SDK's
// compatibility layer (legacyCompat: {enabled: true} on the card and JSON-RPC handlers).

import express from 'express';
import { TaskState, Role } from '@a2a-js/sdk';
import {
  DefaultRequestHandler,
  InMemoryTaskStore,
  AgentEvent,
  InMemoryPushNotificationStore,
  DefaultPushNotificationSender,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const dialect = option('--dialect', '1.0');
const chunks = Number(option('--chunks', '3'));
const push = process.argv.includes('--push');
if (!['1.0', '0.3'].includes(dialect) || !(chunks > 0)) {
  console.error('usage: node agent.mjs [--dialect 1.0|0.3] [--chunks N] [--push]');
  process.exit(2);
}
const legacy = dialect === '0.3';

const now = () => new Date().toISOString();
const text = (value, extra = {}) => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: '',
  ...extra,
});
const agentMessage = (ctx, value, n) => ({
  messageId: `${ctx.taskId}-agent-${n}`,
  contextId: ctx.contextId,
  taskId: ctx.taskId,
  role: Role.ROLE_AGENT,
  parts: [text(value)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

class ChunkExecutor {
  constructor() {
    this.runs = 0;
  }

  async execute(ctx, bus) {
    this.runs += 1;
    const ids = { taskId: ctx.taskId, contextId: ctx.contextId };
    bus.publish(
      AgentEvent.task({
        id: ctx.taskId,
        contextId: ctx.contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        artifacts: [],
        history: [ctx.userMessage],
        metadata: { agent: 'js-oracle' },
      }),
    );
    bus.publish(
      AgentEvent.statusUpdate({
        ...ids,
        status: {
          state: TaskState.TASK_STATE_WORKING,
          message: agentMessage(ctx, 'working on it', 0),
          timestamp: now(),
        },
        metadata: { step: 'start' },
      }),
    );
    for (let i = 0; i < chunks; i++) {
      bus.publish(
        AgentEvent.artifactUpdate({
          ...ids,
          artifact: {
            artifactId: 'art-1',
            name: 'out',
            description: 'chunks',
            parts: [text(`chunk-${i} `, { mediaType: 'text/plain', metadata: { chunk: i } })],
            metadata: { produced: 'js' },
            extensions: [],
          },
          append: i > 0,
          lastChunk: i === chunks - 1,
          metadata: { seq: i },
        }),
      );
    }
    bus.publish(
      AgentEvent.statusUpdate({
        ...ids,
        status: { state: TaskState.TASK_STATE_COMPLETED, message: agentMessage(ctx, 'done', 1), timestamp: now() },
        metadata: { step: 'done' },
      }),
    );
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId: '',
        status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
        metadata: undefined,
      }),
    );
    bus.finished();
  }
}

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'js-chunk-agent',
    description: 'streams artifact chunks (built with @a2a-js/sdk)',
    supportedInterfaces: [{ url: `${url}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: dialect }],
    provider: undefined,
    version: '1.0.0',
    documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: push, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'chunks',
        name: 'chunks',
        description: 'answers with chunks',
        tags: ['test'],
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
    iconUrl: undefined,
  };
  const configs = push ? new InMemoryPushNotificationStore() : undefined;
  // 60 s, not the SDK's 5 s: on a timeout the sender goes on to the task's next push while the first is still on its
  // way, so a loaded machine reorders what the webhook gets (through the proxy at a load of 17 on 2 cores a push's
  // round trip reached 11 s: tests/oracles/test_push_load.py); the agent's order is what the tests check
  const sender = push ? new DefaultPushNotificationSender(configs, { timeout: 60000 }) : undefined;
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new ChunkExecutor(), undefined, configs, sender);
  const compat = legacy ? { legacyCompat: { enabled: true } } : {};
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, ...compat }));
  app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, ...compat }));
  console.log(`listening on ${url}`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
