// MCP 2026-07-28's permission questions through the TypeScript SDK's v2
// client (@modelcontextprotocol/client) with `auto` version negotiation,
// over HTTP: a `write` that needs permission comes back `input_required`;
// the client asks its `elicitation/create` handler and sends the call
// again. Accepted, the file is written; declined, it is not; "always", the
// next write in that context is not asked.
//
// Usage: node mrtr.mjs URL WORKSPACE

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { existsSync, readFileSync } from 'node:fs';

const [url, workspace] = process.argv.slice(2);
const answers = [];
const asked = [];
const check = (ok, what) => {
  if (!ok) {
    console.error(`FAILED: ${what}`);
    process.exit(1);
  }
};
const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('\n');

const client = new Client(
  { name: 'mrtr-ts', version: '1' },
  { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: 'auto' } },
);
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push(request.params.message);
  return answers.shift();
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

const write = (name, context) =>
  client.callTool({
    name: 'write',
    arguments: { file_path: `${workspace}/ts-${name}`, content: name },
    ...(context ? { _meta: { 'airlock/context': context } } : {}),
  });

answers.push({ action: 'accept', content: { allow: true } });
let r = await write('accepted.txt');
check(!r.isError, `accepted: ${JSON.stringify(r)}`);
check(asked.length === 1 && asked[0].includes('write wants to run'), `asked: ${asked}`);
check(readFileSync(`${workspace}/ts-accepted.txt`, 'utf8') === 'accepted.txt', 'written');

answers.push({ action: 'decline' });
r = await write('declined.txt');
check(r.isError && text(r).includes('declined'), `declined: ${JSON.stringify(r)}`);
check(!existsSync(`${workspace}/ts-declined.txt`), 'not written when declined');

answers.push({ action: 'accept', content: { allow: true, always: true } });
r = await write('always-1.txt', 'new');
check(!r.isError, `always: ${JSON.stringify(r)}`);
const context = r._meta?.['airlock/context'];
check(context?.startsWith('ctx_'), `a context id: ${JSON.stringify(r._meta)}`);
r = await write('always-2.txt', context);
check(!r.isError && asked.length === 3, `asked again after "always": ${asked.length}`);
check(existsSync(`${workspace}/ts-always-2.txt`), 'written after "always"');

await client.close();
console.log(`ts: ${asked.length} questions asked and answered`);
