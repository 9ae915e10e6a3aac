// The OpenAI Agents SDK for JavaScript (its default model speaks the Responses API): an
// agent with a tool and an output type, and a conversation kept by the gateway through
// OpenAIConversationsSession.
import assert from "node:assert/strict";
import {
  Agent,
  OpenAIConversationsSession,
  run,
  setDefaultOpenAIClient,
  setTracingDisabled,
  tool,
} from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";
import { API_KEY, BASE_URL, check } from "./check.mjs";

const client = new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: API_KEY, maxRetries: 0 });
setDefaultOpenAIClient(client);
setTracingDisabled(true);

await check("agent with a tool and an output type", async () => {
  const calls = [];
  const getWeather = tool({
    name: "get_weather",
    description: "Gets the weather of a city.",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `18°C and sunny in ${city}`;
    },
  });
  const agent = new Agent({
    name: "forecaster",
    instructions: "Look the weather up, then answer.",
    model: "sim-mini",
    tools: [getWeather],
    outputType: z.object({ city: z.string(), summary: z.string() }),
  });
  const result = await run(agent, "Weather in Paris?");
  assert.equal(calls.length, 1);
  assert.equal(typeof result.finalOutput.summary, "string");
});

await check("conversations session", async () => {
  const session = new OpenAIConversationsSession({ client });
  const agent = new Agent({ name: "chat", instructions: "Answer briefly.", model: "sim-mini" });
  await run(agent, "My name is Ada.", { session });
  const second = await run(agent, "What is my name?", { session });
  assert.match(second.finalOutput, /^\(simulated\)/);
  const items = await session.getItems();
  assert.equal(items.filter((item) => item.role === "user").length, 2);
  assert.equal(items.length, 4);
  await session.clearSession();
});
