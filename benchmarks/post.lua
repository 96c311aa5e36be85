-- wrk script: POST one JSON iris row, and print the summary as one JSON line for the runner.
--   wrk -t1 -c16 -d15s --latency -s benchmarks/post.lua URL [-- TARGET_MODEL]
-- TARGET_MODEL (or env WRK_TARGET_MODEL) goes in X-Amzn-SageMaker-Target-Model, for
-- POST /invocations; env WRK_BODY replaces the body; env WRK_METHOD=GET sends none;
-- env WRK_TENANTS=N sends X-Modelhost-Tenant t0 to tN-1 in turn, a request each.

wrk.method = os.getenv("WRK_METHOD") or "POST"
if wrk.method == "POST" then
   wrk.body = os.getenv("WRK_BODY") or "[5.1, 3.5, 1.4, 0.2]"
end
wrk.headers["Content-Type"] = "application/json"

function init(args)
   local model = args[1] or os.getenv("WRK_TARGET_MODEL")
   if model and model ~= "" then
      wrk.headers["X-Amzn-SageMaker-Target-Model"] = model
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'WRK_JSON {"requests": %d, "duration_us": %d, "bytes": %d, ' ..
      '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
      '"latency_us": {"mean": %.1f, "p50": %.1f, "p75": %.1f, "p90": %.1f, "p99": %.1f, ' ..
      '"p999": %.1f, "max": %.1f}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.mean, latency:percentile(50), latency:percentile(75), latency:percentile(90),
      latency:percentile(99), latency:percentile(99.9), latency.max))
end

local tenants = tonumber(os.getenv("WRK_TENANTS") or "0")
if tenants > 0 then
   local sent = 0
   request = function()
      sent = sent + 1
      wrk.headers["X-Modelhost-Tenant"] = "t" .. (sent % tenants)
      return wrk.format()
   end
end
