-- wrk script for MLServer: one iris row as a V2 inference request (an FP64 tensor of shape
-- [1, 4]); headers and the WRK_JSON summary are post.lua's.
--   wrk -t1 -c16 -d15s --latency -s benchmarks/peers/lua/v2_infer.lua URL/v2/models/iris/infer

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "../../post.lua")

wrk.body = '{"inputs": [{"name": "predict", "shape": [1, 4], "datatype": "FP64", ' ..
           '"data": [5.1, 3.5, 1.4, 0.2]}]}'
