// The TypeScript SDK's client driving examples/everything_server.py through every feature.
//
//   node ts_features_client.mjs <command> [args...]   spawn the server, talk over its stdio
//
// Resources (list, templates, read text/blob/template, subscribe, updates, unsubscribe),
// prompts, completion, logging, roots (with list changes), list changes of tools,
// content kinds, and elicitation (form with defaults and enums, URL mode with its
// completion notice). Prints ONE JSON report on stdout, wire log included; the pytest in
// tests/interop/test_ts_features.py asserts on it. Diagnostics go to stderr.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
    CreateMessageRequestSchema,
    ElicitationCompleteNotificationSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
    LoggingMessageNotificationSchema,
    PromptListChangedNotificationSchema,
    ResourceListChangedNotificationSchema,
    ResourceUpdatedNotificationSchema,
    ToolListChangedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js';

const log = (...args) => console.error('[ts_features_client]', ...args);
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function attempt(fn) {
    try {
        return { ok: true, value: await fn() };
    } catch (error) {
        return { ok: false, code: error?.code ?? null, message: String(error?.message ?? error), data: error?.data ?? null };
    }
}

async function waitFor(predicate, what) {
    for (let i = 0; i < 200; i++) {
        if (predicate()) return true;
        await sleep(50);
    }
    log('gave up waiting for', what);
    return false;
}

function makeClient(report) {
    let roots = [{ uri: 'file:///work', name: 'work' }];
    const client = new Client(
        { name: 'ts-sdk-features-client', version: '1.0.0' },
        { capabilities: { sampling: {}, roots: { listChanged: true }, elicitation: { form: {}, url: {} } } }
    );
    client.setRequestHandler(ListRootsRequestSchema, async () => {
        report.roots_requests += 1;
        return { roots };
    });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({
        role: 'assistant',
        content: { type: 'text', text: 'sampled by the TS client' },
        model: 'ts-model'
    }));
    client.setRequestHandler(ElicitRequestSchema, async request => {
        const params = request.params;
        report.elicitations.push(params);
        if (params.mode === 'url') return { action: 'accept' };
        const props = params.requestedSchema?.properties ?? {};
        if ('response' in props) return { action: 'accept', content: { response: 'yes' } };
        if ('untitledSingle' in props)
            return { action: 'accept', content: { untitledSingle: 'option2', titledMulti: ['value1', 'value3'] } };
        return { action: 'accept', content: { name: 'Ann', age: 31 } };
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, n => report.logs.push(n.params));
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, n => report.updated.push(n.params.uri));
    for (const [schema, kind] of [
        [ToolListChangedNotificationSchema, 'tools'],
        [ResourceListChangedNotificationSchema, 'resources'],
        [PromptListChangedNotificationSchema, 'prompts']
    ])
        client.setNotificationHandler(schema, () => report.list_changed.push(kind));
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, n =>
        report.elicitation_complete.push(n.params.elicitationId)
    );
    client.setRoots = newRoots => {
        roots = newRoots;
    };
    return client;
}

async function scenario(client, report) {
    report.server_info = client.getServerVersion();
    report.server_capabilities = client.getServerCapabilities();

    // --- resources
    report.resources = await attempt(() => client.listResources());
    report.templates = await attempt(() => client.listResourceTemplates());
    report.read_text = await attempt(() => client.readResource({ uri: 'test://static-text' }));
    report.read_blob = await attempt(() => client.readResource({ uri: 'test://static-binary' }));
    report.read_template = await attempt(() => client.readResource({ uri: 'test://template/123/data' }));
    report.read_unknown = await attempt(() => client.readResource({ uri: 'test://nonexistent' }));
    report.subscribe = await attempt(() => client.subscribeResource({ uri: 'test://watched-resource' }));
    report.update = await attempt(() =>
        client.callTool({ name: 'test_update_watched_resource', arguments: { text: 'from TS' } })
    );
    await waitFor(() => report.updated.length > 0, 'resources/updated');
    report.read_watched = await attempt(() => client.readResource({ uri: 'test://watched-resource' }));
    report.unsubscribe = await attempt(() => client.unsubscribeResource({ uri: 'test://watched-resource' }));

    // --- prompts
    report.prompts = await attempt(() => client.listPrompts());
    report.prompt_args = await attempt(() =>
        client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x', arg2: 'y' } })
    );
    report.prompt_missing = await attempt(() =>
        client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x' } })
    );
    report.prompt_image = await attempt(() => client.getPrompt({ name: 'test_prompt_with_image' }));
    report.prompt_embedded = await attempt(() =>
        client.getPrompt({ name: 'test_prompt_with_embedded_resource', arguments: { resourceUri: 'test://e' } })
    );

    // --- completion
    report.complete_prompt = await attempt(() =>
        client.complete({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'al' } })
    );
    report.complete_context = await attempt(() =>
        client.complete({
            ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
            argument: { name: 'arg2', value: '' },
            context: { arguments: { arg1: 'gamma' } }
        })
    );
    report.complete_template = await attempt(() =>
        client.complete({ ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: '4' } })
    );

    // --- logging
    report.logging_tool = await attempt(() => client.callTool({ name: 'test_tool_with_logging', arguments: {} }));
    report.set_level = await attempt(() => client.setLoggingLevel('error'));
    report.logs_before_levels = report.logs.length;
    report.levels_tool = await attempt(() => client.callTool({ name: 'test_log_levels', arguments: {} }));

    // --- roots
    await client.setLoggingLevel('info');
    report.roots_tool = await attempt(() => client.callTool({ name: 'test_list_roots', arguments: {} }));
    client.setRoots([{ uri: 'file:///tmp', name: 'tmp' }]);
    await client.sendRootsListChanged();
    await waitFor(() => report.logs.some(l => l.data === 'roots changed'), 'roots changed log');
    report.roots_tool_after = await attempt(() => client.callTool({ name: 'test_list_roots', arguments: {} }));

    // --- list changes and content
    report.toggle = await attempt(() => client.callTool({ name: 'test_toggle_dynamic_tool', arguments: {} }));
    await waitFor(() => report.list_changed.includes('tools'), 'tools/list_changed');
    report.tools = await attempt(() => client.listTools());
    report.dynamic = await attempt(() => client.callTool({ name: 'test_dynamic_tool', arguments: {} }));
    report.content = {};
    for (const name of ['test_image_content', 'test_audio_content', 'test_embedded_resource',
                        'test_multiple_content_types', 'test_resource_link', 'test_error_handling',
                        'test_simple_text'])
        report.content[name] = await attempt(() => client.callTool({ name, arguments: {} }));
    report.sampling = await attempt(() => client.callTool({ name: 'test_sampling', arguments: { prompt: 'hi' } }));

    // --- elicitation
    report.elicit_form = await attempt(() => client.callTool({ name: 'test_elicitation', arguments: { message: 'm' } }));
    report.elicit_defaults = await attempt(() =>
        client.callTool({ name: 'test_elicitation_sep1034_defaults', arguments: {} })
    );
    report.elicit_enums = await attempt(() => client.callTool({ name: 'test_elicitation_sep1330_enums', arguments: {} }));
    report.elicit_url = await attempt(() =>
        client.callTool({ name: 'test_url_elicitation', arguments: { url: 'https://example.com/consent' } })
    );
    await waitFor(() => report.elicitation_complete.length > 0, 'elicitation/complete');
}

async function main() {
    const [command, ...args] = process.argv.slice(2);
    const report = {
        sdk: 'typescript', wire: [], logs: [], updated: [], list_changed: [], elicitations: [],
        elicitation_complete: [], roots_requests: 0
    };
    const client = makeClient(report);
    client.onerror = error => log('client error:', String(error?.message ?? error));
    const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
    transport.onmessage = message => report.wire.push({ dir: 'in', msg: message });
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        report.wire.push({ dir: 'out', msg: message });
        return send(message, options);
    };
    await client.connect(transport);
    try {
        await scenario(client, report);
    } finally {
        await client.close();
    }
    process.stdout.write(JSON.stringify(report) + '\n');
}

main().then(
    () => process.exit(0),
    error => {
        log('failed:', error?.stack ?? String(error));
        process.exit(1);
    }
);
