// @modelcontextprotocol/ext-tasks 0.2.2 as a requester of the tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663) over a @modelcontextprotocol/client 2.4.0 Client
// pinned to MCP 2026-07-28, driving examples/everything_server.py over Streamable HTTP.
//
//   node ext_tasks_client.mjs <url> [pin|auto]
//
// The session is createTaskSessionFromClient(client, { endpointId, onInputRequest,
// rawDispatch, v2RequestFraming }) from the package's /client subpath. For a 2026-07-28
// tasks server the package REQUIRES rawDispatch + v2RequestFraming (the SDK Client's wire
// codecs reject resultType "task"): tools/call and tasks/* go through rawDispatch, which
// here is a plain fetch POST of the framed JSON-RPC request with the Streamable HTTP
// headers of 2026-07-28 (MCP-Protocol-Version, Mcp-Method, and Mcp-Name = params.name for
// tools/call, params.taskId for tasks/get|update|cancel, as SEP-2663 requires: the package
// passes that one itself in the dispatch context's headers, which win); the reply
// is read as JSON or as an SSE stream up to the response of that id.
//
// Steps (each {ok, value} or {ok: false, message, ...}):
//   completed       session.callTool('slow_compute', {seconds: 0.3}) -> settle()
//   input_required  session.callTool('confirm_delete', {filename}) -> settle(); the
//                   elicitation goes to onInputRequest (createApplicationInputHandler)
//                   and back as tasks/update
//   cancelled       session.callTool('slow_compute', {seconds: 60}), execution.cancel()
//                   (tasks/cancel), the outcome, then tasks/get through
//                   session.task(id).snapshot() until the status is terminal
// Prints ONE JSON report on stdout, with `raw` (every rawDispatch: the framed request,
// the headers sent, the HTTP status, the JSON-RPC response). Diagnostics go to stderr.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
    createApplicationInputHandler,
    createTaskSessionFromClient
} from '@modelcontextprotocol/ext-tasks/client';

const log = (...args) => console.error('[ext_tasks_client]', ...args);
const MODERN = '2026-07-28';
const NAME_FIELDS = {
    'tools/call': 'name',
    'prompts/get': 'name',
    'resources/read': 'uri',
    'tasks/get': 'taskId',
    'tasks/update': 'taskId',
    'tasks/cancel': 'taskId'
};

async function attempt(fn) {
    try {
        return { ok: true, value: await fn() };
    } catch (error) {
        return {
            ok: false,
            name: error?.name ?? null,
            code: error?.code ?? null,
            message: String(error?.message ?? error),
            cause: error?.cause ? String(error.cause?.message ?? error.cause) : null,
            stack: String(error?.stack ?? '').slice(0, 2000)
        };
    }
}

// A header value: visible ASCII as is, anything else as the Base64 sentinel.
function headerValue(value) {
    return /^[\x20-\x7E]*$/.test(value) && value.trim() === value
        ? value
        : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

// Read an SSE body until the JSON-RPC response with `id` arrives.
async function responseFromSse(response, id) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (value) buffer += decoder.decode(value, { stream: true });
            buffer = buffer.replace(/\r\n/g, '\n');
            let cut;
            while ((cut = buffer.indexOf('\n\n')) >= 0) {
                const event = buffer.slice(0, cut);
                buffer = buffer.slice(cut + 2);
                const data = event
                    .split('\n')
                    .filter(line => line.startsWith('data:'))
                    .map(line => line.slice(5).replace(/^ /, ''))
                    .join('\n');
                if (!data) continue;
                const message = JSON.parse(data);
                if (message.id === id && !('method' in message)) return message;
            }
            if (done) throw new Error(`the SSE stream ended without the response to ${id}`);
        }
    } finally {
        reader.cancel().catch(() => {});
    }
}

function makeRawDispatch(url, raw) {
    let next = 1;
    return async (request, options = {}) => {
        const id = `raw-${next++}`;
        const message = { jsonrpc: '2.0', id, ...request };
        const params = request.params ?? {};
        const headers = new Headers({
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': params._meta?.['io.modelcontextprotocol/protocolVersion'] ?? MODERN,
            'mcp-method': request.method
        });
        const field = NAME_FIELDS[request.method];
        if (field && typeof params[field] === 'string') headers.set('mcp-name', headerValue(params[field]));
        // The package's own per-dispatch headers win (it sets Mcp-Name = taskId itself
        // on tasks/get|update|cancel).
        const fromPackage = options.context?.headers ?? {};
        for (const [name, value] of Object.entries(fromPackage)) headers.set(name, value);
        const entry = {
            request: message,
            headers: Object.fromEntries(headers.entries()),
            package_headers: fromPackage,
            status: null,
            response: null
        };
        raw.push(entry);
        const response = await fetch(url, {
            method: 'POST',
            headers,
            body: JSON.stringify(message),
            signal: options.signal
        });
        entry.status = response.status;
        const type = response.headers.get('content-type') ?? '';
        const reply = type.includes('text/event-stream')
            ? await responseFromSse(response, id)
            : await response.json();
        entry.response = reply;
        if (reply.error) return { kind: 'error', error: reply.error };
        return { kind: 'result', result: reply.result };
    };
}

async function settleWithEvents(execution) {
    const events = [];
    const settlement = await execution.settle({
        onEvent: event => {
            events.push(
                event.type === 'task'
                    ? { type: 'task', status: event.task.status }
                    : { type: 'outcome', status: event.outcome.status }
            );
        }
    });
    const outcome = settlement.outcome;
    return {
        kind: execution.kind,
        taskId: execution.handle?.taskId ?? null,
        status: outcome.status,
        result: outcome.status === 'completed' ? outcome.result : null,
        error: outcome.status === 'failed' ? { message: outcome.error.message, code: outcome.error.code ?? null } : null,
        lastTaskStatus: settlement.lastTask?.status ?? null,
        events
    };
}

async function main() {
    const url = process.argv[2];
    const negotiation = process.argv[3] ?? 'pin';
    const report = { negotiation };
    const raw = [];
    const inputs = [];
    const clientInfo = { name: 'ext-tasks-interop', version: '0.2.2' };
    const capabilities = { elicitation: { form: {} } };
    const client = new Client(clientInfo, {
        capabilities,
        versionNegotiation: { mode: negotiation === 'auto' ? 'auto' : { pin: MODERN } }
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    report.protocol_version = client.getNegotiatedProtocolVersion?.() ?? null;
    report.era = client.getProtocolEra?.() ?? null;
    report.server_extensions = client.getServerCapabilities()?.extensions ?? null;

    const onInputRequest = createApplicationInputHandler({
        elicitation: async (request, context) => {
            inputs.push({ kind: request.kind, params: request.params, scope: context.scope, delivery: context.delivery, taskId: context.taskId ?? null, inputId: context.inputId ?? null });
            return { action: 'accept', content: { confirm: true } };
        },
        sampling: async () => {
            throw new Error('no sampling in this test');
        },
        roots: async () => ({ roots: [] })
    });
    const session = createTaskSessionFromClient(client, {
        endpointId: `ext-tasks-interop:${url}`,
        onInputRequest,
        onError: error => log('background error:', error),
        rawDispatch: makeRawDispatch(url, raw),
        v2RequestFraming: { protocolVersion: MODERN, clientInfo, clientCapabilities: capabilities }
    });
    report.session_capabilities = session.capabilities;
    try {
        report.completed = await attempt(async () =>
            settleWithEvents(await session.callTool('slow_compute', { seconds: 0.3 }))
        );
        report.input_required = await attempt(async () =>
            settleWithEvents(await session.callTool('confirm_delete', { filename: 'notes.txt' }))
        );
        report.cancelled = await attempt(async () => {
            const execution = await session.callTool('slow_compute', { seconds: 60 });
            const taskId = execution.handle?.taskId ?? null;
            await execution.cancel();
            const outcome = await execution.result();
            // What the server says now: tasks/get until terminal (cancellation is
            // eventually consistent).
            const controller = session.task(taskId);
            let view = await controller.snapshot();
            for (let i = 0; i < 100 && !['completed', 'failed', 'cancelled'].includes(view.status); i++) {
                await new Promise(resolve => setTimeout(resolve, 50));
                view = await controller.snapshot();
            }
            return { kind: execution.kind, taskId, outcome: outcome.status, server_status: view.status, server_task: view.raw };
        });
    } finally {
        await session.close().catch(error => log('close:', error));
        await client.close().catch(error => log('client close:', error));
    }
    report.inputs = inputs;
    report.raw = raw;
    return report;
}

main().then(
    report => {
        process.stdout.write(JSON.stringify(report) + '\n');
        process.exit(0);
    },
    error => {
        log('fatal:', error);
        process.exit(1);
    }
);
