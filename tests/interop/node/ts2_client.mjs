// The TypeScript SDK v2 client (@modelcontextprotocol/client 2.4.0), pinned to MCP
// 2026-07-28, driving examples/everything_server.py over Streamable HTTP.
//
//   node ts2_client.mjs <url> [pin|auto]      (default: pin, i.e. versionNegotiation
//                                               { mode: { pin: '2026-07-28' } })
//
// Steps: tools/list, test_simple_text, the multi round-trip elicitation of
// test_input_required_result_elicitation (the SDK answers the embedded elicitation/create
// with the handler registered by setRequestHandler('elicitation/create'), then retries),
// prompts/list and prompts/get, resources/list and resources/read, and listen() with
// toolsListChanged + test_trigger_tool_change (the notification reaches the handler set
// with setNotificationHandler). Prints ONE JSON report on stdout: each step as
// {ok, value} or {ok: false, ...}, the JSON-RPC wire log and, per HTTP POST, the headers
// the SDK sent. Diagnostics go to stderr.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const log = (...args) => console.error('[ts2_client]', ...args);
const MODERN = '2026-07-28';

async function attempt(fn) {
    try {
        return { ok: true, value: await fn() };
    } catch (error) {
        return { ok: false, code: error?.code ?? null, message: String(error?.message ?? error), data: error?.data ?? null };
    }
}

function recordingFetch(httpLog) {
    return async (url, init = {}) => {
        const headers = new Headers(init.headers ?? {});
        let body = null;
        if (typeof init.body === 'string') {
            try {
                body = JSON.parse(init.body);
            } catch {
                body = init.body;
            }
        }
        const entry = {
            method: init.method ?? 'GET',
            mcpMethod: headers.get('mcp-method'),
            mcpName: headers.get('mcp-name'),
            protocolVersion: headers.get('mcp-protocol-version'),
            sessionId: headers.get('mcp-session-id'),
            bodyMethod: body?.method ?? null,
            status: null
        };
        httpLog.push(entry);
        const response = await fetch(url, init);
        entry.status = response.status;
        return response;
    };
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

async function main() {
    const [url, negotiation = 'pin'] = process.argv.slice(2);
    const report = { negotiation, wire: [], http: [], elicitations: [], toolListChanged: 0 };
    const mode = negotiation === 'pin' ? { pin: MODERN } : negotiation;
    const client = new Client(
        { name: 'ts2-interop-client', version: '2.4.0' },
        { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode } }
    );
    client.setRequestHandler('elicitation/create', async request => {
        report.elicitations.push(request.params);
        return { action: 'accept', content: { name: 'Ada' } };
    });
    client.setNotificationHandler('notifications/tools/list_changed', async () => {
        report.toolListChanged += 1;
    });
    client.onerror = error => log('client error:', String(error?.message ?? error));
    const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch(report.http) });
    recordWire(transport, report.wire);
    await client.connect(transport);
    report.protocol_version = client.getNegotiatedProtocolVersion() ?? null;
    report.server_version = client.getServerVersion() ?? null;

    report.tools = await attempt(() => client.listTools());
    report.simple_text = await attempt(() => client.callTool({ name: 'test_simple_text', arguments: {} }));
    report.elicitation = await attempt(() => client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} }));
    report.prompts = await attempt(() => client.listPrompts());
    report.simple_prompt = await attempt(() => client.getPrompt({ name: 'test_simple_prompt' }));
    report.prompt_with_arguments = await attempt(() =>
        client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'one', arg2: 'two' } })
    );
    report.resources = await attempt(() => client.listResources());
    report.static_text = await attempt(() => client.readResource({ uri: 'test://static-text' }));
    report.listen = await attempt(async () => {
        const sub = await client.listen({ toolsListChanged: true });
        const triggered = await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
        for (let i = 0; i < 300 && report.toolListChanged === 0; i++) {
            await new Promise(resolve => setTimeout(resolve, 50));
        }
        const after = await client.listTools(undefined, { cacheMode: 'bypass' });
        await sub.close();
        const closed = await sub.closed;
        return {
            honored: sub.honoredFilter,
            triggered,
            notified: report.toolListChanged,
            tools_after: after.tools.map(t => t.name).sort(),
            closed
        };
    });
    report.server_version_after = client.getServerVersion() ?? null;
    await client.close();
    console.log(JSON.stringify(report));
}

main().catch(error => {
    log('fatal:', error?.stack ?? String(error));
    process.exit(1);
});
