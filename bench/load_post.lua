-- wrk script for bench/load.py: POSTs one fixed body and prints the summary as one
-- JSON line, so the harness reads exact percentiles instead of wrk's rounded text.
-- LOAD_BODY_FILE names the body; LOAD_HEADERS holds "name: value" lines.

local function read(path)
  local file = assert(io.open(path, "rb"))
  local data = file:read("*a")
  file:close()
  return data
end

wrk.method = "POST"
wrk.body = read(os.getenv("LOAD_BODY_FILE"))
wrk.headers["Content-Type"] = "application/json"
for name, value in string.gmatch(os.getenv("LOAD_HEADERS") or "", "([^:\n]+):%s*([^\n]*)") do
  wrk.headers[name] = value
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'LOAD_RESULT {"requests": %d, "duration_us": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "write_errors": %d, "status_errors": %d, "timeouts": %d, ' ..
    '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
