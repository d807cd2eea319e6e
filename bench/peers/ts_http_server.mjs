// The TypeScript SDK's Streamable HTTP server for `python -m bench.http`:
//
//   node ts_http_server.mjs PORT [--json]
//
// node's http server on 127.0.0.1:PORT/mcp, one McpServer + StreamableHTTPServerTransport
// per session (as the SDK's examples do), all sessions sharing one InMemoryTaskStore.
// `--json` sets `enableJsonResponse: true` (every answer application/json); without it a
// request is answered with an SSE stream. Tools: `echo {text}` (plain registerTool) and
// `noop {}` (registerToolTask, taskSupport optional: a task finishing at once, as in
// bench/peers/ts_server.mjs). Loads the SDK from BENCH_NODE_MODULES (bench/peers/_sdk.mjs).

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { sdk, zod } from './_sdk.mjs';

const { McpServer } = await sdk('server/mcp.js');
const { StreamableHTTPServerTransport } = await sdk('server/streamableHttp.js');
const { InMemoryTaskMessageQueue, InMemoryTaskStore } = await sdk('experimental/tasks/index.js');
const { z } = await zod();

const port = Number(process.argv[2]);
const enableJsonResponse = process.argv.includes('--json');
const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const text = value => ({ content: [{ type: 'text', text: value }] });

function createServer() {
    const server = new McpServer(
        { name: 'ts-sdk-bench-http', version: '1.0.0' },
        {
            capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
            taskStore,
            taskMessageQueue
        }
    );
    server.registerTool('echo', { description: 'Echo the text.', inputSchema: { text: z.string() } }, async ({ text: t }) =>
        text(t)
    );
    server.experimental.tasks.registerToolTask(
        'noop',
        { description: 'Finish at once.', inputSchema: {}, execution: { taskSupport: 'optional' } },
        {
            createTask: async (_args, extra) => {
                const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl });
                setImmediate(() => extra.taskStore.storeTaskResult(task.taskId, 'completed', text('ok')).catch(() => {}));
                return { task };
            },
            getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
            getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId)
        }
    );
    return server;
}

const transports = new Map();
const httpServer = http.createServer(async (req, res) => {
    try {
        const sessionId = req.headers['mcp-session-id'];
        let transport = sessionId ? transports.get(sessionId) : undefined;
        if (!transport && !sessionId && req.method === 'POST') {
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                enableJsonResponse,
                onsessioninitialized: id => transports.set(id, transport),
                onsessionclosed: id => transports.delete(id)
            });
            transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
            await createServer().connect(transport);
        }
        if (!transport) {
            res.writeHead(sessionId ? 404 : 400, { 'content-type': 'application/json' }).end(
                JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'No valid session' }, id: null })
            );
            return;
        }
        await transport.handleRequest(req, res);
    } catch (error) {
        console.error('[ts_http_server] request failed:', error?.stack ?? String(error));
        if (!res.headersSent) res.writeHead(500).end();
    }
});
httpServer.listen(port, '127.0.0.1', () => console.error(`[ts_http_server] http://127.0.0.1:${port}/mcp`));
