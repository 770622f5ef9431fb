mkdir -p $OUT; nvidia-smi --query-gpu=name --format=csv,noheader
FUZZ=5 TARGETS="tilefuse gpu_kernels gpu_pipelines gpu_runtime gpu_scalars gpu_half_precision gpu_choices gpu_config host_memory_limit" LIMIT=200 SKIP_SUITE=1 SEEDS= bash scripts/gpu_session.sh
CASES="16:18 18:67 18:4 18:64 18:36 18:18 18:0" VARIANTS="base;bin:wide-sweep;-" SWEEP_REPS=20 bash scripts/env_grid.sh 2>&1 | tee $OUT/ab2.txt
CASES="18:47 18:54 16:61 16:26 18:10" VARIANTS="base;-;TILEFUSE_GPU_TILE=8192;TILEFUSE_GPU_STAGED_THREADS=256" SWEEP_REPS=20 bash scripts/env_grid.sh 2>&1 | tee $OUT/grid3.txt
