// Benchmark client of the TypeScript SDK, over stdio (it has no WebSocket server to test with).
//   BENCH_NODE_MODULES=... node bench/peers/ts_client.mjs WORKLOAD PARAMS_JSON SERVER_ARGV...
// Spawns the server with StdioClientTransport, runs one workload, prints one JSON line.
import { performance } from 'node:perf_hooks';
import { percentile, sdk, stats } from './_sdk.mjs';

const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { CallToolResultSchema, CreateTaskResultSchema } = await sdk('types.js');

const [workload, paramsJson, command, ...args] = process.argv.slice(2);
const p = JSON.parse(paramsJson);
const TTL = 600000;
const now = () => performance.now() / 1000;

const client = new Client({ name: 'ts-sdk-bench-client', version: '1.0.0' }, { capabilities: {} });
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' }));

async function echo() {
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    if (result.content[0].text !== 'hello') throw new Error(`echo returned ${JSON.stringify(result)}`);
}

async function taskRoundtrip() {
    const created = await client.request(
        { method: 'tools/call', params: { name: 'noop', arguments: {}, task: { ttl: TTL } } },
        CreateTaskResultSchema
    );
    const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    if (result.isError) throw new Error(`noop failed: ${JSON.stringify(result)}`);
}

async function serverStats() {
    const result = await client.callTool({ name: 'stats', arguments: {} });
    return JSON.parse(result.content[0].text);
}

async function cpuMeter(fn) {
    const server0 = (await serverStats()).cpu;
    const client0 = stats().cpu;
    const out = await fn();
    const client = stats().cpu - client0;
    const server = (await serverStats()).cpu - server0;
    return { ...out, client_cpu_us: (client / out.ops) * 1e6, server_cpu_us: (server / out.ops) * 1e6 };
}

async function sequential(op) {
    for (let i = 0; i < p.warmup; i++) await op();
    return cpuMeter(async () => {
        const lat = [];
        const start = now();
        const deadline = start + p.duration;
        for (;;) {
            const t0 = now();
            await op();
            const t1 = now();
            lat.push(t1 - t0);
            if (t1 >= deadline) break;
        }
        const elapsed = now() - start;
        return {
            ops: lat.length,
            seconds: elapsed,
            rate: lat.length / elapsed,
            p50_ms: percentile(lat, 50) * 1e3,
            p99_ms: percentile(lat, 99) * 1e3
        };
    });
}

async function concurrent() {
    for (let i = 0; i < p.warmup; i++) await echo();
    return cpuMeter(async () => {
        let ops = 0;
        const start = now();
        const deadline = start + p.duration;
        const worker = async () => {
            while (now() < deadline) {
                await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
                ops++;
            }
        };
        await Promise.all(Array.from({ length: p.concurrency }, worker));
        const elapsed = now() - start;
        return { ops, seconds: elapsed, rate: ops / elapsed };
    });
}

async function windowed(n, window, fn) {
    let next = 0;
    const worker = async () => {
        while (next < n) await fn(next++);
    };
    await Promise.all(Array.from({ length: Math.min(window, n) }, worker));
}

async function walk(pageTimes) {
    let pages = 0;
    let tasks = 0;
    let cursor;
    for (;;) {
        const t0 = now();
        const page = await client.experimental.tasks.listTasks(cursor);
        pageTimes.push(now() - t0);
        pages++;
        tasks += page.tasks.length;
        cursor = page.nextCursor;
        if (!cursor) return [pages, tasks];
    }
}

// Walk every page `walks` times: the median time of one page, pages, tasks.
async function timedWalks(walks) {
    const pageTimes = [];
    let pages = 0;
    let listed = 0;
    for (let i = 0; i < walks; i++) [pages, listed] = await walk(pageTimes);
    return { page_ms: percentile(pageTimes, 50) * 1e3, pages, listed };
}

async function scale() {
    const { tasks: n, small, window } = p;
    for (let i = 0; i < p.warmup; i++) await echo();
    const rss0 = (await serverStats()).rss;
    const ids = new Array(n);
    const create = async i => {
        const created = await client.request(
            { method: 'tools/call', params: { name: 'park', arguments: {}, task: { ttl: TTL } } },
            CreateTaskResultSchema
        );
        ids[i] = created.task.taskId;
    };
    const t0 = now();
    await windowed(small, window, create);
    const listSmall = await timedWalks(p.walks_small);
    await windowed(n - small, window, i => create(small + i));
    const createS = now() - t0;
    const rss1 = (await serverStats()).rss;
    const listLarge = await timedWalks(p.walks_large);

    const lat = [];
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    for (let i = 0; i < p.gets; i++) {
        const id = ids[Math.floor(rand() * n)];
        const t1 = now();
        const task = await client.experimental.tasks.getTask(id);
        lat.push(now() - t1);
        if (task.status !== 'working') throw new Error(`task ${id} is ${task.status}`);
    }

    let errors = 0;
    const t2 = now();
    await windowed(n, window, async i => {
        try {
            const task = await client.experimental.tasks.cancelTask(ids[i]);
            if (task.status !== 'cancelled') errors++;
        } catch (error) {
            if (!errors) console.error('cancel failed:', String(error?.message ?? error));
            errors++;
        }
    });
    const cancelS = now() - t2;
    return {
        tasks: n,
        create_s: createS,
        rss_before: rss0,
        rss_after: rss1,
        rss_per_task: (rss1 - rss0) / n,
        get_p50_ms: percentile(lat, 50) * 1e3,
        get_p99_ms: percentile(lat, 99) * 1e3,
        list_small: listSmall,
        list_large: listLarge,
        cancel_s: cancelS,
        cancel_errors: errors
    };
}

const workloads = {
    'plain-seq': () => sequential(echo),
    'plain-concurrent': concurrent,
    'task-roundtrip': () => sequential(taskRoundtrip),
    scale
};
if (!(workload in workloads)) throw new Error(`the TypeScript SDK peer has no workload ${workload}`);
const result = await workloads[workload]();
await client.close();
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(0);
