-- wrk script for benchmarks/load_echo.py: POST a typical small JSON-RPC body
-- and, when done, print one line "WRK_RESULT {json}" with the summary
-- (latencies in microseconds, duration in microseconds).

wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"mean":%.2f,"max":%d,"stdev":%.2f}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.mean, latency.max, latency.stdev))
end
