#!/usr/bin/env bash
# Hopper GPU check and benchmark (issue 16; the plan is ../shared/GPU-PLAYBOOK.md). The GPU
# machines have nvcc and cuBLAS but no Halide, so the kernels are emitted (and built, when nvcc is
# here) on the development machine and carried:
#   benchmarks/gpu/run.sh emit    emits the CUDA of the smoke set and the benchmark set into
#                                 benchmarks/gpu/kernels/ (git-ignored: carry it)
#   benchmarks/gpu/run.sh build   builds kernels/bin/harness (timed) and kernels/bin/harness_debug
#                                 (a spin limit in every mbarrier wait that reports and traps);
#                                 fails on a kernel nvcc cannot build or whose ptxas register
#                                 count is below its setmaxnreg floor (setmaxnreg.inc would block)
#   benchmarks/gpu/run.sh dry     emit, then build: everything the GPU run needs, checked here
#                                 (the test gpu_dry_run runs it on the smoke set)
#   benchmarks/gpu/run.sh conformance
#                                 the conformance suite's cases as hopper libraries and runners,
#                                 with the problems their --run checked on the model, into
#                                 kernels/conformance/ (the GPU run checks each on the GPU, and
#                                 times the conformance_bench_* ones beside torch SDPA)
#   benchmarks/gpu/run.sh gpu     on the GPU machine (builds first if needed): the smoke set with
#                                 the debug build, each kernel its own process under `timeout`;
#                                 compute-sanitizer memcheck and racecheck on the smallest; the
#                                 SASS and resource report; then the benchmark set against cuBLAS
#                                 and the device-to-device copy. Rows (a timed one with its
#                                 kernel's hash from emit's hashes.txt, `kernel_hash`) go to
#                                 benchmarks/results/gpu_hopper.json, the log beside it, and $OUT.
#                                 TANDEM_GPU_NCU="name ...": those kernels also under Nsight
#                                 Compute (occupancy and its limits, L2 hit rate, DRAM bytes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# TANDEM_CLI: the tandem-cli that emits (default build/apps/tandem-cli); TANDEM_GENERATORS: the
# conformance suite's generator binary, which emits its user kernels (default
# build/tests/conformance/conformance_gen); TANDEM_GPU_KERNELS: where the kernels go (default
# benchmarks/gpu/kernels).
cli="${TANDEM_CLI:-$root/build/apps/tandem-cli}"
generators="${TANDEM_GENERATORS:-$root/build/tests/conformance/conformance_gen}"
kernels="${TANDEM_GPU_KERNELS:-$here/kernels}"
export PATH=/usr/local/cuda/bin:$PATH

# set | name | app | schedule | sizes (M N K for gemm; Lq Lk D for attention_scores; W H for
#   elementwise; D R for rmsnorm; B M N K for batched_matmul) | target
#   | more params (key=value ...)
configs=()
for s in pipelined ws ws_pingpong ws_cooperative; do
    more=""
    [ $s = ws_cooperative ] && more="TN=256"
    configs+=(
        "smoke|gemm_${s}_128x128x64|gemm|$s|128 128 64|hopper|$more"
        "smoke|gemm_${s}_256x384x128_2sm|gemm|$s|256 384 128|hopper:sms=2|$more"
        "smoke|gemm_${s}_200x136x72|gemm|$s|200 136 72|hopper|$more"
        "smoke|gemm_${s}_1x256x512|gemm|$s|1 256 512|hopper|$more"
        "smoke|gemm_${s}_96x127x31|gemm|$s|96 127 31|hopper|$more"
        "smoke|gemm_${s}_130x70x1|gemm|$s|130 70 1|hopper|$more"
        "smoke|gemm_${s}_1000x1096x520|gemm|$s|1000 1096 520|hopper|$more"
        "smoke|gemm_${s}_384x640x192|gemm|$s|384 640 192|hopper|$more"
    )
done
configs+=("smoke|gemm_ws_cooperative_tm256_300x200x136|gemm|ws_cooperative|300 200 136|hopper|TM=256 TN=128")
# Clusters (multicast of B / A; a tile-less CTA in the last cluster: 384x100 (B thread-copied,
# so local), 384x512 (B multicast), 130x390).
configs+=(
    "smoke|gemm_coop_cm2_512x512x256|gemm|ws_cooperative|512 512 256|hopper|TN=256 cluster_m=2"
    "smoke|gemm_pingpong_cn2_200x136x72|gemm|ws_pingpong|200 136 72|hopper|cluster_n=2"
    "smoke|gemm_coop_cm2_384x100x128|gemm|ws_cooperative|384 100 128|hopper|cluster_m=2"
    "smoke|gemm_pingpong_cm2_384x512x128|gemm|ws_pingpong|384 512 128|hopper|cluster_m=2"
    "smoke|gemm_ws_cn2_130x390x70|gemm|ws|130 390 70|hopper|cluster_n=2"
    "smoke|gemm_coop_cm2_1024x768x128_4sm|gemm|ws_cooperative|1024 768 128|hopper:sms=4|cluster_m=2"
)
# Attention scores S = Q K^T (K a K-major wgmma B operand: tnspB 0), against cuBLAS.
configs+=(
    "smoke|attention_256x256x128|attention_scores|ws_pingpong|256 256 128|hopper"
    "smoke|attention_200x136x72|attention_scores|ws_pingpong|200 136 72|hopper"
    "smoke|attention_300x520x128_2sm|attention_scores|ws_pingpong|300 520 128|hopper:sms=2|TN=64 stages=2"
    "bench|attention_4096x4096x128|attention_scores|ws_pingpong|4096 4096 128|hopper"
)
# Runtime shapes (issue 14): one kernel compiled at the default extents, run at these; rows of a
# multiple of 16 bytes run its TMA variant, others (the *_odd ones) its thread-copy variant.
configs+=(
    "smoke|gemm_any_ws_cooperative_200x136x72|gemm|ws_cooperative|200 136 72|hopper|shapes=runtime TN=256"
    "smoke|gemm_any_ws_pingpong_1000x1096x520|gemm|ws_pingpong|1000 1096 520|hopper|shapes=runtime"
    "smoke|gemm_any_ws_1x256x512|gemm|ws|1 256 512|hopper|shapes=runtime"
    "smoke|elementwise_any_808x5|elementwise|double_buffered|808 5|hopper|shapes=runtime"
    "smoke|rmsnorm_any_104x7|rmsnorm|double_buffered|104 7|hopper|shapes=runtime"
    "smoke|attention_any_200x136x128|attention_scores|ws_pingpong|200 136 128|hopper|shapes=runtime"
    "smoke|gemm_any_ws_cooperative_odd_201x137x71|gemm|ws_cooperative|201 137 71|hopper|shapes=runtime TN=256"
    "smoke|gemm_any_ws_pingpong_odd_1000x1097x519|gemm|ws_pingpong|1000 1097 519|hopper|shapes=runtime"
    # Only A's rows off 16 bytes (K odd, N a multiple of 8): the variant that thread-copies A alone.
    "smoke|gemm_any_ws_cooperative_odd_k_201x136x71|gemm|ws_cooperative|201 136 71|hopper|shapes=runtime TN=256"
    "smoke|gemm_any_ws_odd_k_130x64x33|gemm|ws|130 64 33|hopper|shapes=runtime"
    "smoke|elementwise_any_odd_807x5|elementwise|double_buffered|807 5|hopper|shapes=runtime"
    "smoke|rmsnorm_any_odd_101x7|rmsnorm|double_buffered|101 7|hopper|shapes=runtime"
    "smoke|attention_any_odd_200x137x128|attention_scores|ws_pingpong|200 137 128|hopper|shapes=runtime"
    # The conformance suite's batched matmul (a user's generator), by schedule, against cuBLAS's
    # strided batch.
    "smoke|batched_matmul_3x100x72x40|batched_matmul|pipelined|3 100 72 40|hopper|"
    "smoke|batched_matmul_pingpong_4x130x70x100|batched_matmul|ws_pingpong|4 130 70 100|hopper|"
    "smoke|batched_matmul_coop_5x200x136x72|batched_matmul|ws_cooperative|5 200 136 72|hopper|"
)
for s in double_buffered single_buffered sync; do
    configs+=(
        "smoke|elementwise_${s}_807x5|elementwise|$s|807 5|hopper"
        "smoke|elementwise_${s}_1x1|elementwise|$s|1 1|hopper"
        "smoke|elementwise_${s}_1024x67_2sm|elementwise|$s|1024 67|hopper:sms=2"
        "smoke|rmsnorm_${s}_100x7|rmsnorm|$s|100 7|hopper"
        "smoke|rmsnorm_${s}_4096x64_2sm|rmsnorm|$s|4096 64|hopper:sms=2"
    )
done
configs+=(
    "bench|gemm_ws_pingpong_1024|gemm|ws_pingpong|1024 1024 1024|hopper"
    "bench|gemm_ws_pingpong_2048|gemm|ws_pingpong|2048 2048 2048|hopper"
    "bench|gemm_ws_pingpong_4096|gemm|ws_pingpong|4096 4096 4096|hopper"
    "bench|gemm_ws_pingpong_8192|gemm|ws_pingpong|8192 8192 8192|hopper"
    "bench|gemm_ws_pingpong_1000x1096x520b|gemm|ws_pingpong|1000 1096 520|hopper"
    "bench|gemm_ws_4096|gemm|ws|4096 4096 4096|hopper"
    "bench|gemm_ws_8192|gemm|ws|8192 8192 8192|hopper"
    "bench|gemm_pipelined_4096|gemm|pipelined|4096 4096 4096|hopper"
    "bench|gemm_ws_cooperative_1024|gemm|ws_cooperative|1024 1024 1024|hopper|TN=256"
    "bench|gemm_ws_cooperative_2048|gemm|ws_cooperative|2048 2048 2048|hopper|TN=256"
    "bench|gemm_ws_cooperative_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "bench|gemm_ws_cooperative_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
    "bench|gemm_ws_cooperative_1000x1096x520b|gemm|ws_cooperative|1000 1096 520|hopper|TN=256"
    "bench|gemm_ws_cooperative_group8_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8"
    "bench|gemm_ws_cooperative_group8_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 group=8"
    "bench|gemm_ws_cooperative_group16_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 group=16"
    "bench|gemm_ws_cooperative_group8_4096_again|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8"
    "bench|gemm_ws_cooperative_group8_8192_again|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 group=8"
    "bench|gemm_ws_cooperative_group8_6144|gemm|ws_cooperative|6144 6144 6144|hopper|TN=256 group=8"
    "bench|gemm_ws_cooperative_group8_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256 group=8"
    "bench|gemm_ws_cooperative_tn128_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=128"
    "bench|gemm_ws_pingpong_3000x5000x2000|gemm|ws_pingpong|3000 5000 2000|hopper"
    "bench|gemm_ws_cooperative_3072x5120x2048|gemm|ws_cooperative|3072 5120 2048|hopper|TN=256"
    "bench|gemm_ws_pingpong_group8_8192|gemm|ws_pingpong|8192 8192 8192|hopper|group=8"
    "bench|gemm_ws_cooperative_tm256_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TM=256 TN=128 group=8"
    "bench|elementwise_double_buffered_8192|elementwise|double_buffered|8192 8192|hopper"
    "bench|elementwise_single_buffered_8192|elementwise|single_buffered|8192 8192|hopper"
    "bench|rmsnorm_double_buffered_4096x16384|rmsnorm|double_buffered|4096 16384|hopper"
    "bench|rmsnorm_rb2_4096x16384|rmsnorm|double_buffered|4096 16384|hopper|RB=2"
    "bench|rmsnorm_double_buffered_8192x8192|rmsnorm|double_buffered|8192 8192|hopper"
)
# Session 22: what limits rmsnorm at D = 8192, misaligned GEMM shapes, and GEMM 4096^3.
configs+=(
    "rms|rmsnorm_8192x8192|rmsnorm|double_buffered|8192 8192|hopper"
    "rms|rmsnorm_8192x8192_td4096|rmsnorm|double_buffered|8192 8192|hopper|TD=4096"
    "rms|rmsnorm_8192x8192_td2048|rmsnorm|double_buffered|8192 8192|hopper|TD=2048"
    "rms|rmsnorm_8192x8192_td4096_s3|rmsnorm|double_buffered|8192 8192|hopper|TD=4096 stages=3"
    "rms|rmsnorm_8192x8192_single|rmsnorm|single_buffered|8192 8192|hopper"
    "rms|rmsnorm_4096x16384|rmsnorm|double_buffered|4096 16384|hopper"
    "rms|rmsnorm_16384x4096|rmsnorm|double_buffered|16384 4096|hopper"
    "rms|rmsnorm_16384x4096_td4096|rmsnorm|double_buffered|16384 4096|hopper|TD=4096"
    "rms|rmsnorm_2048x32768|rmsnorm|double_buffered|2048 32768|hopper"
    "rms|rmsnorm_1024x65536|rmsnorm|double_buffered|1024 65536|hopper"
    "align|gemm_coop_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256 group=8"
    "align|gemm_coop_3072x5000x2000|gemm|ws_cooperative|3072 5000 2000|hopper|TN=256 group=8"
    "align|gemm_coop_3000x5120x2000|gemm|ws_cooperative|3000 5120 2000|hopper|TN=256 group=8"
    "align|gemm_coop_3000x5000x2048|gemm|ws_cooperative|3000 5000 2048|hopper|TN=256 group=8"
    "align|gemm_coop_3072x5120x2048|gemm|ws_cooperative|3072 5120 2048|hopper|TN=256 group=8"
    "align|gemm_coop_4000x4000x4000|gemm|ws_cooperative|4000 4000 4000|hopper|TN=256 group=8"
    "g4096|gemm_coop_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8"
    "g4096|gemm_coop_4096_s2|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8 stages=2"
    "g4096|gemm_coop_4096_g4|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=4"
    "g4096|gemm_coop_4096_g16|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=16"
    "g4096|gemm_coop_4096_tm256|gemm|ws_cooperative|4096 4096 4096|hopper|TM=256 TN=128 group=8"
    "g4096|gemm_pingpong_4096_s3|gemm|ws_pingpong|4096 4096 4096|hopper|stages=3"
    "g4096|gemm_pingpong_4096|gemm|ws_pingpong|4096 4096 4096|hopper"
    "g4096|gemm_coop_4096_again|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8"
    "g4096|gemm_coop_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 group=8"
)
# Session 22, v9: the output staged through a ring of two column blocks (4 operand stages for
# 128x256 tiles); rmsnorm in persistent CTAs (ctas_per_sm) with w staged once.
configs+=(
    "smoke2|gemm_coop_256x384x128_2sm|gemm|ws_cooperative|256 384 128|hopper:sms=2|TN=256"
    "smoke2|gemm_coop_200x520x72_f32|gemm|ws_cooperative|200 520 72|hopper|TN=256 out=f32"
    "smoke2|gemm_coop_1000x1096x520|gemm|ws_cooperative|1000 1096 520|hopper|TN=256"
    "smoke2|gemm_coop_130x300x1|gemm|ws_cooperative|130 300 1|hopper|TN=256"
    "smoke2|gemm_coop_96x255x31|gemm|ws_cooperative|96 255 31|hopper|TN=256"
    "smoke2|rmsnorm_p1_1000x77_2sm|rmsnorm|double_buffered|1000 77|hopper:sms=2|ctas_per_sm=1"
    "smoke2|rmsnorm_p1_512x45_2sm|rmsnorm|double_buffered|512 45|hopper:sms=2|ctas_per_sm=1"
    "smoke2|rmsnorm_p1_2048x9_td512_2sm|rmsnorm|double_buffered|2048 9|hopper:sms=2|ctas_per_sm=1 TD=512"
    "smoke2|rmsnorm_p1_300x13_s3_2sm|rmsnorm|double_buffered|300 13|hopper:sms=2|ctas_per_sm=1 stages=3 RB=1"
    "smoke2|rmsnorm_p1_100x7|rmsnorm|double_buffered|100 7|hopper|ctas_per_sm=1"
    "v9|gemm_coop4_1024|gemm|ws_cooperative|1024 1024 1024|hopper|TN=256 group=8"
    "v9|gemm_coop4_2048|gemm|ws_cooperative|2048 2048 2048|hopper|TN=256 group=8"
    "v9|gemm_coop4_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8"
    "v9|gemm_coop4_4096_g16|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=16"
    "v9|gemm_coop3_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8 stages=3"
    "v9|gemm_coop4_6144|gemm|ws_cooperative|6144 6144 6144|hopper|TN=256 group=8"
    "v9|gemm_coop4_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 group=8"
    "v9|gemm_coop4_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256 group=8"
    "v9|gemm_coop4_3072x5120x2048|gemm|ws_cooperative|3072 5120 2048|hopper|TN=256 group=8"
    "v9|gemm_coop4_4000|gemm|ws_cooperative|4000 4000 4000|hopper|TN=256 group=8"
    "v9|gemm_coop4_4096_again|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=8"
    "v9|gemm_coop4_8192_again|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 group=8"
    "v9|rmsnorm_p1_1024x65536|rmsnorm|double_buffered|1024 65536|hopper|ctas_per_sm=1"
    "v9|rmsnorm_p2_1024x65536|rmsnorm|double_buffered|1024 65536|hopper|ctas_per_sm=2"
    "v9|rmsnorm_p1_2048x32768|rmsnorm|double_buffered|2048 32768|hopper|ctas_per_sm=1"
    "v9|rmsnorm_p2_2048x32768|rmsnorm|double_buffered|2048 32768|hopper|ctas_per_sm=2"
    "v9|rmsnorm_p1_4096x16384|rmsnorm|double_buffered|4096 16384|hopper|ctas_per_sm=1"
    "v9|rmsnorm_p2_4096x16384|rmsnorm|double_buffered|4096 16384|hopper|ctas_per_sm=2"
    "v9|rmsnorm_p1_4096x16384_s3|rmsnorm|double_buffered|4096 16384|hopper|ctas_per_sm=1 stages=3"
    "v9|rmsnorm_p1_8192x8192|rmsnorm|double_buffered|8192 8192|hopper|ctas_per_sm=1"
    "v9|rmsnorm_p2_8192x8192|rmsnorm|double_buffered|8192 8192|hopper|ctas_per_sm=2"
    "v9|rmsnorm_p1_16384x4096|rmsnorm|double_buffered|16384 4096|hopper|ctas_per_sm=1"
    "v9|rmsnorm_p2_16384x4096|rmsnorm|double_buffered|16384 4096|hopper|ctas_per_sm=2"
    "v9|rmsnorm_8192x8192_cta|rmsnorm|double_buffered|8192 8192|hopper"
    "v9|rmsnorm_4096x16384_cta|rmsnorm|double_buffered|4096 16384|hopper"
)
# v10: f32 outputs through the ring (the harness now reads f32 C), rmsnorm with w loaded with
# its tile (a CTA per tile), a warp per row in multi-row reductions, invariant scalars hoisted.
configs+=(
    "smoke3|gemm_coop_200x520x72_f32b|gemm|ws_cooperative|200 520 72|hopper|TN=256 out=f32"
    "smoke3|gemm_pingpong_256x384x136_f32_2sm|gemm|ws_pingpong|256 384 136|hopper:sms=2|out=f32"
    "smoke3|gemm_ws_200x136x72_f32|gemm|ws|200 136 72|hopper|out=f32"
    "smoke3|gemm_pingpong_129x144x110_f32|gemm|ws_pingpong|129 144 110|hopper|out=f32"
    "smoke3|rmsnorm_cta_100x7|rmsnorm|double_buffered|100 7|hopper"
    "smoke3|rmsnorm_cta_1000x77_rb8|rmsnorm|double_buffered|1000 77|hopper|RB=8"
    "smoke3|rmsnorm_cta_4096x64_2sm|rmsnorm|double_buffered|4096 64|hopper:sms=2"
    "smoke3|rmsnorm_p2_512x45_2sm|rmsnorm|double_buffered|512 45|hopper:sms=2|ctas_per_sm=2"
    "smoke3|rmsnorm_single_1000x77_rb4|rmsnorm|single_buffered|1000 77|hopper|RB=4"
    "v10|rmsnorm_cta_1024x65536|rmsnorm|double_buffered|1024 65536|hopper"
    "v10|rmsnorm_cta_1024x65536_rb4|rmsnorm|double_buffered|1024 65536|hopper|RB=4"
    "v10|rmsnorm_p2_1024x65536|rmsnorm|double_buffered|1024 65536|hopper|ctas_per_sm=2"
    "v10|rmsnorm_p3_1024x65536|rmsnorm|double_buffered|1024 65536|hopper|ctas_per_sm=3"
    "v10|rmsnorm_p4_1024x65536|rmsnorm|double_buffered|1024 65536|hopper|ctas_per_sm=4"
    "v10|rmsnorm_cta_2048x32768|rmsnorm|double_buffered|2048 32768|hopper"
    "v10|rmsnorm_cta_2048x32768_rb2|rmsnorm|double_buffered|2048 32768|hopper|RB=2"
    "v10|rmsnorm_p2_2048x32768|rmsnorm|double_buffered|2048 32768|hopper|ctas_per_sm=2"
    "v10|rmsnorm_p3_2048x32768|rmsnorm|double_buffered|2048 32768|hopper|ctas_per_sm=3"
    "v10|rmsnorm_cta_4096x16384|rmsnorm|double_buffered|4096 16384|hopper"
    "v10|rmsnorm_p2_4096x16384|rmsnorm|double_buffered|4096 16384|hopper|ctas_per_sm=2"
    "v10|rmsnorm_cta_8192x8192|rmsnorm|double_buffered|8192 8192|hopper"
    "v10|rmsnorm_p1_8192x8192|rmsnorm|double_buffered|8192 8192|hopper|ctas_per_sm=1"
    "v10|rmsnorm_cta_16384x4096|rmsnorm|double_buffered|16384 4096|hopper"
    "v10|rmsnorm_cta_16384x4096_td2048|rmsnorm|double_buffered|16384 4096|hopper|TD=2048"
    "v10|rmsnorm_p1_16384x4096_td4096|rmsnorm|double_buffered|16384 4096|hopper|ctas_per_sm=1 TD=4096"
    "v10|rmsnorm_p2_16384x4096_td2048|rmsnorm|double_buffered|16384 4096|hopper|ctas_per_sm=2 TD=2048"
    "v10|elementwise_double_8192|elementwise|double_buffered|8192 8192|hopper"
    "v10|elementwise_single_8192|elementwise|single_buffered|8192 8192|hopper"
    "v10|gemm_pingpong_f32_4096|gemm|ws_pingpong|4096 4096 4096|hopper|out=f32"
    "v10|gemm_coop_f32_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 out=f32"
    "v10|gemm_coop4b_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v10|gemm_coop4b_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
)
# v11: rmsnorm's Hopper defaults (about 16 KB of rows per tile, 2048-value chunks) across D, and
# chunked rows at D = 8192.
configs+=(
    "v11|rmsnorm_1024x65536|rmsnorm|double_buffered|1024 65536|hopper"
    "v11|rmsnorm_2048x32768|rmsnorm|double_buffered|2048 32768|hopper"
    "v11|rmsnorm_4096x16384|rmsnorm|double_buffered|4096 16384|hopper"
    "v11|rmsnorm_8192x8192|rmsnorm|double_buffered|8192 8192|hopper"
    "v11|rmsnorm_8192x8192_td2048|rmsnorm|double_buffered|8192 8192|hopper|TD=2048"
    "v11|rmsnorm_8192x8192_td1024|rmsnorm|double_buffered|8192 8192|hopper|TD=1024"
    "v11|rmsnorm_16384x4096|rmsnorm|double_buffered|16384 4096|hopper"
    "v11|rmsnorm_16384x4096_td1024|rmsnorm|double_buffered|16384 4096|hopper|TD=1024"
    "v11|rmsnorm_1000x77777|rmsnorm|double_buffered|1000 77777|hopper"
    "v11|rmsnorm_single_4096x16384|rmsnorm|single_buffered|4096 16384|hopper"
    "v11|elementwise_double_8192b|elementwise|double_buffered|8192 8192|hopper"
    "v11|elementwise_single_8192b|elementwise|single_buffered|8192 8192|hopper"
    "v11|gemm_coop_1024|gemm|ws_cooperative|1024 1024 1024|hopper|TN=256"
    "v11|gemm_coop_2048|gemm|ws_cooperative|2048 2048 2048|hopper|TN=256"
    "v11|gemm_coop_4096_1|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v11|gemm_coop_4096_2|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v11|gemm_coop_6144|gemm|ws_cooperative|6144 6144 6144|hopper|TN=256"
    "v11|gemm_coop_8192_1|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
    "v11|gemm_coop_8192_2|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
    "v11|gemm_pingpong_1024|gemm|ws_pingpong|1024 1024 1024|hopper"
    "v11|gemm_pingpong_2048|gemm|ws_pingpong|2048 2048 2048|hopper"
    "v11|gemm_pingpong_4096|gemm|ws_pingpong|4096 4096 4096|hopper"
    "v11|gemm_ws_4096|gemm|ws|4096 4096 4096|hopper"
    "v11|gemm_pipelined_4096|gemm|pipelined|4096 4096 4096|hopper"
    "v11|gemm_coop_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256"
    "v11|gemm_coop_1000x1096x520|gemm|ws_cooperative|1000 1096 520|hopper|TN=256"
    "v11|gemm_pingpong_1000x1096x520|gemm|ws_pingpong|1000 1096 520|hopper"
)
# v12: rmsnorm's software pipeline on two warpgroups (warpgroups=2: cooperative() without
# warp_specialize()); a ring store whose tail tile's stage is narrower.
configs+=(
    "smoke4|rmsnorm_wg2_100x7|rmsnorm|double_buffered|100 7|hopper|warpgroups=2"
    "smoke4|rmsnorm_wg2_1000x77|rmsnorm|double_buffered|1000 77|hopper|warpgroups=2"
    "smoke4|rmsnorm_wg2_4096x64_2sm|rmsnorm|double_buffered|4096 64|hopper:sms=2|warpgroups=2"
    "smoke4|rmsnorm_wg2_8192x9|rmsnorm|double_buffered|8192 9|hopper|warpgroups=2"
    "smoke4|rmsnorm_wg2_p1_1000x77_2sm|rmsnorm|double_buffered|1000 77|hopper:sms=2|warpgroups=2 ctas_per_sm=1"
    "smoke4|rmsnorm_wg2_single_1000x77|rmsnorm|single_buffered|1000 77|hopper|warpgroups=2"
    "smoke4|gemm_pingpong_128x320x65_f32|gemm|ws_pingpong|128 320 65|hopper|out=f32"
    "v12|rmsnorm_wg2_1024x65536|rmsnorm|double_buffered|1024 65536|hopper|warpgroups=2"
    "v12|rmsnorm_wg2_2048x32768|rmsnorm|double_buffered|2048 32768|hopper|warpgroups=2"
    "v12|rmsnorm_wg2_4096x16384|rmsnorm|double_buffered|4096 16384|hopper|warpgroups=2"
    "v12|rmsnorm_wg2_8192x8192|rmsnorm|double_buffered|8192 8192|hopper|warpgroups=2"
    "v12|rmsnorm_wg2_16384x4096|rmsnorm|double_buffered|16384 4096|hopper|warpgroups=2"
    "v12|rmsnorm_wg2_p1_8192x8192|rmsnorm|double_buffered|8192 8192|hopper|warpgroups=2 ctas_per_sm=1"
    "v12|rmsnorm_wg2_p1_16384x4096|rmsnorm|double_buffered|16384 4096|hopper|warpgroups=2 ctas_per_sm=1"
    "v12|rmsnorm_wg2_p2_4096x16384|rmsnorm|double_buffered|4096 16384|hopper|warpgroups=2 ctas_per_sm=2"
    "v12|rmsnorm_8192x8192_wg1|rmsnorm|double_buffered|8192 8192|hopper"
    "v12|rmsnorm_4096x16384_wg1|rmsnorm|double_buffered|4096 16384|hopper"
    "v12|gemm_coop_4096_v12|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
)
# v13: rmsnorm's Hopper default is two warpgroups; D = 16384 with whole rows (one CTA per SM).
configs+=(
    "v13|rmsnorm_1024x65536_v13|rmsnorm|double_buffered|1024 65536|hopper"
    "v13|rmsnorm_2048x32768_v13|rmsnorm|double_buffered|2048 32768|hopper"
    "v13|rmsnorm_4096x16384_v13|rmsnorm|double_buffered|4096 16384|hopper"
    "v13|rmsnorm_8192x8192_v13|rmsnorm|double_buffered|8192 8192|hopper"
    "v13|rmsnorm_16384x4096_v13|rmsnorm|double_buffered|16384 4096|hopper"
    "v13|rmsnorm_16384x4096_whole|rmsnorm|double_buffered|16384 4096|hopper|TD=16384"
    "v13|rmsnorm_16384x4096_td4096|rmsnorm|double_buffered|16384 4096|hopper|TD=4096"
    "v13|rmsnorm_16384x4096_td8192|rmsnorm|double_buffered|16384 4096|hopper|TD=8192"
    "v13|rmsnorm_1000x77777_v13|rmsnorm|double_buffered|1000 77777|hopper"
    "v13|rmsnorm_single_8192x8192|rmsnorm|single_buffered|8192 8192|hopper"
    "v13|rmsnorm_sync_8192x8192|rmsnorm|sync|8192 8192|hopper"
)
# v14: rmsnorm at D = 16384 (chunk size x ring depth), misaligned GEMM variants.
configs+=(
    "v14|rmsnorm_16384_td1024_s2|rmsnorm|double_buffered|16384 4096|hopper|TD=1024 stages=2"
    "v14|rmsnorm_16384_td1024_s3|rmsnorm|double_buffered|16384 4096|hopper|TD=1024 stages=3"
    "v14|rmsnorm_16384_td1024_s4|rmsnorm|double_buffered|16384 4096|hopper|TD=1024 stages=4"
    "v14|rmsnorm_16384_td2048_s3|rmsnorm|double_buffered|16384 4096|hopper|TD=2048 stages=3"
    "v14|rmsnorm_16384_td2048_s4|rmsnorm|double_buffered|16384 4096|hopper|TD=2048 stages=4"
    "v14|rmsnorm_16384_td512_s4|rmsnorm|double_buffered|16384 4096|hopper|TD=512 stages=4"
    "v14|rmsnorm_16384_td2048_wg1|rmsnorm|double_buffered|16384 4096|hopper|TD=2048 warpgroups=1"
    "v14|gemm_coop_3000x5000x2000_g1|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256 group=1"
    "v14|gemm_coop_3000x5000x2000_g16|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256 group=16"
    "v14|gemm_coop_3000x5000x2000_tm256|gemm|ws_cooperative|3000 5000 2000|hopper|TM=256 TN=128"
    "v14|gemm_pingpong_3000x5000x2000|gemm|ws_pingpong|3000 5000 2000|hopper"
    "v14|gemm_coop_3000x5000x2000_s3|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256 stages=3"
    "v14|gemm_coop_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256"
    "v14|gemm_coop_3000x5008x2000|gemm|ws_cooperative|3000 5008 2000|hopper|TN=256"
    "v14|gemm_coop_3000x5056x2000|gemm|ws_cooperative|3000 5056 2000|hopper|TN=256"
    # Session 27: persistent elementwise (the ring across tiles), the lone producer thread and the
    # grid sized from the SM count (every persistent gemm above), runtime-shape kernels.
    "v15|elementwise_8192_cta|elementwise|double_buffered|8192 8192|hopper"
    "v15|elementwise_8192_p1|elementwise|double_buffered|8192 8192|hopper|ctas_per_sm=1"
    "v15|elementwise_8192_p2|elementwise|double_buffered|8192 8192|hopper|ctas_per_sm=2"
    "v15|elementwise_8192_p1_s3|elementwise|double_buffered|8192 8192|hopper|ctas_per_sm=1 stages=3"
    "v15|gemm_coop_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v15|gemm_coop_8192|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
    "v15|gemm_pingpong_4096|gemm|ws_pingpong|4096 4096 4096|hopper"
    # Session 28: attention scores (K-major B) against cuBLAS; runtime-shape kernels against the
    # static one, aligned (TMA variant) and with odd rows (thread-copy variant).
    "v16|attention_4096x4096x128_v16|attention_scores|ws_pingpong|4096 4096 128|hopper"
    "v16|attention_8192x8192x128|attention_scores|ws_pingpong|8192 8192 128|hopper"
    "v16|attention_8192x8192x64|attention_scores|ws_pingpong|8192 8192 64|hopper"
    "v16|gemm_coop_4096_v16|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v16|gemm_any_coop_4096|gemm|ws_cooperative|4096 4096 4096|hopper|shapes=runtime TN=256"
    "v16|gemm_any_coop_odd_4096x4096x4095|gemm|ws_cooperative|4096 4096 4095|hopper|shapes=runtime TN=256"
    "v16|gemm_any_pingpong_2048|gemm|ws_pingpong|2048 2048 2048|hopper|shapes=runtime"
    # Session 29: 2x1 / 1x2 clusters with TMA multicast (B or A), against the same schedule
    # without (gemm_coop_4096_v16 above and the two below); the model predicts 1.36x / 1.32x at
    # 4096^3 (hopper_prediction.json).
    "v17|gemm_coop_4096_v17|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v17|gemm_coop_4096_cm2|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 cluster_m=2"
    "v17|gemm_coop_4096_cn2|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 group=1 cluster_n=2"
    "v17|gemm_coop_8192_v17|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
    "v17|gemm_coop_8192_cm2|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 cluster_m=2"
    "v17|gemm_pingpong_4096_cm2|gemm|ws_pingpong|4096 4096 4096|hopper|cluster_m=2"
    "v17|gemm_coop_2048_cm2|gemm|ws_cooperative|2048 2048 2048|hopper|TN=256 cluster_m=2"
)
# Session 33: f16 operands (wgmma .f16, FLOAT16 tensor maps) in the smoke set; skinny decode
# shapes, f16 against cuBLAS f16 and bf16 in the same run (v18).
configs+=(
    "smoke5|gemm_f16_pingpong_128x128x64|gemm|ws_pingpong|128 128 64|hopper|in=f16"
    "smoke5|gemm_f16_coop_200x520x72_f32|gemm|ws_cooperative|200 520 72|hopper|TN=256 in=f16 out=f32"
    "smoke5|gemm_f16_pipelined_96x127x31|gemm|pipelined|96 127 31|hopper|in=f16"
    "smoke5|gemm_f16_ws_256x384x128_2sm|gemm|ws|256 384 128|hopper:sms=2|in=f16"
    "smoke5|gemm_f16_any_pingpong_1000x1096x520|gemm|ws_pingpong|1000 1096 520|hopper|shapes=runtime in=f16"
    "smoke5|gemm_f16_coop_cm2_384x512x128|gemm|ws_cooperative|384 512 128|hopper|TN=256 cluster_m=2 in=f16"
    "smoke|gemm_f16_out_pingpong_200x136x72|gemm|ws_pingpong|200 136 72|hopper|in=f16 out=f16"
    "v18|gemm_f16_coop_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 in=f16"
    "v18|gemm_f16_f16out_coop_4096|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 in=f16 out=f16"
    "v18|gemm_bf16_coop_4096_v18|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v18|gemm_f16_pingpong_2048|gemm|ws_pingpong|2048 2048 2048|hopper|in=f16"
    "v18|gemm_skinny_1x4096x4096|gemm|ws_pingpong|1 4096 4096|hopper"
    "v18|gemm_skinny_16x4096x4096|gemm|ws_pingpong|16 4096 4096|hopper"
    "v18|gemm_skinny_64x4096x4096|gemm|ws_pingpong|64 4096 4096|hopper"
    "v18|gemm_skinny_1x8192x8192|gemm|ws_pingpong|1 8192 8192|hopper"
    "v18|gemm_skinny_16x8192x8192|gemm|ws_pingpong|16 8192 8192|hopper"
    "v18|gemm_skinny_64x8192x8192|gemm|ws_pingpong|64 8192 8192|hopper"
    "v18|gemm_skinny_coop_64x8192x8192|gemm|ws_cooperative|64 8192 8192|hopper|TN=256"
    "v18|gemm_mis_3000x5000x2000|gemm|ws_cooperative|3000 5000 2000|hopper|TN=256"
    "v18|gemm_mis_4000|gemm|ws_cooperative|4000 4000 4000|hopper|TN=256"
    "v18|gemm_mis_3072x5000x2000|gemm|ws_cooperative|3072 5000 2000|hopper|TN=256"
)
# Session 35: MMA operands of more than 256 rows, copied as equal boxes of rows (never run on a
# GPU yet: the smoke set checks them).
configs+=(
    "smoke|gemm_coop_tm512_1000x256x1024|gemm|ws_cooperative|1000 256 1024|hopper|TM=512 TN=64"
    "smoke|gemm_coop_tk512_1000x256x1024|gemm|ws_cooperative|1000 256 1024|hopper|TK=512 TN=64"
)
# Session 35: skinny decode shapes with smaller tiles (more CTAs than 4096 / 128 = 32), beside
# v18's 128-wide tiles and cuBLAS: how far tiles alone go before split-K.
configs+=(
    "v19|skinny_pp_tn64_16x4096x4096|gemm|ws_pingpong|16 4096 4096|hopper|TN=64"
    "v19|skinny_ws_64x64_16x4096x4096|gemm|ws|16 4096 4096|hopper|TM=64 TN=64"
    "v19|skinny_ws_64x32_16x4096x4096|gemm|ws|16 4096 4096|hopper|TM=64 TN=32"
    "v19|skinny_ws_64x64_64x4096x4096|gemm|ws|64 4096 4096|hopper|TM=64 TN=64"
    "v19|skinny_ws_64x64_1x8192x8192|gemm|ws|1 8192 8192|hopper|TM=64 TN=64 stages=6"
    "v19|skinny_ws_64x64_64x8192x8192|gemm|ws|64 8192 8192|hopper|TM=64 TN=64 stages=6"
    "v19|skinny_pp_tn64_16x8192x8192|gemm|ws_pingpong|16 8192 8192|hopper|TN=64 TK=128"
    "v19|skinny_ws_64x32_16x8192x8192|gemm|ws|16 8192 8192|hopper|TM=64 TN=32"
)
# Session 35: the runtime-shape kernels' producer (168 instructions per k-step against the fixed
# kernel's 100: the divisions of TMA coordinates) and their 3 stages, against the same schedule
# for fixed shapes with 4 and 3 stages.
configs+=(
    "v20|gemm_coop_4096_v20|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v20|gemm_coop_4096_s3|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 stages=3"
    "v20|gemm_any_coop_4096_v20|gemm|ws_cooperative|4096 4096 4096|hopper|shapes=runtime TN=256"
    "v20|gemm_any_coop_8192|gemm|ws_cooperative|8192 8192 8192|hopper|shapes=runtime TN=256"
    "v20|gemm_any_pingpong_2048_v20|gemm|ws_pingpong|2048 2048 2048|hopper|shapes=runtime"
    "v20|gemm_any_pingpong_1000x1096x520_v20|gemm|ws_pingpong|1000 1096 520|hopper|shapes=runtime"
    "v20|gemm_any_coop_odd_201x137x71_v20|gemm|ws_cooperative|201 137 71|hopper|shapes=runtime TN=256"
    "v20|attention_any_4096x4096x128|attention_scores|ws_pingpong|4096 4096 128|hopper|shapes=runtime"
    "v20|rmsnorm_any_8192x8192|rmsnorm|double_buffered|8192 8192|hopper|shapes=runtime"
    "v20|gemm_any_ws_1x256x512_v20|gemm|ws|1 256 512|hopper|shapes=runtime"
    "v20|attention_any_200x136x128_v20|attention_scores|ws_pingpong|200 136 128|hopper|shapes=runtime"
    "v20|elementwise_any_odd_807x5_v20|elementwise|double_buffered|807 5|hopper|shapes=runtime"
    "v20|rmsnorm_any_odd_101x7_v20|rmsnorm|double_buffered|101 7|hopper|shapes=runtime"
)
# Session 36: the H100's bench set again on the H200 timed back to back, beside clusters
# (CTA-scope arrivals since session 34) at 4096^3 / 8192^3 and attention at 8192 (its 128 x 256 tile does not fit the registers).
configs+=(
    "v21|gemm_coop_4096_cm2_v21|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 cluster_m=2 group=8"
    "v21|gemm_coop_4096_cn2_v21|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 cluster_n=2 group=8"
    "v21|gemm_coop_8192_cm2_v21|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 cluster_m=2 group=8"
    "v21|gemm_coop_8192_cn2_v21|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256 cluster_n=2 group=8"
    "v21|attention_8192x8192x128_v21|attention_scores|ws_pingpong|8192 8192 128|hopper"
)
# Session 36: the runtime-shape kernels after TailProof (no tail check left; v20 ran the 4096^3
# coop 0.905 of cuBLAS with its checks, 0.987 without), beside the fixed-shape kernel; and calls
# with a B taller than A's K whose extra rows are NaN (`_tallb`: the harness adds 5 rows), which
# trapped before the tensor maps ended at the read extents.
configs+=(
    "v22|gemm_coop_4096_v22|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v22|gemm_any_coop_4096_v22|gemm|ws_cooperative|4096 4096 4096|hopper|shapes=runtime TN=256"
    "v22|gemm_any_coop_8192_v22|gemm|ws_cooperative|8192 8192 8192|hopper|shapes=runtime TN=256"
    "v22|gemm_any_pingpong_2048_v22|gemm|ws_pingpong|2048 2048 2048|hopper|shapes=runtime"
    "v22|attention_any_4096x4096x128_v22|attention_scores|ws_pingpong|4096 4096 128|hopper|shapes=runtime"
    "v22|gemm_any_pingpong_1000x1096x520_tallb|gemm|ws_pingpong|1000 1096 520|hopper|shapes=runtime"
    "v22|gemm_any_coop_odd_201x137x71_tallb|gemm|ws_cooperative|201 137 71|hopper|shapes=runtime TN=256"
    "v22|gemm_any_ws_1x256x520_tallb|gemm|ws|1 256 520|hopper|shapes=runtime"
)
# Session 37: attention scores at 8192 (0.68 of cuBLAS in session 36: the f32 output, 256 MiB,
# no longer fits L2) by tile shape, stages and schedule, beside the default in one process.
configs+=(
    "v23|attention_8192x8192x128_v23|attention_scores|ws_pingpong|8192 8192 128|hopper"
    "v23|attention_8192x8192x128_tn64_v23|attention_scores|ws_pingpong|8192 8192 128|hopper|TN=64"
    "v23|attention_8192x8192x128_tm64_v23|attention_scores|ws_pingpong|8192 8192 128|hopper|TM=64"
    "v23|attention_8192x8192x128_s2_v23|attention_scores|ws_pingpong|8192 8192 128|hopper|stages=2"
    "v23|attention_8192x8192x128_s4_v23|attention_scores|ws_pingpong|8192 8192 128|hopper|stages=4"
    "v23|attention_8192x8192x64_v23|attention_scores|ws_pingpong|8192 8192 64|hopper"
    "v23|attention_4096x4096x128_v23|attention_scores|ws_pingpong|4096 4096 128|hopper"
)
# Session 37: the f32-output kernels against cuBLAS writing f32 too (until then the harness timed
# cuBLAS writing bf16, half the bytes: ncu showed 242 MB written by attention at 8192 against
# cuBLAS's 108 MB), beside a bf16 GEMM as the control.
configs+=(
    "v24|attention_4096x4096x128_v24|attention_scores|ws_pingpong|4096 4096 128|hopper"
    "v24|attention_8192x8192x128_v24|attention_scores|ws_pingpong|8192 8192 128|hopper"
    "v24|attention_8192x8192x128_tm64_v24|attention_scores|ws_pingpong|8192 8192 128|hopper|TM=64"
    "v24|attention_8192x8192x64_v24|attention_scores|ws_pingpong|8192 8192 64|hopper"
    "v24|attention_any_4096x4096x128_v24|attention_scores|ws_pingpong|4096 4096 128|hopper|shapes=runtime"
    "v24|gemm_coop_f32_4096_v24|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256 out=f32"
    "v24|gemm_pingpong_f32_4096_v24|gemm|ws_pingpong|4096 4096 4096|hopper|out=f32"
    "v24|gemm_coop_4096_v24|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
)
# Session 37: the GEMMs whose copies without the warpgroup barrier before each release of a ring
# slot (`_nosync`, made by hand from these: thread 0 arrives after its own wgmma wait, as
# FlashAttention-3's pipelines do) measure what that barrier costs.
configs+=(
    "v25|gemm_coop_4096_v25|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v25|gemm_coop_8192_v25|gemm|ws_cooperative|8192 8192 8192|hopper|TN=256"
    "v25|gemm_pingpong_2048_v25|gemm|ws_pingpong|2048 2048 2048|hopper"
)
# Session 37: the thread-copy variant (0.18x cuBLAS at K = 4095) by the loads each producer
# thread keeps in flight (`_b8`, `_b16`: copies built with TANDEM_HOPPER_THREAD_COPY_BATCH).
configs+=(
    "v26|gemm_any_coop_odd_4096x4096x4095_v26|gemm|ws_cooperative|4096 4096 4095|hopper|shapes=runtime TN=256"
    "v26|gemm_any_coop_odd_201x137x71_v26|gemm|ws_cooperative|201 137 71|hopper|shapes=runtime TN=256"
)
# Session 37: batched GEMMs (the conformance suite's batched_matmul, layout nt, f32 out) against
# cuBLAS's strided batch writing f32: attention-head and expert shapes.
configs+=(
    "v27|batched_coop_16x1024x1024x1024|batched_matmul|ws_cooperative|16 1024 1024 1024|hopper|stages=4"
    "v27|batched_pingpong_16x1024x1024x1024|batched_matmul|ws_pingpong|16 1024 1024 1024|hopper|stages=2"
    "v27|batched_pipelined_16x1024x1024x1024|batched_matmul|pipelined|16 1024 1024 1024|hopper|stages=4"
    "v27|batched_coop_64x512x512x128|batched_matmul|ws_cooperative|64 512 512 128|hopper|TN=256 stages=2"
    "v27|batched_pingpong_64x512x512x128|batched_matmul|ws_pingpong|64 512 512 128|hopper|stages=2"
    "v27|batched_coop_8x2048x2048x2048|batched_matmul|ws_cooperative|8 2048 2048 2048|hopper|stages=4"
)
# For the next GPU session: the variants by row pitch (session 37, model only): at K = 4095 only
# A's tiles are thread-copied (B and C by TMA); at N = 4095 B's and C's (two pitches: the variant
# that thread-copies all); the fixed-shape kernel beside them.
configs+=(
    "v28|gemm_coop_4096_v28|gemm|ws_cooperative|4096 4096 4096|hopper|TN=256"
    "v28|gemm_any_coop_odd_4096x4096x4095_v28|gemm|ws_cooperative|4096 4096 4095|hopper|shapes=runtime TN=256"
    "v28|gemm_any_coop_odd_4096x4095x4096_v28|gemm|ws_cooperative|4096 4095 4096|hopper|shapes=runtime TN=256"
    "v28|gemm_any_pingpong_odd_2048x2048x2047_v28|gemm|ws_pingpong|2048 2048 2047|hopper|shapes=runtime"
    "v28|gemm_any_ws_odd_1000x1096x519_v28|gemm|ws|1000 1096 519|hopper|shapes=runtime"
)
# For issue 35 (session 60, model only): how many bytes an SM must keep in flight to reach the
# HBM bound. The same elementwise copy (3 inputs, 1 output, 1 GB at 8192 x 8192) with 4 KB to
# 16 KB tiles, 2 to 4 stages and 1 to 4 persistent CTAs per SM, or a CTA per tile: its loads in
# flight per SM go from 12 KB (4 KB tiles, one CTA, two stages) to over 100 KB. Model v11
# (hbm_latency 1000) puts every one at 0.96-1.0 of the HBM bound; the lone persistent CTAs of
# rmsnorm (p1) ran at 0.38-0.58 of the model's time, which a loaded latency of 2-4 us would
# explain. The GPU's times for these say which latency, and whether it grows with the load.
configs+=(
    "v29|elementwise_inflight_4k_p1|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=4 ctas_per_sm=1"
    "v29|elementwise_inflight_4k_p1_s4|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=4 ctas_per_sm=1 stages=4"
    "v29|elementwise_inflight_4k_p2|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=4 ctas_per_sm=2"
    "v29|elementwise_inflight_4k_p4|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=4 ctas_per_sm=4"
    "v29|elementwise_inflight_4k_cta|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=4"
    "v29|elementwise_inflight_16k_p1|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=16 ctas_per_sm=1"
    "v29|elementwise_inflight_16k_p1_s3|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=16 ctas_per_sm=1 stages=3"
    "v29|elementwise_inflight_16k_p2|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=16 ctas_per_sm=2"
    "v29|elementwise_inflight_16k_cta|elementwise|double_buffered|8192 8192|hopper|TX=256 TY=16"
)
# TANDEM_GPU_SETS (default "smoke bench"): the sets emitted, built and run.
sets="${TANDEM_GPU_SETS:-smoke bench}"

# What a kernel is, for telling later whether today's emitter still writes it: the first 16 hex
# digits of the SHA-256 of its CUDA followed by the runtime's files (in byte order of their
# paths). benchmarks/hopper_model_vs_gpu.py calls this function on today's emit.
kernel_hash() {
    { cat "$1"; find "$root/backends/hopper/runtime" -type f | LC_ALL=C sort | xargs cat; } |
        sha256sum | cut -c1-16
}

emit() {
    rm -rf "$kernels"
    mkdir -p "$kernels"
    : > "$kernels/registry.inc"
    : > "$kernels/sets.txt"
    : > "$kernels/hashes.txt"
    git -C "$root" describe --always --dirty > "$kernels/commit"
    local failed=0
    for config in "${configs[@]}"; do
        IFS='|' read -r set name app schedule sizes target more <<< "$config"
        [[ " $sets " == *" $set "* ]] || continue
        read -r a b c d <<< "$sizes"
        # A runtime-shape kernel is compiled at the app's default extents (estimates) and run at
        # `sizes`.
        local runtime=0 emitter
        [[ " $more " == *" shapes=runtime "* ]] && runtime=1
        if [ "$app" = batched_matmul ]; then
            # The conformance suite's generator (a user's kernel): B M N K, layout nt, f32 out.
            emitter=("$generators" -g batched_matmul -o "$kernels" -f "$name" -e cuda
                     target=$target schedule=$schedule B=$a M=$b N=$c K=$d $more)
        else
            case "$app" in
                gemm) params=(--param M=$a --param N=$b --param K=$c) ;;
                attention_scores) params=(--param Lq=$a --param Lk=$b --param D=$c) ;;
                elementwise) params=(--param W=$a --param H=$b); c=0 ;;
                rmsnorm) params=(--param D=$a --param R=$b); c=0 ;;
            esac
            [ $runtime = 1 ] && params=()
            for kv in $more; do params+=(--param "$kv"); done
            emitter=("$cli" emit "$app" --target "$target" --schedule "$schedule" --what cuda
                     --name "$name" "${params[@]}" -o "$kernels")
        fi
        if ! "${emitter[@]}" > "$kernels/$name.emit.log" 2>&1; then
            echo "not emitted: $name: $(tail -1 "$kernels/$name.emit.log")"
            failed=$((failed + 1))
            continue
        fi
        # The output's type: gemm's out= (bf16 by default); attention's scores, the streaming
        # apps' and batched_matmul's outputs are f32.
        local out_type=bf16
        [[ $app != gemm ]] && out_type=f32
        [[ " $more " == *" out=f32 "* ]] && out_type=f32
        [[ " $more " == *" out=f16 "* ]] && out_type=f16
        local in_type=bf16
        [[ " $more " == *" in=f16 "* ]] && in_type=f16
        if [ "$app" = batched_matmul ]; then
            echo "TANDEM_KERNEL_BATCHED($name, \"$app\", \"$schedule\", $a, $b, $c, $d, \"$out_type\", \"$in_type\")" >> "$kernels/registry.inc"
        elif [ $runtime = 1 ]; then
            local count
            count=$(sed -n 's|^ \* extents: the runtime extents, in argument and dim order: \(.*\)\.$|\1|p' \
                "$kernels/$name.cu" | head -1 | wc -w)
            echo "TANDEM_KERNEL_ANY($name, \"$app\", \"$schedule\", $a, $b, $c, \"$out_type\", \"$in_type\", $count)" >> "$kernels/registry.inc"
        else
            echo "TANDEM_KERNEL($name, \"$app\", \"$schedule\", $a, $b, $c, \"$out_type\", \"$in_type\")" >> "$kernels/registry.inc"
        fi
        echo "$set $name" >> "$kernels/sets.txt"
        echo "$name $(kernel_hash "$kernels/$name.cu")" >> "$kernels/hashes.txt"
    done
    echo "emitted $(wc -l < "$kernels/sets.txt") kernels into $kernels ($failed not emitted)"
    [ "$failed" -eq 0 ]
}

build() {
    [ -f "$kernels/registry.inc" ] || { echo "no kernels: run '$0 emit' first" >&2; exit 1; }
    local bin="$kernels/bin"
    rm -rf "$bin"
    mkdir -p "$bin/release" "$bin/debug"
    local flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I"$root/backends/hopper/runtime"
                 -I"$kernels")
    local jobs
    jobs=$(nproc)
    # One object per kernel and variant, in parallel; ptxas's resource report kept.
    ls "$kernels"/*.cu | sed 's|.*/||; s|\.cu$||' | xargs -P "$jobs" -I{} sh -c "
        nvcc ${flags[*]} -Xptxas -v -c '$kernels/{}.cu' -o '$bin/release/{}.o' > '$bin/release/{}.ptxas.log' 2>&1 &&
        nvcc ${flags[*]} -DTANDEM_HOPPER_SPIN_LIMIT=4000000000LL -c '$kernels/{}.cu' -o '$bin/debug/{}.o' 2>&1 ||
        echo 'build failed: {}'"
    local failed=0 name floor used
    for cu in "$kernels"/*.cu; do
        name=$(basename "$cu" .cu)
        if [ ! -f "$bin/release/$name.o" ] || [ ! -f "$bin/debug/$name.o" ]; then
            echo "build failed: $name"; sed -n 1,20p "$bin/release/$name.ptxas.log"; failed=$((failed + 1)); continue
        fi
        # setmaxnreg.inc blocks until the CTA's pool holds what the roles ask: the launch must
        # allocate at least the floor the emitter wrote.
        floor=$(sed -n 's|^// setmaxnreg floor: \([0-9]*\) registers.*|\1|p' "$cu")
        used=$(sed -n 's|.*Used \([0-9]*\) registers.*|\1|p' "$bin/release/$name.ptxas.log" | head -1)
        if [ -n "$floor" ] && [ "${used:-0}" -lt "$floor" ]; then
            echo "refused: $name: ptxas allocates ${used:-?} registers per thread, its setmaxnreg roles need $floor"
            failed=$((failed + 1))
        fi
    done
    nvcc "${flags[@]}" -c "$here/harness.cu" -o "$bin/harness.o"
    nvcc "${flags[@]}" "$bin/harness.o" "$bin"/release/*.o -lcublas -o "$bin/harness"
    nvcc "${flags[@]}" "$bin/harness.o" "$bin"/debug/*.o -lcublas -o "$bin/harness_debug"
    cat "$bin"/release/*.ptxas.log > "$bin/ptxas.log"
    echo "built $bin/harness and $bin/harness_debug ($(grep -c 'Used' "$bin/ptxas.log") kernel functions, $failed failed)"
    [ "$failed" -eq 0 ]
}

# The conformance suite's user kernels as hopper libraries with their runners, and the problem
# each one's --run checked on the model (inputs and reference output), into kernels/conformance/
# (built in TANDEM_BUILD, default build/, with TANDEM_CONFORMANCE_ON_GPU on).
conformance() {
    local build="${TANDEM_BUILD:-$root/build}" to="$kernels/conformance"
    cmake -S "$root" -B "$build" -DTANDEM_CONFORMANCE_ON_GPU=ON > /dev/null
    cmake --build "$build" --target conformance_on_gpu
    rm -rf "$to"
    mkdir -p "$to/bin" "$to/saved" "$to/bench"
    cp "$build"/tests/conformance/conformance_*_hopper_run "$to/bin/"
    mv "$to"/bin/conformance_bench_*_run "$to/bench/"
    cp -r "$build"/tests/conformance/gpu/. "$to/saved/"
    echo "conformance: $(ls "$to/bin" | wc -l) hopper runners, $(ls "$to/saved" | wc -l) saved problems, $(ls "$to/bench" | wc -l) timed in $to"
}

# Runs one kernel as its own process; a hang, trap or crash becomes a row naming it.
run_one() {
    local binary=$1 name=$2 mode=$3 limit=$4 row
    local err="/tmp/tandem_gpu_err"
    set +e
    row=$(timeout "$limit" "$binary" "$name" "$mode" 2> "$err")
    local rc=$?
    set -e
    if [ $rc -eq 0 ] && [ -n "$row" ]; then
        # The kernel's hash (emit's hashes.txt) goes with its row.
        local hash
        hash=$(awk -v n="$name" '$1 == n {print $2}' "$kernels/hashes.txt" 2>/dev/null || true)
        [ -n "$hash" ] && row="${row%\}}, \"kernel_hash\": \"$hash\"}"
        echo "$row"
    else
        local why="error"
        [ $rc -eq 124 ] && why="timeout (hang)"
        grep -q "stuck" "$err" && why="mbarrier wait stuck (trap)"
        printf '{"name": "%s", "mode": "%s", "correct": false, "failure": "%s", "rc": %d, "stderr": %s}\n' \
            "$name" "$mode" "$why" "$rc" "$(head -c 600 "$err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')"
    fi
}

gpu() {
    [ -f "$kernels/registry.inc" ] || { echo "no kernels: run '$0 emit' first" >&2; exit 1; }
    [ -x "$kernels/bin/harness" ] || build
    local bin="$kernels/bin" results="$root/benchmarks/results"
    mkdir -p "$results"
    # The log is written where it comes back even if the call is cut off ($OUT on the device tool).
    local log="${OUT:-$results}/gpu_hopper.log" started=$SECONDS
    # Each row is appended as its kernel finishes (what a cut-off call still brings back).
    local rows="${OUT:-$results}/gpu_hopper.rows.jsonl"
    : > "$rows"
    {
        echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
        echo "# command: benchmarks/gpu/run.sh gpu; kernels emitted at commit $(cat "$kernels/commit")"
        nvcc --version | tail -1
        echo "## check_tail after a clamp (micro/check_tail_clamp.cu: 2 and 3 must print no error)"
        if nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$root/backends/hopper/runtime" \
            "$here/micro/check_tail_clamp.cu" -o /tmp/check_tail_clamp; then
            for v in 2 3 4; do /tmp/check_tail_clamp $v || true; done
        fi
        echo "## smoke set (debug build: a stuck mbarrier wait traps and reports)"
        awk '$1 ~ /^smoke/ {print $2}' "$kernels/sets.txt" | while read -r name; do
            run_one "$bin/harness_debug" "$name" check 30 | tee -a "$rows"
        done
        if [ -d "$kernels/conformance" ]; then
            echo "## conformance user kernels (hopper libraries) against the problem their --run checked"
            for runner in "$kernels"/conformance/bin/*_run; do
                local case_name
                case_name=$(basename "$runner" _hopper_run); case_name=${case_name#conformance_}
                set +e
                local said
                said=$(timeout 30 "$runner" --check "$kernels/conformance/saved/$case_name" 2>&1)
                local rc=$?
                set -e
                printf '{"name": "conformance_%s", "app": "conformance", "correct": %s, "rc": %d, "output": %s}\n' \
                    "$case_name" "$([ $rc -eq 0 ] && echo true || echo false)" "$rc" \
                    "$(printf '%s' "$said" | head -c 600 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" | tee -a "$rows"
            done
        fi
        if [ -d "$kernels/conformance/bench" ]; then
            echo "## attention libraries against torch scaled_dot_product_attention (attention_vs_sdpa.py)"
            python3 "$here/attention_vs_sdpa.py" "$kernels/conformance/bench" | tee -a "$rows"
            echo "## linear libraries (FP8, bf16) against torch._scaled_mm and torch.matmul (matmul_vs_torch.py)"
            python3 "$here/matmul_vs_torch.py" "$kernels/conformance/bench" | tee -a "$rows"
        fi
        echo "## benchmark set"
        awk '$1 !~ /^smoke/ {print $2}' "$kernels/sets.txt" | while read -r name; do
            run_one "$bin/harness" "$name" bench 120 | tee -a "$rows"
        done
        if [ -n "${TANDEM_GPU_NCU:-}" ]; then
            # What the model assumes of a kernel, measured: the CTAs an SM held (achieved
            # occupancy and its launch limits, against HopperParams::resident_ctas), the L2 hit
            # rate and the DRAM bytes (a second read of a row from L2 or HBM). One timed launch
            # each, the clocks left alone.
            echo "## Nsight Compute on TANDEM_GPU_NCU: occupancy, L2 hit rate, DRAM bytes"
            local metrics="gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
            metrics+=",launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers"
            metrics+=",launch__occupancy_limit_warps,launch__occupancy_limit_blocks,launch__registers_per_thread"
            metrics+=",lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum"
            local ncu
            ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
            for name in $TANDEM_GPU_NCU; do
                if [ $((SECONDS - started)) -gt "${TANDEM_GPU_DEADLINE:-420}" ]; then echo "skipped: ncu $name (deadline)"; continue; fi
                echo "### ncu $name"
                timeout 60 "$ncu" --clock-control none -k "regex:$name" --launch-skip 3 --launch-count 1 \
                    --metrics "$metrics" --csv --page details "$bin/harness" "$name" bench 2>&1 |
                    python3 -c '
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 3]
header = next((r for r in rows if "Metric Name" in r), None)
if header is None:
    sys.exit("no metrics (ncu said: " + " ".join(" ".join(r) for r in rows[-2:]) + ")")
name, unit, value = (header.index(k) for k in ("Metric Name", "Metric Unit", "Metric Value"))
for r in rows:
    if r is not header and len(r) > value:
        print("ncu", r[name], r[value], r[unit])' || true
            done
        fi
        echo "## SASS: HGMMA count, local loads/stores (LDL/STL) per kernel function"
        cuobjdump -sass "$bin/harness" | awk '
            /Function :/ {name=$3; seen[name]=1} /HGMMA/ {h[name]++} /LDL|STL/ {l[name]++}
            END {for (n in seen) printf "sass %s HGMMA=%d LDL_STL=%d\n", n, h[n], l[n]}' | sort
        echo "## resource usage (ptxas)"
        grep -E "Compiling entry|Used|spill" "$bin/ptxas.log" | sed 's/^ptxas info *: //' | paste - - - | sed 's/\t/ | /g'
        echo "## compute-sanitizer on the smallest kernels (while time is left)"
        # Those never sanitized first (batched, clusters, runtime shapes, attention, f16), then the
        # rest.
        for name in batched_matmul_coop_5x200x136x72 batched_matmul_pingpong_4x130x70x100 \
                    gemm_pingpong_cn2_200x136x72 gemm_coop_cm2_384x100x128 gemm_ws_cn2_130x390x70 \
                    gemm_any_ws_cooperative_200x136x72 gemm_any_ws_cooperative_odd_201x137x71 \
                    attention_200x136x72 gemm_f16_pingpong_128x128x64 elementwise_any_odd_807x5 \
                    gemm_ws_pingpong_128x128x64 gemm_ws_cooperative_256x384x128_2sm gemm_ws_pingpong_256x384x128_2sm \
                    gemm_pipelined_128x128x64 gemm_ws_128x128x64 elementwise_double_buffered_807x5 \
                    rmsnorm_double_buffered_100x7 gemm_coop_256x384x128_2sm gemm_coop_200x520x72_f32 \
                    rmsnorm_p1_1000x77_2sm rmsnorm_p1_2048x9_td512_2sm gemm_pingpong_256x384x136_f32_2sm \
                    rmsnorm_cta_1000x77_rb8 rmsnorm_p2_512x45_2sm rmsnorm_wg2_1000x77 rmsnorm_wg2_4096x64_2sm; do
            grep -q " $name\$" "$kernels/sets.txt" || continue
            for tool in memcheck racecheck; do
                if [ $((SECONDS - started)) -gt "${TANDEM_GPU_DEADLINE:-420}" ]; then echo "skipped: $tool $name (deadline)"; continue; fi
                echo "### $tool $name"
                timeout 60 compute-sanitizer --tool "$tool" --print-limit 10 "$bin/harness" "$name" check 2>&1 | tail -6 || true
            done
        done
        # The conformance libraries at their smallest shapes (a race among the threads of one
        # CTA is only the GPU's: session 45's one-column operand tiles), while time is left.
        for runner in "$kernels"/conformance/bin/*_ones_hopper_run "$kernels"/conformance/bin/*_primes_hopper_run; do
            [ -x "$runner" ] || continue
            local case_name
            case_name=$(basename "$runner" _hopper_run); case_name=${case_name#conformance_}
            if [ $((SECONDS - started)) -gt "${TANDEM_GPU_DEADLINE:-420}" ]; then echo "skipped: racecheck $case_name (deadline)"; continue; fi
            echo "### racecheck conformance_$case_name"
            timeout 60 compute-sanitizer --tool racecheck --print-limit 10 "$runner" --check "$kernels/conformance/saved/$case_name" 2>&1 | tail -3 || true
        done
    } 2>&1 | tee "$log"
    grep '^{' "$log" | python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin], indent=1))' \
        > "$results/gpu_hopper.json"
    [ "$log" -ef "$results/gpu_hopper.log" ] || cp "$log" "$results/gpu_hopper.log"
    if [ -n "${OUT:-}" ]; then cp "$results/gpu_hopper.json" "$OUT/"; fi
    python3 - "$results/gpu_hopper.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
print(f"{len(rows)} rows, {sum(r.get('correct') is True for r in rows)} correct")
for r in rows:
    extra = r.get('failure') or r.get('ratio_vs_cublas') or r.get('fraction_of_copy') or ''
    print(f"{r['name']:44s} {str(r.get('correct')):5s} err={r.get('max_rel_err', '-')} bad={r.get('mismatches', '-')} "
          f"first={r.get('first_bad', '-')} diff={r.get('launches_differing', '-')} {extra}")
EOF
}

case "${1:-}" in
    emit) emit ;;
    build) build ;;
    dry) emit && build ;;
    conformance) conformance ;;
    gpu) gpu ;;
    *) echo "usage: $0 emit|build|dry|conformance|gpu" >&2; exit 2 ;;
esac
