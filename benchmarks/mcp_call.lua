-- wrk script for benchmarks/load_mcp.py: MCP tools/call over established sessions,
-- or statelessly (2026-07-28) when the script arguments are "2026-07-28".
--
--   wrk -t2 -c64 -d10s -s benchmarks/mcp_call.lua http://127.0.0.1:PORT/mcp -- SID1 SID2
--
-- Thread N (counted from 1) uses the session id given as script argument N, so
-- each wrk thread has its own MCP session; the caller has already initialized it.
-- Every request is POST /mcp with body
--   {"jsonrpc":"2.0","id":<n>,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}
-- where <n> counts up per thread, so request ids never repeat within a session.
-- A response that is not 2xx is counted; one in SAMPLE bodies (the first one
-- included) must contain the echoed text, otherwise it counts as a mismatch.
-- done() prints one line "WRK_RESULT {json}" (latencies and duration in µs).

local SAMPLE = 100
local EXPECT = '"text":"hello"'
local BODY_HEAD = '{"jsonrpc":"2.0","id":'
local BODY_TAIL = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
local MODERN = "2026-07-28"
local MODERN_TAIL = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},' ..
   '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
   '"io.modelcontextprotocol/clientCapabilities":{}}}}'

-- main state: remember the threads so done() can collect their counters
local threads = {}
local thread_count = 0

function setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_no", thread_count)
   table.insert(threads, thread)
end

-- thread state (globals, so that done() can read them with thread:get)
next_id = 0
non2xx = 0
sampled = 0
mismatches = 0
local headers

function init(args)
   -- args[0] is the URL; the script arguments after "--" are args[1], args[2], ...
   local sid = args[thread_no]
   if sid == nil or sid == "" then
      error("mcp_call.lua: no session id for wrk thread " .. tostring(thread_no))
   end
   headers = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
   }
   if sid == MODERN then
      -- no session: the _meta envelope and the headers that mirror it
      headers["MCP-Protocol-Version"] = MODERN
      headers["Mcp-Method"] = "tools/call"
      headers["Mcp-Name"] = "echo"
      BODY_TAIL = MODERN_TAIL
   else
      headers["Mcp-Session-Id"] = sid
      headers["MCP-Protocol-Version"] = "2025-11-25"
   end
end

function request()
   next_id = next_id + 1
   return wrk.format("POST", nil, headers, BODY_HEAD .. next_id .. BODY_TAIL)
end

local seen = 0

function response(status, hdrs, body)
   if status < 200 or status > 299 then
      non2xx = non2xx + 1
   end
   seen = seen + 1
   if seen % SAMPLE == 1 then
      sampled = sampled + 1
      if body == nil or not string.find(body, EXPECT, 1, true) then
         mismatches = mismatches + 1
      end
   end
end

function done(summary, latency, requests)
   local n2, ns, nm = 0, 0, 0
   for _, t in ipairs(threads) do
      n2 = n2 + t:get("non2xx")
      ns = ns + t:get("sampled")
      nm = nm + t:get("mismatches")
   end
   local e = summary.errors
   io.write(string.format(
      'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"non2xx":%d,"sampled":%d,"mismatches":%d,' ..
      '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"mean":%.2f,"max":%d,"stdev":%.2f}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      n2, ns, nm,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.mean, latency.max, latency.stdev))
end
