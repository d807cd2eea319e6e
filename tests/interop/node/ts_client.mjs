// The TypeScript SDK's client driving a trio-mcp server (examples/task_server.py).
//
//   node ts_client.mjs stdio <command> [args...]   spawn the server, talk over its stdio
//   node ts_client.mjs ws <url> [token]            connect with the SDK's WebSocketClientTransport
//   node ts_client.mjs http <url> [token]          connect with the SDK's StreamableHTTPClientTransport
//
// In http mode the report also has an HTTP log per client ("http" / "plain_http"): every
// fetch the transport made (method, the JSON-RPC message POSTed, status, content type, session
// header) and the JSON-RPC messages that came back on its response body (JSON or SSE), so the
// tests can tell on which stream each server message travelled. Each client ends its session
// with the SDK's terminateSession() (DELETE).
//
// It runs one fixed scenario with the real @modelcontextprotocol/sdk Client and prints ONE
// JSON report of what it observed on stdout (the pytest in tests/interop asserts on it),
// including the full wire log of every connection. Diagnostics go to stderr.
//
// Two clients take part:
//   * "main" hosts tasks itself (InMemoryTaskStore, tasks.requests.sampling.createMessage),
//     answers elicitation, and does every server-side task operation;
//   * "plain" declares sampling but no tasks, to see the server fall back to plain sampling.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import {
    CallToolResultSchema,
    CreateMessageRequestSchema,
    CreateTaskResultSchema,
    ElicitRequestSchema,
    RELATED_TASK_META_KEY
} from '@modelcontextprotocol/sdk/types.js';

const SAMPLED_TEXT = 'sampled by the TS client';
const log = (...args) => console.error('[ts_client]', ...args);

// --- transports with a wire log ------------------------------------------------------------

async function makeTransport(mode, rest, httpLog) {
    if (mode === 'stdio') {
        const [command, ...args] = rest;
        // Our whole environment (the SDK passes only a safe subset by default), so the
        // server finds trio_mcp however the test run made it importable.
        return new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
    }
    if (mode === 'ws') {
        const [url, token] = rest;
        if (typeof globalThis.WebSocket !== 'function' || token) {
            // Node 20 has no global WebSocket: give the SDK transport the `ws` package's
            // (same browser-style API). A token is sent as a bearer header, which the
            // browser API cannot do, so it also needs `ws`.
            const { WebSocket: WS } = await import('ws');
            globalThis.WebSocket = token
                ? class extends WS {
                      constructor(u, protocols) {
                          super(u, protocols, { headers: { Authorization: `Bearer ${token}` } });
                      }
                  }
                : WS;
        }
        return new WebSocketClientTransport(new URL(url));
    }
    if (mode === 'http') {
        const [url, token] = rest;
        return new StreamableHTTPClientTransport(new URL(url), {
            fetch: recordingFetch(httpLog),
            requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : undefined
        });
    }
    throw new Error(`unknown mode ${mode}`);
}

// A fetch that logs each exchange and the JSON-RPC messages of its response body: the body is
// teed, one branch for the SDK, one parsed here (JSON, or SSE events' data lines).
const NULL_BODY_STATUSES = [101, 103, 204, 205, 304];
const START = Date.now();

function recordingFetch(httpLog) {
    return async (url, init = {}) => {
        const entry = { method: init.method ?? 'GET', request: null, status: null, contentType: null, sessionId: null, messages: [] };
        if (typeof init.body === 'string') {
            try {
                entry.request = JSON.parse(init.body);
            } catch {
                entry.request = init.body;
            }
        }
        const headers = new Headers(init.headers ?? {});
        entry.sentSessionId = headers.get('mcp-session-id');
        entry.sentProtocolVersion = headers.get('mcp-protocol-version');
        entry.lastEventId = headers.get('last-event-id');
        entry.at = Date.now() - START;
        httpLog.push(entry);
        const response = await fetch(url, init);
        entry.status = response.status;
        entry.contentType = response.headers.get('content-type');
        entry.sessionId = response.headers.get('mcp-session-id');
        if (!response.body || NULL_BODY_STATUSES.includes(response.status)) return response;
        const [mine, theirs] = response.body.tee();
        readBody(mine, entry).catch(e => (entry.readError = String(e?.message ?? e)));
        return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
    };
}

async function readBody(stream, entry) {
    const sse = (entry.contentType ?? '').startsWith('text/event-stream');
    const decoder = new TextDecoder();
    let buffer = '';
    const reader = stream.getReader();
    const takeEvents = () => {
        // SSE events end with a blank line; keep the unfinished tail.
        const blocks = buffer.replace(/\r\n?/g, '\n').split('\n\n');
        buffer = blocks.pop();
        for (const block of blocks) {
            const data = block.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).replace(/^ /, ''));
            const id = block.split('\n').find(l => l.startsWith('id:'))?.slice(3).trim() ?? null;
            if (data.length === 0 || data.join('\n') === '') {
                if (id !== null) entry.messages.push({ eventId: id, priming: true });
                continue;
            }
            entry.messages.push({ eventId: id, msg: JSON.parse(data.join('\n')) });
        }
    };
    for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        if (sse) takeEvents();
    }
    if (sse) {
        buffer += '\n\n';
        takeEvents();
    } else if (buffer.trim()) {
        entry.messages.push({ eventId: null, msg: JSON.parse(buffer) });
    }
    entry.ended = Date.now() - START;
}

function recordWire(transport, wire) {
    // Protocol.connect() chains to an onmessage set before it; send() is wrapped.
    transport.onmessage = message => wire.push({ dir: 'in', msg: message });
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        wire.push({ dir: 'out', msg: message });
        return send(message, options);
    };
}

// --- helpers -----------------------------------------------------------------------------

async function attempt(fn) {
    try {
        return { ok: true, value: await fn() };
    } catch (error) {
        return { ok: false, code: error?.code ?? null, message: String(error?.message ?? error) };
    }
}

async function collect(stream) {
    const events = [];
    for await (const message of stream) {
        if (message.type === 'taskCreated') events.push({ type: 'taskCreated', task: message.task });
        else if (message.type === 'taskStatus') events.push({ type: 'taskStatus', status: message.task.status });
        else if (message.type === 'result') events.push({ type: 'result', result: message.result });
        else if (message.type === 'error')
            events.push({ type: 'error', code: message.error?.code ?? null, message: String(message.error?.message) });
    }
    return events;
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function waitFor(condition, ms) {
    for (const start = Date.now(); Date.now() - start < ms; await sleep(20)) {
        if (condition()) return true;
    }
    return false;
}

async function waitTerminal(client, taskId) {
    for (let i = 0; i < 600; i++) {
        const task = await client.experimental.tasks.getTask(taskId);
        if (['completed', 'failed', 'cancelled'].includes(task.status)) return task;
        await sleep(Math.min(task.pollInterval ?? 100, 200));
    }
    throw new Error(`task ${taskId} did not finish`);
}

// --- the clients ---------------------------------------------------------------------------

function mainClient(report) {
    const taskStore = new InMemoryTaskStore();
    const client = new Client(
        { name: 'ts-sdk-interop-client', version: '1.0.0' },
        {
            capabilities: {
                sampling: {},
                elicitation: { form: {} },
                tasks: { list: {}, cancel: {}, requests: { sampling: { createMessage: {} } } }
            },
            taskStore
        }
    );
    client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
        const params = request.params;
        const entry = {
            task: params.task ?? null,
            relatedTask: params._meta?.[RELATED_TASK_META_KEY] ?? null,
            text: params.messages?.[0]?.content?.text ?? null
        };
        report.sampling_requests.push(entry);
        const result = {
            role: 'assistant',
            content: { type: 'text', text: SAMPLED_TEXT },
            model: 'ts-test-model',
            stopReason: 'endTurn'
        };
        if (!params.task) return result;
        // Client-hosted sampling task: answer CreateTaskResult now, finish in the background.
        const task = await extra.taskStore.createTask({ ttl: params.task.ttl, pollInterval: 100 });
        entry.hostedTaskId = task.taskId;
        setTimeout(() => {
            extra.taskStore.storeTaskResult(task.taskId, 'completed', result).catch(e => log('store', e));
        }, 150);
        return { task };
    });
    client.setRequestHandler(ElicitRequestSchema, async request => {
        const params = request.params;
        const related = params._meta?.[RELATED_TASK_META_KEY]?.taskId ?? null;
        const entry = { message: params.message, mode: params.mode ?? null, relatedTask: related, task: params.task ?? null };
        // The server put its task in input_required before asking: look while we answer.
        if (related) {
            const seen = await attempt(() => client.experimental.tasks.getTask(related));
            entry.statusWhileAsked = seen.ok ? seen.value.status : `error ${seen.code}`;
        }
        report.elicitations.push(entry);
        return { action: 'accept', content: { approve: true } };
    });
    return client;
}

function plainClient(report) {
    const client = new Client(
        { name: 'ts-sdk-interop-plain', version: '1.0.0' },
        { capabilities: { sampling: {} } }
    );
    client.setRequestHandler(CreateMessageRequestSchema, async request => {
        report.plain_sampling_requests.push({ task: request.params.task ?? null });
        return { role: 'assistant', content: { type: 'text', text: SAMPLED_TEXT }, model: 'ts-test-model' };
    });
    return client;
}

// --- the scenario --------------------------------------------------------------------------

async function scenario(client, report) {
    const tasks = client.experimental.tasks;
    report.server_info = client.getServerVersion();
    report.server_capabilities = client.getServerCapabilities();
    report.ping = await attempt(() => client.ping());

    const listed = await client.listTools();
    report.tools = Object.fromEntries(listed.tools.map(t => [t.name, t.execution?.taskSupport ?? null]));

    // Plain calls.
    report.echo = await attempt(() => client.callTool({ name: 'echo', arguments: { text: 'hello' } }));
    report.fail_plain = await attempt(() => client.callTool({ name: 'fail', arguments: { message: 'boom' } }));
    report.sleep_plain = await attempt(() => client.callTool({ name: 'sleep', arguments: { seconds: 0.05 } }));
    // The SDK refuses a plain call of a `required` tool on its own...
    report.approve_plain_guard = await attempt(() =>
        client.callTool({ name: 'approve', arguments: { question: 'plain?' } })
    );
    // ...so send the raw request to see the server's answer (spec: -32601).
    report.approve_plain_raw = await attempt(() =>
        client.request(
            { method: 'tools/call', params: { name: 'approve', arguments: { question: 'plain?' } } },
            CallToolResultSchema
        )
    );
    // A task-augmented call of a `forbidden` tool (spec: -32601).
    report.echo_task_raw = await attempt(() =>
        client.request(
            { method: 'tools/call', params: { name: 'echo', arguments: { text: 'as task' } } },
            CreateTaskResultSchema,
            { task: { ttl: 60000 } }
        )
    );

    // A task-augmented call followed with the SDK's stream, with progress.
    const progress = [];
    report.sleep_stream = await collect(
        tasks.callToolStream({ name: 'sleep', arguments: { seconds: 0.3, steps: 3 } }, CallToolResultSchema, {
            task: { ttl: 60000 },
            onprogress: p => progress.push(p)
        })
    );
    report.sleep_progress = progress;
    const sleepTaskId = report.sleep_stream.find(e => e.type === 'taskCreated')?.task.taskId;
    report.sleep_get_after = await attempt(() => tasks.getTask(sleepTaskId));
    report.sleep_result_again = await attempt(() => tasks.getTaskResult(sleepTaskId, CallToolResultSchema));

    // A task created without ttl: the server picks one.
    report.no_ttl_create = await attempt(() =>
        client.request(
            { method: 'tools/call', params: { name: 'sleep', arguments: { seconds: 0 } } },
            CreateTaskResultSchema,
            { task: {} }
        )
    );

    // A failing tool as a task: the stream reports an error; tasks/result has the isError result.
    report.fail_stream = await collect(
        tasks.callToolStream({ name: 'fail', arguments: { message: 'task boom' } }, CallToolResultSchema, {
            task: { ttl: 60000 }
        })
    );
    const failTaskId = report.fail_stream.find(e => e.type === 'taskCreated')?.task.taskId;
    report.fail_get = await attempt(() => tasks.getTask(failTaskId));
    report.fail_result = await attempt(() => tasks.getTaskResult(failTaskId, CallToolResultSchema));

    // `approve` (required) with the SDK's stream: input_required, the elicitation answered.
    report.approve_stream = await collect(
        tasks.callToolStream({ name: 'approve', arguments: { question: 'ship it?' } }, CallToolResultSchema)
    );

    // `approve` again, opening tasks/result at once: the elicitation must come through it.
    const created = await client.request(
        { method: 'tools/call', params: { name: 'approve', arguments: { question: 'side channel?' } } },
        CreateTaskResultSchema,
        { task: { ttl: 60000 } }
    );
    report.approve_side_task = created.task;
    report.approve_side_result = await attempt(() => tasks.getTaskResult(created.task.taskId, CallToolResultSchema));
    report.approve_side_get = await attempt(() => tasks.getTask(created.task.taskId));

    // Cancel a long task; then it has no result, and cannot be cancelled twice.
    const long = await client.request(
        { method: 'tools/call', params: { name: 'sleep', arguments: { seconds: 60 } } },
        CreateTaskResultSchema,
        { task: { ttl: 60000 } }
    );
    report.cancel_task = long.task;
    report.cancel = await attempt(() => tasks.cancelTask(long.task.taskId));
    report.cancel_get = await attempt(() => tasks.getTask(long.task.taskId));
    report.cancel_result = await attempt(() => tasks.getTaskResult(long.task.taskId, CallToolResultSchema));
    report.cancel_again = await attempt(() => tasks.cancelTask(long.task.taskId));
    report.cancel_completed = await attempt(() => tasks.cancelTask(sleepTaskId));

    // Unknown ids and cursors.
    report.get_unknown = await attempt(() => tasks.getTask('no-such-task'));
    report.result_unknown = await attempt(() => tasks.getTaskResult('no-such-task', CallToolResultSchema));
    report.cancel_unknown = await attempt(() => tasks.cancelTask('no-such-task'));
    report.list_bad_cursor = await attempt(() => tasks.listTasks('not-a-cursor'));

    // tasks/list: every task this connection made.
    const listedTasks = [];
    let cursor;
    do {
        const page = await tasks.listTasks(cursor);
        listedTasks.push(...page.tasks);
        cursor = page.nextCursor;
    } while (cursor);
    report.list = listedTasks.map(t => ({ taskId: t.taskId, status: t.status }));
    report.created_ids = {
        sleep: sleepTaskId,
        fail: failTaskId,
        approve_side: created.task.taskId,
        cancelled: long.task.taskId,
        no_ttl: report.no_ttl_create.ok ? report.no_ttl_create.value.task.taskId : null
    };

    // `summarize` samples from this client, which hosts the sampling as its own task.
    report.summarize_plain = await attempt(() =>
        client.callTool({ name: 'summarize', arguments: { text: 'a long text' } })
    );
    report.summarize_stream = await collect(
        tasks.callToolStream({ name: 'summarize', arguments: { text: 'another text' } }, CallToolResultSchema, {
            task: { ttl: 60000 }
        })
    );
    report.client_hosted_tasks = (await taskStore_of(client).getAllTasks?.()) ?? null;
}

function taskStore_of(client) {
    return client._taskStore;
}

async function plainScenario(client, report) {
    // A second connection asking for the first one's task: found only when both carry the
    // same bearer token (tasks are bound to the identity, else to the connection).
    report.plain_get_main_task = await attempt(() => client.experimental.tasks.getTask(report.created_ids.sleep));
    report.plain_summarize = await attempt(() => client.callTool({ name: 'summarize', arguments: { text: 'plain' } }));
    // Without a tasks capability the SDK still lets us ask for a task (the server hosts it).
    const stream = await collect(
        client.experimental.tasks.callToolStream(
            { name: 'summarize', arguments: { text: 'plain as task' } },
            CallToolResultSchema,
            { task: { ttl: 60000 } }
        )
    );
    report.plain_summarize_stream = stream;
}

async function connect(client, mode, rest, wire, httpLog) {
    const transport = await makeTransport(mode, rest, httpLog);
    recordWire(transport, wire);
    client.onerror = error => log('client error:', String(error?.message ?? error));
    await client.connect(transport);
    return transport;
}

async function main() {
    const [mode, ...rest] = process.argv.slice(2);
    const report = {
        sdk: 'typescript',
        transport: mode,
        sampling_requests: [],
        plain_sampling_requests: [],
        elicitations: [],
        wire: [],
        plain_wire: [],
        http: [],
        plain_http: []
    };
    const client = mainClient(report);
    const transport = await connect(client, mode, rest, report.wire, report.http);
    try {
        await scenario(client, report);
        if (mode === 'http') {
            // The SDK re-opens, with GET, the SSE streams that ended with an error response
            // (`retry` ms later), then opens a plain GET: let that happen before the DELETE.
            report.waited_for_resumption = await waitFor(
                () =>
                    report.http.some(e => e.method === 'GET' && e.lastEventId && e.ended) &&
                    report.http.some(e => e.method === 'GET' && !e.lastEventId && e.status === 409),
                5000
            );
            report.http_session_id = transport.sessionId ?? null;
            report.terminate = await attempt(() => transport.terminateSession());
        }
    } finally {
        await client.close();
    }
    const plain = plainClient(report);
    const plainTransport = await connect(plain, mode, rest, report.plain_wire, report.plain_http);
    try {
        await plainScenario(plain, report);
        if (mode === 'http') {
            report.plain_http_session_id = plainTransport.sessionId ?? null;
            report.plain_terminate = await attempt(() => plainTransport.terminateSession());
        }
    } finally {
        await plain.close();
    }
    // Let the logged response bodies finish.
    await sleep(50);
    // Wait for the write: process.exit() would cut a report longer than the pipe's buffer.
    await new Promise(resolve => process.stdout.write(JSON.stringify(report) + '\n', resolve));
}

main().then(
    () => process.exit(0),
    error => {
        log('failed:', error?.stack ?? String(error));
        process.exit(1);
    }
);
