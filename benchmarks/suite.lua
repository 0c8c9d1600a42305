-- wrk script for benchmarks/suite.py: one MCP scenario per run, chosen by the first
-- script argument; the session ids of the session scenarios follow it.
--
--   wrk -t2 -c64 -d10s --latency -s benchmarks/suite.lua URL -- call SID1 SID2
--   wrk -t2 -c64 -d10s --latency -s benchmarks/suite.lua URL -- call2026
--   wrk -t16 -c16 -d10s --latency -s benchmarks/suite.lua URL -- churn
--
-- Scenarios (every request is POST /mcp with Content-Type: application/json and
-- Accept: application/json, text/event-stream unless said otherwise):
--   call      tools/call echo("hello") on the thread's session (2025-11-25);
--             expects application/json with "text":"hello"
--   call2026  the same call statelessly (2026-07-28): the _meta envelope and the
--             MCP-Protocol-Version, Mcp-Method and Mcp-Name headers, no session
--   model     tools/call store_item with a fixed item (suite.py's ITEM) on the
--             thread's session; expects application/json with structuredContent
--             holding the item's name and its total, 7.5
--   progress  tools/call progress with params._meta.progressToken on the session;
--             expects text/event-stream with 3 notifications/progress and
--             the final result "progress done"
--   list      tools/list on the session; expects the last trivial tool, tool_099
--   read      resources/read of bench://blob-64k on the session; expects the
--             URI and a body of at least 65,536 bytes
--   churn     per connection, over and over: initialize (no session), then
--             notifications/initialized on the new session (202 expected), then
--             DELETE of it (200 expected). Run with as many threads as
--             connections (-tN -cN): wrk's Lua state is per thread, so one
--             connection per thread is what lets each response be matched to
--             the request it answers. Complete cycles are the operations.
--
-- Thread N (from 1) of a session scenario uses the session id given as script
-- argument N + 1. Request ids count up per thread, so they never repeat in a
-- session. A response outside 2xx counts as non2xx; one in SAMPLE responses
-- (the first included) has its body and Content-Type checked, and a failed
-- check counts as a mismatch (in churn every response is checked). done()
-- prints one line "WRK_RESULT {json}" (latencies and duration in µs).

local SAMPLE = 100
local SESSION_PROTOCOL = "2025-11-25"
local MODERN = "2026-07-28"
local MODERN_META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
   '"io.modelcontextprotocol/clientCapabilities":{}}'
local INITIALIZE = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{' ..
   '"protocolVersion":"2025-11-25","capabilities":{},' ..
   '"clientInfo":{"name":"wrk-suite","version":"1"}}}'
local INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
-- the item of the model scenario: suite.py's ITEM, and its check_model wants the same
local ITEM = '{"name":"widget","quantity":3,"price":2.5,"tags":["blue","small"],' ..
   '"due":"2026-12-31"}'

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
cycles = 0
local mode
local headers
local body_of -- id -> request body
local check -- (status, headers, body) -> true when the answer is right

local function header(hdrs, name)
   local value = hdrs[name]
   if value ~= nil then
      return value
   end
   for key, v in pairs(hdrs) do
      if string.lower(key) == name then
         return v
      end
   end
   return nil
end

local function has(body, text)
   return body ~= nil and string.find(body, text, 1, true) ~= nil
end

local function media_type(hdrs)
   return string.lower(header(hdrs, "content-type") or "")
end

local function count(body, text)
   local n, at = 0, 1
   while true do
      local found = string.find(body, text, at, true)
      if found == nil then
         return n
      end
      n = n + 1
      at = found + #text
   end
end

local SCENARIOS = {
   call = {
      body = function(id)
         return '{"jsonrpc":"2.0","id":' .. id ..
            ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
      end,
      check = function(status, hdrs, body)
         return string.find(media_type(hdrs), "application/json", 1, true) == 1
            and has(body, '"text":"hello"')
      end,
   },
   call2026 = {
      body = function(id)
         return '{"jsonrpc":"2.0","id":' .. id ..
            ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},' ..
            MODERN_META .. '}}'
      end,
      check = function(status, hdrs, body)
         return string.find(media_type(hdrs), "application/json", 1, true) == 1
            and has(body, '"text":"hello"')
      end,
   },
   model = {
      body = function(id)
         return '{"jsonrpc":"2.0","id":' .. id ..
            ',"method":"tools/call","params":{"name":"store_item","arguments":{"item":' ..
            ITEM .. '}}}'
      end,
      check = function(status, hdrs, body)
         return string.find(media_type(hdrs), "application/json", 1, true) == 1
            and has(body, '"structuredContent":{') and has(body, '"name":"widget"')
            and has(body, '"total":7.5')
      end,
   },
   progress = {
      body = function(id)
         return '{"jsonrpc":"2.0","id":' .. id ..
            ',"method":"tools/call","params":{"name":"progress","arguments":{},' ..
            '"_meta":{"progressToken":"p' .. id .. '"}}}'
      end,
      check = function(status, hdrs, body)
         return string.find(media_type(hdrs), "text/event-stream", 1, true) == 1
            and body ~= nil and count(body, '"notifications/progress"') == 3
            and has(body, '"progress done"')
      end,
   },
   list = {
      body = function(id)
         return '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/list"}'
      end,
      check = function(status, hdrs, body)
         return has(body, '"tool_099"')
      end,
   },
   read = {
      body = function(id)
         return '{"jsonrpc":"2.0","id":' .. id ..
            ',"method":"resources/read","params":{"uri":"bench://blob-64k"}}'
      end,
      check = function(status, hdrs, body)
         return has(body, '"bench://blob-64k"') and #body >= 65536
      end,
   },
}

function init(args)
   -- args[0] is the URL; the script arguments after "--" are args[1], args[2], ...
   mode = args[1]
   headers = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
   }
   if mode == "churn" then
      return
   end
   local scenario = SCENARIOS[mode]
   if scenario == nil then
      error("suite.lua: unknown scenario " .. tostring(mode))
   end
   body_of, check = scenario.body, scenario.check
   if mode == "call2026" then
      headers["MCP-Protocol-Version"] = MODERN
      headers["Mcp-Method"] = "tools/call"
      headers["Mcp-Name"] = "echo"
      return
   end
   local sid = args[thread_no + 1]
   if sid == nil or sid == "" then
      error("suite.lua: no session id for wrk thread " .. tostring(thread_no))
   end
   headers["Mcp-Session-Id"] = sid
   headers["MCP-Protocol-Version"] = SESSION_PROTOCOL
end

-- churn: the step this thread's one connection is at, and its session
local step = 1
local churn_sid = nil

local function churn_request()
   if step == 1 then
      return wrk.format("POST", nil, headers, INITIALIZE)
   end
   local h = {
      ["Mcp-Session-Id"] = churn_sid,
      ["MCP-Protocol-Version"] = SESSION_PROTOCOL,
   }
   if step == 2 then
      h["Content-Type"] = "application/json"
      h["Accept"] = "application/json, text/event-stream"
      return wrk.format("POST", nil, h, INITIALIZED)
   end
   return wrk.format("DELETE", nil, h, nil)
end

local function churn_response(status, hdrs, body)
   sampled = sampled + 1
   local ok
   if step == 1 then
      churn_sid = header(hdrs, "mcp-session-id")
      ok = status == 200 and churn_sid ~= nil and has(body, '"protocolVersion"')
   elseif step == 2 then
      ok = status == 202
   else
      ok = status == 200
      if ok then
         cycles = cycles + 1
      end
   end
   if ok and step < 3 then
      step = step + 1
   else
      if not ok then
         mismatches = mismatches + 1
      end
      step, churn_sid = 1, nil -- start over with a new session
   end
end

function request()
   if mode == "churn" then
      return churn_request()
   end
   next_id = next_id + 1
   return wrk.format("POST", nil, headers, body_of(next_id))
end

local seen = 0

function response(status, hdrs, body)
   if status < 200 or status > 299 then
      non2xx = non2xx + 1
   end
   if mode == "churn" then
      return churn_response(status, hdrs, body)
   end
   seen = seen + 1
   if seen % SAMPLE == 1 then
      sampled = sampled + 1
      if not (status >= 200 and status <= 299 and check(status, hdrs, body)) then
         mismatches = mismatches + 1
      end
   end
end

function done(summary, latency, requests)
   local n2, ns, nm, nc = 0, 0, 0, 0
   for _, t in ipairs(threads) do
      n2 = n2 + t:get("non2xx")
      ns = ns + t:get("sampled")
      nm = nm + t:get("mismatches")
      nc = nc + t:get("cycles")
   end
   local e = summary.errors
   io.write(string.format(
      'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"non2xx":%d,"sampled":%d,"mismatches":%d,"cycles":%d,' ..
      '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p99.9":%d,"mean":%.2f,"max":%d,"stdev":%.2f}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      n2, ns, nm, nc,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.mean, latency.max, latency.stdev))
end
