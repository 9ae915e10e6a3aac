// The anthropic SDK for JavaScript: a message whole and streamed, count_tokens, the
// models list, structured output parsed by zod (output_config.format) on a simulated
// model, and the tool runner, which falls back from a server-held thread to sending the
// whole conversation.
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { betaZodTool } from "@anthropic-ai/sdk/helpers/beta/zod";
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod";
import { z } from "zod";
import { API_KEY, BASE_URL, check } from "./check.mjs";

const client = new Anthropic({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0 });
const hello = [{ role: "user", content: "Hello" }];

await check("message", async () => {
  const message = await client.messages.create({ model: "sim-mini", max_tokens: 200, messages: hello });
  assert.equal(message.content[0].type, "text");
  assert.match(message.content[0].text, /^\(simulated\)/);
  assert.equal(message.stop_reason, "end_turn");
});

await check("message streamed", async () => {
  const stream = client.messages.stream({ model: "sim-mini", max_tokens: 200, messages: hello });
  let text = "";
  stream.on("text", (delta) => (text += delta));
  const final = await stream.finalMessage();
  assert.equal(final.content[0].text, text);
});

await check("count tokens and models", async () => {
  const counted = await client.messages.countTokens({ model: "sim-mini", messages: hello });
  assert.ok(counted.input_tokens > 0);
  const models = [];
  for await (const model of client.models.list()) models.push(model.id);
  assert.ok(models.includes("sim-mini"));
});

await check("structured output parsed", async () => {
  const Person = z.object({ name: z.string(), age: z.number(), languages: z.array(z.string()) });
  const message = await client.messages.parse({
    model: "sim-mini",
    max_tokens: 400,
    messages: [{ role: "user", content: "Ada, 36, speaks English and French." }],
    output_config: { format: zodOutputFormat(Person) },
  });
  assert.equal(typeof message.parsed_output.age, "number");
  assert.ok(Array.isArray(message.parsed_output.languages));
});

await check("tool runner", async () => {
  const calls = [];
  const getWeather = betaZodTool({
    name: "get_weather",
    description: "Gets the weather of a city.",
    inputSchema: z.object({ city: z.string() }),
    run: async ({ city }) => {
      calls.push(city);
      return `18°C in ${city}`;
    },
  });
  const runner = client.beta.messages.toolRunner({
    model: "sim-mini",
    max_tokens: 400,
    tools: [getWeather],
    messages: [{ role: "user", content: "Weather in Paris?" }],
  });
  const stops = [];
  for await (const message of runner) stops.push(message.stop_reason);
  assert.deepEqual(stops, ["tool_use", "end_turn"]);
  assert.equal(calls.length, 1);
});
