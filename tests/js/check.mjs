// What every client script shares: the gateway's address and key from the environment
// (set by tests/clients/test_js_clients.py), and `check`, which runs one named step and
// ends the process with a failure that says which step failed and why.
export const BASE_URL = process.env.GATEWAY_URL ?? "http://localhost:8080";
export const API_KEY = process.env.GATEWAY_API_KEY ?? "gw-dev-api-key-0000000000";

export async function check(name, step) {
  try {
    await step();
    console.log(`ok ${name}`);
  } catch (error) {
    console.error(`FAILED ${name}: ${error?.stack ?? error}`);
    process.exit(1);
  }
}
