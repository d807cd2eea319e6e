// Load the TypeScript SDK (and zod) from the node_modules the harness found:
// BENCH_NODE_MODULES (tests/interop/node/node_modules or .bench/node/node_modules).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const NM = process.env.BENCH_NODE_MODULES;
if (!NM) throw new Error('BENCH_NODE_MODULES is not set (run through `python -m bench`)');

export const sdk = path => import(pathToFileURL(join(NM, '@modelcontextprotocol/sdk/dist/esm', path)).href);
export const zod = () => import(pathToFileURL(join(NM, 'zod/index.js')).href);

export function stats() {
    const cpu = process.cpuUsage();
    return { rss: process.memoryUsage().rss, cpu: (cpu.user + cpu.system) / 1e6 };
}

export function percentile(samples, q) {
    if (!samples.length) return NaN;
    const sorted = [...samples].sort((a, b) => a - b);
    const rank = Math.max(0, Math.min(sorted.length - 1, Math.round((q / 100) * sorted.length + 0.5) - 1));
    return sorted[rank];
}
