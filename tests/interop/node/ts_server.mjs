// A TypeScript SDK server (McpServer + the experimental tasks API), for a trio-mcp client to
// drive:
//
//   node ts_server.mjs                  over stdio
//   node ts_server.mjs --http PORT      over Streamable HTTP (the SDK's
//                                       StreamableHTTPServerTransport) at
//                                       http://127.0.0.1:PORT/mcp: one McpServer per session,
//                                       all sharing one InMemoryTaskStore (which binds each task
//                                       to its session) and one InMemoryTaskMessageQueue
//   node ts_server.mjs --everything PORT  server-everything's own streamable HTTP server
//                                       (dist/transports/streamableHttp.js, PORT in its env),
//                                       made to listen on 127.0.0.1 only (it binds every
//                                       interface by itself)
//
// Tools (taskSupport):
//   echo {text}                  forbidden   plain registerTool
//   slow {ms, text?}             optional    a task finishing after `ms`
//   needs-task {text}            required    a task finishing at once
//   flaky {message}              optional    a task that ends `failed` with an isError result
//   ask {question}               required    elicits `approve` through the task's queue, so
//                                            the request reaches the client only through its
//                                            tasks/result call (the side channel)
//   sample-as-task {prompt}      forbidden   asks the CLIENT to host a sampling task
//                                            (server.experimental.tasks.createMessageStream)
//   elicit-as-task {question}    forbidden   asks the CLIENT to host an elicitation task
//                                            (server.experimental.tasks.elicitInputStream)
// Diagnostics go to stderr.

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskMessageQueue, InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { randomUUID } from 'node:crypto';
import http from 'node:http';

const POLL_INTERVAL = 100;
const log = (...args) => console.error('[ts_server]', ...args);

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();

function createServer() {
    const server = new McpServer(
        { name: 'ts-sdk-interop-server', version: '1.0.0' },
        {
            capabilities: {
                tools: {},
                tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } }
            },
            taskStore,
            taskMessageQueue
        }
    );

    const text = value => ({ content: [{ type: 'text', text: value }] });

    // Finish a task later; a task cancelled meanwhile stays cancelled (the store refuses).
    function finishLater(store, taskId, ms, status, result) {
        setTimeout(() => {
            store.storeTaskResult(taskId, status, result).catch(e => log(`task ${taskId}:`, e.message));
        }, ms);
    }

    function taskTool(create) {
        return {
            createTask: create,
            getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
            getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId)
        };
    }

    server.registerTool('echo', { description: 'Echo the text.', inputSchema: { text: z.string() } }, async ({ text: t }) =>
        text(t)
    );

    server.experimental.tasks.registerToolTask(
        'slow',
        {
            description: 'Finish after `ms` milliseconds.',
            inputSchema: { ms: z.number(), text: z.string().optional() },
            execution: { taskSupport: 'optional' }
        },
        taskTool(async ({ ms, text: t }, extra) => {
            const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: POLL_INTERVAL });
            finishLater(extra.taskStore, task.taskId, ms, 'completed', text(t ?? `slept ${ms} ms`));
            return { task };
        })
    );

    server.experimental.tasks.registerToolTask(
        'needs-task',
        { description: 'Only runs as a task.', inputSchema: { text: z.string() }, execution: { taskSupport: 'required' } },
        taskTool(async ({ text: t }, extra) => {
            const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: POLL_INTERVAL });
            finishLater(extra.taskStore, task.taskId, 0, 'completed', text(`done: ${t}`));
            return { task };
        })
    );

    server.experimental.tasks.registerToolTask(
        'flaky',
        { description: 'Fail as a task.', inputSchema: { message: z.string() }, execution: { taskSupport: 'optional' } },
        taskTool(async ({ message }, extra) => {
            const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: POLL_INTERVAL });
            finishLater(extra.taskStore, task.taskId, 10, 'failed', { ...text(message), isError: true });
            return { task };
        })
    );

    server.experimental.tasks.registerToolTask(
        'ask',
        { description: 'Ask for approval.', inputSchema: { question: z.string() }, execution: { taskSupport: 'required' } },
        taskTool(async ({ question }, extra) => {
            const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: POLL_INTERVAL });
            (async () => {
                // relatedTask queues the request: it is delivered through tasks/result only.
                const answer = await extra.sendRequest(
                    {
                        method: 'elicitation/create',
                        params: {
                            mode: 'form',
                            message: question,
                            requestedSchema: {
                                type: 'object',
                                properties: { approve: { type: 'boolean' } },
                                required: ['approve']
                            }
                        }
                    },
                    ElicitResultSchema,
                    { relatedTask: { taskId: task.taskId } }
                );
                await extra.taskStore.updateTaskStatus(task.taskId, 'working');
                const approved = answer.action === 'accept' && answer.content?.approve === true;
                await extra.taskStore.storeTaskResult(
                    task.taskId,
                    'completed',
                    text(`${approved ? 'approved' : 'declined'}: ${question}`)
                );
            })().catch(e => {
                log('ask failed:', e.message);
                extra.taskStore.storeTaskResult(task.taskId, 'failed', { ...text(String(e.message)), isError: true });
            });
            return { task };
        })
    );

    // Server -> client tasks through the SDK's own stream API.
    async function lastOf(stream) {
        const seen = [];
        let result = null;
        let error = null;
        for await (const message of stream) {
            if (message.type === 'taskCreated') seen.push('taskCreated');
            else if (message.type === 'taskStatus') seen.push(message.task.status);
            else if (message.type === 'result') result = message.result;
            else if (message.type === 'error') error = String(message.error?.message ?? message.error);
        }
        return { seen, result, error };
    }

    server.registerTool(
        'sample-as-task',
        { description: 'Have the client host a sampling task.', inputSchema: { prompt: z.string() } },
        async ({ prompt }) => {
            const outcome = await lastOf(
                server.server.experimental.tasks.createMessageStream(
                    { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 50 },
                    { task: { ttl: 60000 } }
                )
            );
            return { ...text(JSON.stringify(outcome)), structuredContent: outcome, isError: outcome.error !== null };
        }
    );

    server.registerTool(
        'elicit-as-task',
        { description: 'Have the client host an elicitation task.', inputSchema: { question: z.string() } },
        async ({ question }) => {
            const outcome = await lastOf(
                server.server.experimental.tasks.elicitInputStream(
                    {
                        mode: 'form',
                        message: question,
                        requestedSchema: {
                            type: 'object',
                            properties: { approve: { type: 'boolean' } },
                            required: ['approve']
                        }
                    },
                    { task: { ttl: 60000 } }
                )
            );
            return { ...text(JSON.stringify(outcome)), structuredContent: outcome, isError: outcome.error !== null };
        }
    );

    server.server.onerror = error => log('error:', String(error?.message ?? error));
    return server;
}

// --- Streamable HTTP ---------------------------------------------------------------------

async function serveHttp(port) {
    const transports = new Map();
    const httpServer = http.createServer(async (req, res) => {
        try {
            if (new URL(req.url, 'http://localhost').pathname !== '/mcp') {
                res.writeHead(404).end();
                return;
            }
            const sessionId = req.headers['mcp-session-id'];
            let transport = sessionId ? transports.get(sessionId) : undefined;
            if (!transport && !sessionId && req.method === 'POST') {
                // A new session (the transport refuses anything but initialize).
                transport = new StreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
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
            log('request failed:', error?.stack ?? String(error));
            if (!res.headersSent) res.writeHead(500).end();
        }
    });
    await new Promise(resolve => httpServer.listen(port, '127.0.0.1', resolve));
    log(`listening on http://127.0.0.1:${port}/mcp`);
}

// --- server-everything's own HTTP server, on loopback -------------------------------------

async function serveEverything(port) {
    // Its streamableHttp.js calls app.listen(PORT, callback): every interface. Bind loopback.
    const listen = http.Server.prototype.listen;
    http.Server.prototype.listen = function (first, ...rest) {
        if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
            const callback = rest.find(arg => typeof arg === 'function');
            return listen.call(this, Number(first), '127.0.0.1', callback);
        }
        return listen.call(this, first, ...rest);
    };
    process.env.PORT = String(port);
    await import('@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js');
}

const [flag, port] = process.argv.slice(2);
if (flag === '--http') {
    await serveHttp(Number(port));
} else if (flag === '--everything') {
    await serveEverything(Number(port));
} else {
    await createServer().connect(new StdioServerTransport());
    // The task store's TTL timers would keep node alive after the client closes stdin (the MCP
    // stdio shutdown signal): exit then, as a server should.
    process.stdin.on('end', () => process.exit(0));
    log('ready');
}
