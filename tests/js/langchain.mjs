// LangChain for JavaScript: ChatAnthropic's structured output by JSON schema (Anthropic's
// output_config.format) on a simulated model, and ChatOpenAI's tool loop.
import assert from "node:assert/strict";
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import { API_KEY, BASE_URL, check } from "./check.mjs";

const Person = z.object({ name: z.string(), age: z.number() });

await check("ChatAnthropic withStructuredOutput jsonSchema", async () => {
  const chat = new ChatAnthropic({
    model: "sim-mini",
    anthropicApiUrl: BASE_URL,
    apiKey: API_KEY,
    maxTokens: 300,
    maxRetries: 0,
  });
  const person = await chat.withStructuredOutput(Person, { method: "jsonSchema" }).invoke("Ada is 36.");
  assert.equal(typeof person.age, "number");
  const reply = await chat.invoke("Hello");
  assert.match(reply.content, /^\(simulated\)/);
});

await check("ChatOpenAI tool loop", async () => {
  const chat = new ChatOpenAI({
    model: "sim-mini",
    apiKey: API_KEY,
    configuration: { baseURL: `${BASE_URL}/v1` },
    maxRetries: 0,
  });
  const withTools = chat.bindTools([
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Gets the weather of a city.",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ]);
  const question = new HumanMessage("Weather in Paris?");
  const first = await withTools.invoke([question]);
  assert.equal(first.tool_calls.length, 1);
  const call = first.tool_calls[0];
  const answer = await withTools.invoke([question, first, new ToolMessage({ content: "18°C", tool_call_id: call.id })]);
  assert.equal(answer.tool_calls.length, 0);
});
