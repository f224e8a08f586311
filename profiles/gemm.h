/* gemm.h - the time of one GPU kernel from its shape (issue 15, item 4).
 *
 * A GEMM C (m x n) = A (m x k) B (k x n), `batch` of them in one kernel, is
 * cut into output tiles of tile_m x tile_n (either orientation, the one
 * with fewer padded tiles); every multiprocessor computes one tile at a
 * time over the whole of k, so the tiles run in
 *     waves = ceil(tiles / sms)
 * and a wave takes as long as one full tile on one multiprocessor:
 *     compute = waves x 2 tile_m tile_n k / (peak x gemm_efficiency / sms)
 * A kernel also moves its operands at least once through memory, so
 *     gemm = max(compute, E batch (m k + k n + m n) / bandwidth) + launch
 * which gives the fall-off of small matrices: padded tiles (tile
 * quantisation), a last wave that leaves multiprocessors idle (wave
 * quantisation), operands that take longer to read than to multiply, and a
 * fixed cost per kernel.  Element-wise kernels (norms, activations,
 * softmax, dropout, residual adds, bias gradients) are memory-bound:
 *     mem = bytes / bandwidth + launch
 * A fused (flash) attention kernel runs at a published fraction of peak:
 *     fused = FLOPs / (peak x attention_efficiency) + launch
 * The parameters are the device's cluster_kernels (profiles/devices.json),
 * from whitepapers and published kernel measurements; their sources and
 * what the model leaves out are in docs/compute.md.
 *
 * Pure arithmetic, no allocation.  Sizes are doubles (counts of elements,
 * exact below 2^53); times are seconds.
 */
#ifndef CL_PROF_GEMM_H
#define CL_PROF_GEMM_H

#include "profiles/cluster.h"

/* The tensor-core peak a kernel on elem-byte operands runs against: the
 * fp16/bf16 one for 2-byte elements when the device gives it, else fp32
 * (cluster_flops without the efficiency). */
double prof_peak(const cluster_devtype *t, int elem);

/* Waves of a GEMM of `batch` m x n outputs on k's device (the orientation
 * of the tile with fewer tiles); 0 when any size is 0. */
double prof_gemm_waves(const cluster_kernels *k, double m, double n, double batch);

/* Seconds of one GEMM kernel (see above) on t with elem-byte operands. */
double prof_gemm_s(const cluster_devtype *t, int elem, double m, double n, double k,
                   double batch);

/* 1 when t prices FP8 GEMMs: an FP8 peak and an FP8 GEMM efficiency. */
int prof_fp8(const cluster_devtype *t);

/* Seconds of one FP8 GEMM (Transformer Engine's): the same tiles and waves
 * at the FP8 peak x fp8_gemm_efficiency, 1-byte operands and a 2-byte
 * (bf16) output.  t must be prof_fp8. */
double prof_gemm_fp8_s(const cluster_devtype *t, double m, double n, double k);

/* Seconds of one memory-bound kernel moving `bytes` (read + written). */
double prof_mem_s(const cluster_devtype *t, double bytes);

/* Seconds of one fused attention kernel doing `flops`. */
double prof_fused_s(const cluster_devtype *t, int elem, double flops);

#endif
