-- wrk script for benchmarks/loadgen_vs_wrk.py: MCP tools/call of echo("hello") on one
-- 2025-11-25 session, closed loop, or paced to a fixed rate when WRK_RATE is set.
--
--   WRK_RATE=2000 wrk -t1 -c16 -d5s -s benchmarks/mcp_paced.lua http://127.0.0.1:PORT/mcp -- SID
--
-- Pacing: stock wrk calls delay() before every request of a connection and waits
-- that many milliseconds before sending it. Here delay() hands out the thread's
-- send slots, one every 1000 * threads / WRK_RATE ms from the first call on (a
-- fixed schedule, read with clock_gettime through LuaJIT's FFI), to whichever
-- connection asks next. wrk measures latency from the actual send, so when the
-- server keeps up (the comparison is run at a rate it does) this is the latency
-- an open-loop generator sees too.
--
-- No response() hook: wrk then parses no headers or bodies into Lua, its
-- cheapest mode, which is the bar the CPU comparison sets.
-- done() prints one line "WRK_RESULT {json}" (latencies in microseconds).

local RATE = tonumber(os.getenv("WRK_RATE") or "0")
local THREADS = tonumber(os.getenv("WRK_THREADS") or "1")
local BODY_HEAD = '{"jsonrpc":"2.0","id":'
local BODY_TAIL = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'

local headers
next_id = 0

function init(args)
   local sid = args[1]
   if sid == nil or sid == "" then
      error("mcp_paced.lua: give the session id after --")
   end
   headers = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
      ["Mcp-Session-Id"] = sid,
      ["MCP-Protocol-Version"] = "2025-11-25",
   }
end

function request()
   next_id = next_id + 1
   return wrk.format("POST", nil, headers, BODY_HEAD .. next_id .. BODY_TAIL)
end

if RATE > 0 then
   local ffi = require("ffi")
   ffi.cdef [[
      typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
      int clock_gettime(int clock, bench_timespec *tp);
   ]]
   local now_ts = ffi.new("bench_timespec")
   local function now_ms()
      ffi.C.clock_gettime(1, now_ts) -- CLOCK_MONOTONIC
      return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
   end
   local interval = 1000 * THREADS / RATE
   local next_slot = nil

   function delay()
      local now = now_ms()
      if next_slot == nil then
         next_slot = now
      end
      local wait = next_slot - now
      next_slot = next_slot + interval
      if wait <= 0 then
         return 0
      end
      return math.ceil(wait)
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"mean":%.2f,"max":%d}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.mean, latency.max))
end
