/* bench_study.c - `cleave bench studies`: wall time of `cleave demo` (target:
 * under a minute on the 2-core development machine) and of a sweep and a
 * comparison, per point, writing <outdir>/studies.csv. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "base/fileio.h"
#include "base/measure.h"
#include "base/spawn.h"
#include "base/status.h"


#define DEMO_TARGET_S 60.0

/* Run `cleave ARGS...` (this very binary, as a user would) with its output
 * discarded; its wall time in seconds, or -1 when it failed.  A process of
 * its own, so the figure includes starting it, and the benchmark stays
 * below the commands it times. */
static double timed(char **args)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = 0;
    char *argv[16];
    int k = 0;
    argv[k++] = self;
    for (char **a = args; *a && k < 15; a++) argv[k++] = *a;
    argv[k] = NULL;
    double t0 = cl_now_s();
    int st = cl_spawn_wait(argv, "/dev/null");
    double dt = cl_now_s() - t0;
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? dt : -1;
}

int study_bench(const char *outdir, int quick)
{
    char tmp[] = "/tmp/cleave-bench-studies-XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "cleave bench studies: cannot make a temporary folder\n");
        return CL_ERUN;
    }
    char demo_dir[200], csv[200];
    snprintf(demo_dir, sizeof demo_dir, "%s/demo", tmp);
    snprintf(csv, sizeof csv, "%s/s.csv", tmp);
    char *demo_av[] = {"demo", "-o", demo_dir, quick ? "--quick" : NULL, NULL};
    double demo_s = timed(demo_av);
    /* VGG-16 on 1 to 32 A100s, 4 schedules: 24 points; no images, so the
     * time is planning and simulation only */
    char *sweep_av[] = {"sweep", "--model", "models/vgg16.json", "--cluster", "profiles/clusters/dgx-a100-4nodes.json",
                        "--devices", quick ? "1,2,4" : "1,2,4,8,16,32", "--schedules", "gpipe,1f1b,zb-h1,fbp",
                        "--csv", csv, "--quiet", NULL};
    int sweep_points = quick ? 12 : 24;
    double sweep_s = timed(sweep_av);
    char *cmp_av[] = {"compare", "--model", "models/gpt2-1.5b.json", "--dataset-size", "1000000", "--clusters",
                      "profiles/clusters/v100-8-pcie.json", "profiles/clusters/dgx-a100-4nodes.json",
                      "--csv", csv, "--quiet", NULL};
    double cmp_s = timed(cmp_av);
    cl_rmtree(tmp);

    char path[1024];
    cl_out o;
    int rc = bench_csv_open(&o, path, sizeof path, outdir, "studies", "what,seconds,per,count,target_s,met");
    if (rc) return rc;
    fprintf(o.f, "%s,%.3f,run,1,%.0f,%s\n", quick ? "demo --quick" : "demo", demo_s, DEMO_TARGET_S,
            demo_s >= 0 && demo_s < DEMO_TARGET_S ? "yes" : "no");
    fprintf(o.f, "sweep vgg16 dgx-a100-4nodes,%.4f,point,%d,,\n", sweep_s >= 0 ? sweep_s / sweep_points : -1.0,
            sweep_points);
    fprintf(o.f, "compare gpt2-1.5b 2 clusters,%.4f,cluster,2,,\n", cmp_s >= 0 ? cmp_s / 2 : -1.0);
    if ((rc = bench_csv_commit(&o, path))) return rc;
    printf("demo%s: %.2f s (target under %.0f s: %s); sweep: %.3f s per point; compare: %.3f s per cluster\n",
           quick ? " --quick" : "", demo_s, DEMO_TARGET_S, demo_s >= 0 && demo_s < DEMO_TARGET_S ? "met" : "NOT met",
           sweep_s / sweep_points, cmp_s / 2);
    return demo_s >= 0 && sweep_s >= 0 && cmp_s >= 0 ? 0 : CL_ERUN;
}
