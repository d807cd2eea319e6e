// A TypeScript SDK server (McpServer + the experimental tasks API) over stdio, for a
// trio-mcp client to drive:  node ts_server.mjs
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
import { InMemoryTaskMessageQueue, InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const POLL_INTERVAL = 100;
const log = (...args) => console.error('[ts_server]', ...args);

const taskStore = new InMemoryTaskStore();
const server = new McpServer(
    { name: 'ts-sdk-interop-server', version: '1.0.0' },
    {
        capabilities: {
            tools: {},
            tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } }
        },
        taskStore,
        taskMessageQueue: new InMemoryTaskMessageQueue()
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
await server.connect(new StdioServerTransport());
// The task store's TTL timers would keep node alive after the client closes stdin (the MCP
// stdio shutdown signal): exit then, as a server should.
process.stdin.on('end', () => process.exit(0));
log('ready');
