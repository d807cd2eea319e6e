// Benchmark server of the TypeScript SDK (McpServer + its experimental tasks API), over stdio.
//   BENCH_NODE_MODULES=... node bench/peers/ts_server.mjs
// Tools: echo (plain), stats (plain: RSS and CPU time), noop (a task finishing at once,
// from setImmediate), park (a task that stays `working` until cancelled).
import { sdk, stats, zod } from './_sdk.mjs';

const { McpServer } = await sdk('server/mcp.js');
const { StdioServerTransport } = await sdk('server/stdio.js');
const { InMemoryTaskMessageQueue, InMemoryTaskStore } = await sdk('experimental/tasks/index.js');
const { z } = await zod();

const text = value => ({ content: [{ type: 'text', text: value }] });
const server = new McpServer(
    { name: 'ts-sdk-bench', version: '1.0.0' },
    {
        capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        taskStore: new InMemoryTaskStore(),
        taskMessageQueue: new InMemoryTaskMessageQueue()
    }
);

server.registerTool('echo', { description: 'Echo the text.', inputSchema: { text: z.string() } }, async ({ text: t }) =>
    text(t)
);
server.registerTool('stats', { description: 'RSS and CPU time.', inputSchema: {} }, async () =>
    text(JSON.stringify(stats()))
);

function taskTool(start) {
    return {
        createTask: async (_args, extra) => {
            const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl });
            start(extra.taskStore, task.taskId);
            return { task };
        },
        getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
        getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId)
    };
}

server.experimental.tasks.registerToolTask(
    'noop',
    { description: 'Finish at once.', inputSchema: {}, execution: { taskSupport: 'optional' } },
    taskTool((store, taskId) =>
        setImmediate(() => store.storeTaskResult(taskId, 'completed', text('ok')).catch(() => {}))
    )
);
server.experimental.tasks.registerToolTask(
    'park',
    { description: 'Run until cancelled.', inputSchema: {}, execution: { taskSupport: 'optional' } },
    taskTool(() => {})
);

await server.connect(new StdioServerTransport());
// The task store's TTL timers would keep node alive after the client closes stdin.
process.stdin.on('end', () => process.exit(0));
