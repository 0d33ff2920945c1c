// A client built with the official JavaScript SDK (@a2a-js/sdk, client side): streams one message to an agent,
// then asks for the task (GetTask), and prints one JSON document on stdout.
//
//   node client.mjs URL DIALECT [TEXT]        DIALECT: 1.0 (native) or 0.3 (legacyCompat: {enabled: true})
//
// The document: {"dialect", "events": [StreamResponse as proto JSON, as the SDK parsed them],
// "task": Task as proto JSON (GetTask's answer), "wire": [{"method", "url", "status", "contentType",
// "headers", "request", "body"}, ...] (every HTTP exchange as the bytes the SDK's fetch saw, the body read from a tee of the
// response)}. Any failure: one line on stderr, exit 1.

import { StreamResponse, Task } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [url, dialect = '1.0', text = 'hello js'] = process.argv.slice(2);
if (!url || !['1.0', '0.3'].includes(dialect)) {
  console.error('usage: node client.mjs URL 1.0|0.3 [TEXT]');
  process.exit(2);
}

const wire = [];
const pending = [];
async function teeFetch(input, init = {}) {
  const response = await fetch(input, init);
  const entry = {
    method: init.method ?? 'GET',
    url: String(input instanceof Request ? input.url : input),
    status: response.status,
    contentType: response.headers.get('content-type'),
    headers: Object.fromEntries(response.headers),
    request: typeof init.body === 'string' ? init.body : null,
    body: null,
  };
  wire.push(entry);
  pending.push(
    response
      .clone()
      .text()
      .then((body) => {
        entry.body = body;
      }),
  );
  return response;
}

const compat = dialect === '0.3' ? { legacyCompat: { enabled: true } } : {};
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory({ fetchImpl: teeFetch, ...compat })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: teeFetch, ...compat }),
});

try {
  const client = await factory.createFromUrl(url);
  const events = [];
  let taskId = null;
  const request = {
    tenant: '',
    message: {
      messageId: `js-${process.pid}-${Date.now()}`,
      contextId: '',
      taskId: '',
      role: 1,
      parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
  for await (const event of client.sendMessageStream(request)) {
    events.push(StreamResponse.toJSON(event));
    const p = event.payload;
    if (!taskId && p) {
      taskId = p.$case === 'task' ? p.value.id : p.value.taskId ?? null;
    }
  }
  if (!taskId) throw new Error('the stream named no task');
  const task = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
  await Promise.all(pending);
  process.stdout.write(JSON.stringify({ dialect, events, task: Task.toJSON(task), wire }) + '\n');
} catch (err) {
  console.error(`client.mjs: ${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`);
  process.exit(1);
}
