/* gemm.c - one kernel's time from its shape (see gemm.h, docs/compute.md). */
#include <math.h>

#include "profiles/gemm.h"

double prof_peak(const cluster_devtype *t, int elem)
{
    return elem == 2 && t->peak_fp16_flops > 0 ? t->peak_fp16_flops : t->peak_fp32_flops;
}

static double tiles(double m, double n, double batch, double tm, double tn)
{
    return ceil(m / tm) * ceil(n / tn) * batch;
}

/* cuBLAS has both orientations of its large tile and picks the one that
 * pads less; ties keep tile_m along m. */
static double best_tiles(const cluster_kernels *k, double m, double n, double batch)
{
    double a = tiles(m, n, batch, k->tile_m, k->tile_n);
    double b = tiles(m, n, batch, k->tile_n, k->tile_m);
    return a <= b ? a : b;
}

double prof_gemm_waves(const cluster_kernels *k, double m, double n, double batch)
{
    return ceil(best_tiles(k, m, n, batch) / k->sms);
}

double prof_gemm_s(const cluster_devtype *t, int elem, double m, double n, double k,
                   double batch)
{
    const cluster_kernels *kc = &t->kernels;
    if (!(m > 0 && n > 0 && k > 0 && batch > 0)) return 0;
    double per_sm = prof_peak(t, elem) * kc->gemm_efficiency / kc->sms;
    double compute = prof_gemm_waves(kc, m, n, batch) * 2.0 * kc->tile_m * kc->tile_n * k / per_sm;
    double memory = (double)elem * batch * (m * k + k * n + m * n) / t->mem_bw_Bps;
    return (compute > memory ? compute : memory) + kc->launch_s;
}

int prof_fp8(const cluster_devtype *t)
{
    return t->peak_fp8_flops > 0 && t->kernels.fp8_gemm_efficiency > 0 && t->kernels.sms > 0;
}

double prof_gemm_fp8_s(const cluster_devtype *t, double m, double n, double k)
{
    const cluster_kernels *kc = &t->kernels;
    if (!(m > 0 && n > 0 && k > 0)) return 0;
    double per_sm = t->peak_fp8_flops * kc->fp8_gemm_efficiency / kc->sms;
    double compute = prof_gemm_waves(kc, m, n, 1) * 2.0 * kc->tile_m * kc->tile_n * k / per_sm;
    double memory = (m * k + k * n + 2 * m * n) / t->mem_bw_Bps;
    return (compute > memory ? compute : memory) + kc->launch_s;
}

double prof_mem_s(const cluster_devtype *t, double bytes)
{
    if (!(bytes > 0)) return 0;
    return bytes / t->mem_bw_Bps + t->kernels.launch_s;
}

double prof_fused_s(const cluster_devtype *t, int elem, double flops)
{
    if (!(flops > 0)) return 0;
    return flops / (prof_peak(t, elem) * t->kernels.attention_efficiency) + t->kernels.launch_s;
}
