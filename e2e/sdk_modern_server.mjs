// A server built on the official TypeScript SDK v2 (@modelcontextprotocol/server,
// pinned in package.json), which speaks MCP 2026-07-28 and the legacy era on stdio
// (`serveStdio`: one server instance per era the client opens with), for the tests of
// modern servers behind mcpx. Tools: `echo {message}` and `pid {}` (its process id);
// a resource `ts://greeting`; a prompt `greet {name}`.
//
// The SDK is taken from the node_modules of $MCPX_E2E_DIR when it is set, else of
// this script's directory.

import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const e2e = process.env.MCPX_E2E_DIR ?? dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(e2e, 'package.json'));
const { McpServer, fromJsonSchema } = require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');

function build() {
    const server = new McpServer({ name: 'ts-modern-server', version: '1.0.0' });
    server.registerTool(
        'echo',
        {
            description: 'Returns the message.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { message: { type: 'string' } },
                required: ['message'],
            }),
        },
        async ({ message }) => ({ content: [{ type: 'text', text: `ts echo: ${message}` }] }),
    );
    server.registerTool(
        'pid',
        { description: "Returns the server's process id.", inputSchema: fromJsonSchema({ type: 'object' }) },
        async () => ({ content: [{ type: 'text', text: String(process.pid) }] }),
    );
    server.registerResource('greeting', 'ts://greeting', { mimeType: 'text/plain' }, async (uri) => ({
        contents: [{ uri: uri.href, text: 'hello from the ts sdk' }],
    }));
    server.registerPrompt(
        'greet',
        {
            description: 'Greets someone.',
            argsSchema: fromJsonSchema({ type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }),
        },
        async ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}!` } }] }),
    );
    return server;
}

serveStdio(build);
