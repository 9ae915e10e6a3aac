// The official MCP SDK's client (@modelcontextprotocol/client) against the gateway's
// /mcp, in the protocol generation MCP_MODE names ('legacy': the hand-shake one, the
// SDK's default; 'auto': the stateless one it probes for): every list method, a tool
// call, a resource read and a prompt get, each on the server that owns it.
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { API_KEY, BASE_URL, check } from "./check.mjs";

const mode = process.env.MCP_MODE ?? "legacy";
const client = new Client(
  { name: "gateway-js-mcp-test", version: "1.0.0" },
  { versionNegotiation: { mode } },
);
const transport = new StreamableHTTPClientTransport(new URL(`${BASE_URL}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${API_KEY}` } },
});

await check(`connect (${mode})`, async () => {
  await client.connect(transport);
  const capabilities = client.getServerCapabilities();
  assert.ok(capabilities?.tools && capabilities?.resources && capabilities?.prompts);
});

await check("list tools", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  assert.ok(names.includes("web__add") && names.includes("local__add"), names.join());
  const add = tools.find((t) => t.name === "local__add");
  assert.deepEqual(add.inputSchema.required, ["a", "b"]);
});

await check("list resources and templates", async () => {
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.uri).sort(), [
    "gateway://local/note://readme",
    "gateway://web/note://readme",
  ]);
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate).sort(), [
    "gateway://local/note://{note_id}",
    "gateway://web/note://{note_id}",
  ]);
});

await check("list prompts", async () => {
  const { prompts } = await client.listPrompts();
  assert.deepEqual(prompts.map((p) => p.name).sort(), ["local__greet", "web__greet"]);
});

await check("call a tool", async () => {
  const result = await client.callTool({ name: "web__add", arguments: { a: 19, b: 23 } });
  assert.deepEqual(result.structuredContent, { sum: 42 });
  assert.ok(!result.isError);
});

await check("read a resource, listed and by template", async () => {
  const readme = await client.readResource({ uri: "gateway://local/note://readme" });
  assert.equal(readme.contents[0].text, "tests: read me");
  const note = await client.readResource({ uri: "gateway://web/note://12" });
  assert.equal(note.contents[0].text, "tests: note 12");
});

await check("get a prompt", async () => {
  const got = await client.getPrompt({ name: "web__greet", arguments: { name: "Ada" } });
  assert.equal(got.messages[0].content.text, "Hello, Ada, from tests.");
});

await check("refuse what is not there", async () => {
  await assert.rejects(client.readResource({ uri: "gateway://web/note://readme/nothing" }));
  await assert.rejects(client.getPrompt({ name: "web__nothing", arguments: {} }));
});

await client.close();
