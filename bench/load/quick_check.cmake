# The smoke test of gradwire-bench-load (CTest bench/load_quick): a tiny run
# whose exit code and JSON must show that every simulated worker pushed and
# pulled every step on every shard without an error, and that the shards'
# memory was read after both phases.
#
#   cmake -DBENCH=path/to/gradwire-bench-load -DJSON=out.json \
#         -P bench/load/quick_check.cmake
cmake_minimum_required(VERSION 3.25)

set(workers 4)
set(shards 2)
set(steps 10)  # per phase; the run has two
file(REMOVE "${JSON}")
# A generous memory limit: this run checks the plumbing, and a few MiB of
# allocator warm-up in 20 steps is not a leak.
execute_process(
  COMMAND "${BENCH}" --workers=${workers} --shards=${shards} --steps=${steps}
          --params=65536 --partition-bytes=65536 --distinct-gradients=2
          --mode=bsp --max-rss-growth-mib=64 --json=${JSON}
  RESULT_VARIABLE exit_code
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)
message("${output}")
if(NOT exit_code EQUAL 0)
  message(FATAL_ERROR "gradwire-bench-load exited with ${exit_code}")
endif()
file(READ "${JSON}" json)

function(expect path expected)
  string(JSON value ERROR_VARIABLE error GET "${json}" ${path})
  if(error)
    message(FATAL_ERROR "${JSON}: ${path}: ${error}")
  endif()
  if(NOT "${value}" STREQUAL "${expected}")
    message(FATAL_ERROR "${JSON}: ${path} is '${value}', expected '${expected}'")
  endif()
endfunction()

math(EXPR rpcs "${workers} * ${shards} * 2 * ${steps}")
expect(errors 0)
expect(ok ON)
expect("runs;0;errors" 0)
expect("runs;0;push_rpcs" ${rpcs})
expect("runs;0;pull_rpcs" ${rpcs})
expect("runs;0;push_latency_ms;count" ${rpcs})
# BSP: every pull after the first is exactly one version behind, a delta.
math(EXPR dense "${workers} * 4")  # 4 chunks, dense on the first pull only
expect("runs;0;dense_chunks" ${dense})
# Every answered chunk counts its dense fp32 size: 65,536 parameters a pull
# step on each worker.
math(EXPR dense_pull "${workers} * 2 * ${steps} * 65536 * 4")
expect("runs;0;dense_pull_bytes" ${dense_pull})
foreach(shard 0 1)
  string(JSON rss GET "${json}" runs 0 shards ${shard}
         rss_after_second_phase_mib)
  string(JSON peak GET "${json}" runs 0 shards ${shard} peak_rss_mib)
  if(NOT rss GREATER 1 OR NOT peak GREATER_EQUAL rss)
    message(FATAL_ERROR "shard ${shard}: RSS ${rss} MiB, peak ${peak} MiB")
  endif()
endforeach()
message("bench/load_quick: ${rpcs} pushes and pulls, no errors")
