// The openai SDK for JavaScript: chat completions and the Responses API, whole and
// streamed, structured output parsed by zod, the Conversations API, and an error the
// SDK does not retry.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { API_KEY, BASE_URL, check } from "./check.mjs";

const client = new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: API_KEY, maxRetries: 0 });
const Person = z.object({ name: z.string(), age: z.number() });

await check("chat completion", async () => {
  const reply = await client.chat.completions.create({
    model: "sim-mini",
    messages: [{ role: "user", content: "Hello" }],
  });
  assert.match(reply.choices[0].message.content, /^\(simulated\)/);
  assert.ok(reply.usage.total_cost_usd > 0);
});

await check("chat completion streamed", async () => {
  const stream = await client.chat.completions.create({
    model: "sim-mini",
    messages: [{ role: "user", content: "Hello" }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  assert.match(text, /^\(simulated\)/);
});

await check("chat completion parsed", async () => {
  const reply = await client.chat.completions.parse({
    model: "sim-mini",
    messages: [{ role: "user", content: "Ada is 36." }],
    response_format: zodResponseFormat(Person, "person"),
  });
  assert.equal(typeof reply.choices[0].message.parsed.age, "number");
});

await check("response and its stream", async () => {
  const response = await client.responses.create({ model: "sim-mini", input: "Hello" });
  assert.match(response.output_text, /^\(simulated\)/);
  const stream = client.responses.stream({ model: "sim-mini", input: "Hello" });
  const final = await stream.finalResponse();
  assert.equal(final.status, "completed");
});

await check("response parsed", async () => {
  const response = await client.responses.parse({
    model: "sim-mini",
    input: "Ada is 36.",
    text: { format: zodTextFormat(Person, "person") },
  });
  assert.equal(typeof response.output_parsed.name, "string");
});

await check("conversation", async () => {
  const conversation = await client.conversations.create({
    items: [{ type: "message", role: "user", content: "My name is Ada." }],
  });
  const response = await client.responses.create({
    model: "sim-mini",
    input: "What is my name?",
    conversation: conversation.id,
  });
  assert.equal(response.status, "completed");
  const items = await client.conversations.items.list(conversation.id, { order: "asc" });
  assert.deepEqual(
    items.data.map((item) => item.role),
    ["user", "user", "assistant"],
  );
  const deleted = await client.conversations.delete(conversation.id);
  assert.equal(deleted.deleted, true);
});

await check("a wrong key is not retried", async () => {
  const wrong = new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: "gw-wrong-key-0000000000" });
  const started = Date.now();
  await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
  assert.ok(Date.now() - started < 2000);
});
