/* check_cuda.c — the CUDA backend against the CPU backend and the float64 reference mode,
 * through the public engine API only (engine.h; kernels are forced with config.kernel).
 *
 * What is checked (thresholds of ARCHITECTURE.md §3.6 and §6.1):
 *   - dtype conversion, dark/flat batches, flat-field and -log against the CPU (1e-6);
 *   - every filter against the CPU (relative L2 1e-5), also after set_filter;
 *   - each kernel against the float64 reference on analytic phantom data: exact kernels
 *     relative L2 <= 2e-5 and max/range <= 1e-4, tex-std (fast) 1e-3 and 3e-3 (AC-2/AC-3);
 *   - a window longer than the texture kernel's constant table (2500 projections);
 *   - odd sizes: widths 250 and 1000, 181 and 1021 projections, a single projection,
 *     non-uniform angles with angular weights, per-projection centres, slices of other
 *     sizes than the detector, scale != 1;
 *   - planes: plane == row (same kernel, 1e-6), plane-exact == alu-exact on rows, ortho
 *     and oblique planes and non-integer z against the CPU, mixed-kernel jobs;
 *   - device-resident frames (a cudaMallocPitch buffer) == host frames;
 *   - the rolling window after N + k projections == a fresh engine of the last N (1e-6);
 *   - refusal of a scan larger than the card (TL_ENOMEM, the engine's message);
 *   - several GPUs (case "split"): row partitions on {0, 0} and, with two GPUs, {0, 1}
 *     against one GPU within the exact mode (rows, ortho-slices, planes, tracked slices,
 *     device frames read peer-to-peer), benchmarks, a device list naming a missing GPU;
 *   - availability, AUTO picking CUDA, the kernel list, benchmarks, empty windows.
 * Sizes are small (each case well under a second on an H100; the whole binary stays
 * practical under compute-sanitizer memcheck and racecheck), inputs deterministic.
 * Exit 77 (skip) without a usable CUDA device or in builds without CUDA; Check runs
 * without fork(), which CUDA does not survive.
 *
 * One program, one case per concern: check_cuda_pipeline.c (availability, preprocessing,
 * filters), check_cuda_kernels.c (kernels against the reference), check_cuda_engine.c
 * (planes, frames in device and pinned memory, the rolling window, memory, benchmarks,
 * tracked slices) and check_cuda_split.c (several GPUs); their helpers are cuda_check.c.
 */
#include "config.h"

#ifndef HAVE_CUDA
int main(void)
{
    return 77; /* this build has no CUDA backend: skip */
}
#else

#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_test.h"

int main(void)
{
    /* cases, so compute-sanitizer can run them as parallel processes (CK_RUN_CASE) */
    const tl_gt_case cases[] = {cc_pipeline_case(), cc_kernels_case(), cc_large_case(),
                                cc_engine_case(), cc_split_case()};
    return tl_gt_main("cuda", cases, sizeof cases / sizeof *cases);
}

#endif /* HAVE_CUDA */
